"""ManiSkill3 adapter: its Panda table-top tasks behind our batched contract.

``config.py`` (options), ``mapping.py`` (numpy: our actions -> ManiSkill's normalized ones, its
observations -> our state; unit-tested without ManiSkill), ``cpu_shim.py`` (running without a Vulkan
device), ``env.py`` (the env), ``tasks.py`` (registered as ``maniskill/<task>``).
"""
