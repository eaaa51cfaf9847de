"""RoboTwin 2.0 adapter (``rlinf-robotwin-runtime``, GPU node, its own Python 3.10/3.11 venv).

RoboTwin is bimanual; our contract drives one arm. With the ``franka-panda`` embodiment on both
sides, the controlled arm is a Panda (the FR3's kinematics), so our joint_delta actions and our FK
for the TCP apply unchanged; the other arm holds its pose. ``mapping.py`` is numpy only and tested
here on synthetic arrays; ``env.py`` drives ``robotwin.envs.vector_env.VectorEnv``.
"""
