"""Single-process training loops that glue an env, a policy and the algorithm math together.

The math lives in ``rlinf_robot.algorithms`` (pure functions); these loops only collect rollouts,
batch them and call it. The distributed learner (workers/, orchestrator/) reuses the same pieces.
"""
