"""neurorefiner: morphology-aware multi-agent refinement of 3D neuron segmentations."""

__version__ = "0.1.0"


def _register_config_resolvers() -> None:
    """``${plan:<refiner folder>,<key>}`` for conf/refiner/: registered on import, so every entry point and every
    test that composes the config resolves a refiner's chosen policy the same way."""
    from neurorefiner.io.refiner_plans import register_plan_resolver

    register_plan_resolver()


_register_config_resolvers()
