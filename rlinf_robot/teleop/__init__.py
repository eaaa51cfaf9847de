"""Human interventions (HIL-SERL style): an operator takes the arm over mid-episode and hands it back.

``messages`` is the wire format, ``link`` the env's side (inside ``RealEnvWorker``), ``operator``
the operators (scripted expert, keyboard, spacemouse). Intervened steps go through ``env.step`` and
the robot PC's safety filter like the policy's, are flagged ``intervened`` in the episode and its
dataset, and the learners use them as demonstrations (docs/training.md, "Human interventions").
Light: numpy, msgspec and pyzmq only.
"""
