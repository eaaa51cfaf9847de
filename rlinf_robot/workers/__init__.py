"""Workers: thin Ray processes that compose an env, a policy or an algorithm (no algorithm math here).

- ``sim_env.SimEnvWorker``: steps ``sim.make(...)`` envs in micro-batch shards, drives pipelined rollouts.
- ``rollout.RolloutWorker``: policy inference (``policies.make(...)``), receives synced weights.
- ``actor.ActorWorker``: trains the policy (see its module).

All subclass ``rlinf_robot.scheduler.Worker``; import the module you need (nothing is imported here,
so ``import rlinf_robot.workers`` stays light).
"""
