"""The embedded MuJoCo simulator: FR3 + hand from the franky-sim wheel, table-top tasks.

Layout: ``config.py`` (options), ``env.py`` (the batched env), ``scene.py`` + ``assets/`` (models),
``control.py`` (actions -> joint targets), ``dr_apply.py`` (randomization), ``render.py`` (cameras),
``tasks/`` (reach, push, lift; registered as ``mujoco/fr3-*``), ``experts.py`` (scripted policies).
"""

import os

# Headless machines (CI, cluster nodes) render offscreen through OSMesa unless told otherwise. MuJoCo
# picks its GL backend when it is first imported, so the default has to be set before that.
if not os.environ.get("DISPLAY"):
    os.environ.setdefault("MUJOCO_GL", "osmesa")
    os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
