"""Let ManiSkill3 build state-only envs on a machine with no Vulkan render device (CPU-only CI).

Why: even with ``render_backend="none"``, ManiSkill's scene builders create
``sapien.render.RenderMaterial`` objects for every visual, and constructing one needs a Vulkan
device; software Vulkan (Mesa lavapipe) lacks ``descriptorBindingPartiallyBound``, so it fails with
``vk::createInstanceUnique: ErrorIncompatibleDriver``. Physics never reads materials, so replacing the
class with a no-op before the first env is built lets CPU physics run (ManiSkill and SAPIEN look the
class up as ``sapien.render.RenderMaterial`` at call time, so this works even after ``mani_skill`` was
imported). Used only on the adapter's CPU path without images; a GPU node renders for real and never
installs this. It is process-wide: a later GPU env in the same process would get blank materials.
"""

from __future__ import annotations

_installed = False


class _NoRenderMaterial:
    """Accepts any constructor arguments and attribute writes; every method is a no-op."""

    def __init__(self, *args, **kwargs):
        pass

    def __setattr__(self, name, value):
        pass

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def install() -> None:
    global _installed
    if _installed:
        return
    import sapien
    import sapien.render

    sapien.render.RenderMaterial = _NoRenderMaterial
    sapien.pysapien.render.RenderMaterial = _NoRenderMaterial
    _installed = True
