"""The embedded MuJoCo simulator: FR3 + hand from the franky-sim wheel, table-top tasks.

Layout: ``config.py`` (options), ``env.py`` (the batched env), ``scene.py`` + ``assets/`` (models),
``control.py`` (actions -> joint targets), ``dr_apply.py`` (randomization), ``render.py`` (cameras),
``tasks/`` (reach, push, lift; registered as ``mujoco/fr3-*``), ``experts.py`` (scripted policies).
"""
