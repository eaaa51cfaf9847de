"""``make demo``: the main job on the embedded default, phase by phase (see ``run``)."""
