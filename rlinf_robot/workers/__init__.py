"""Workers: thin processes that compose a policy, an algorithm and an env (no algorithm math here)."""
