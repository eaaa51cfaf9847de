"""Isaac Lab adapter (GPU nodes, Python 3.11/3.12): Franka lift / reach behind our batched contract.

``config.py`` (options), ``mapping.py`` (numpy: Isaac Lab's batched tensors -> our state, our
actions -> its action terms; unit-tested on synthetic arrays), ``env.py`` (the env: one Isaac Sim app
per process, one vectorized env), ``tasks.py`` (registered as ``isaaclab/<task>``, device "gpu").
"""
