"""Conformance specs of the causal families, one module per family folder (``SPECS = [conformance.Spec]``).

:func:`all_specs` collects them for ``tests/test_models_conformance.py`` and its mesh counterpart.
"""

import importlib
import pkgutil


def all_specs() -> list:
    """Every module's ``SPECS``, sorted by name (unique names)."""
    specs = []
    for module in pkgutil.iter_modules(__path__):
        specs.extend(importlib.import_module(f"{__name__}.{module.name}").SPECS)
    names = [s.name for s in specs]
    assert len(names) == len(set(names)), f"duplicate spec names: {names}"
    return sorted(specs, key=lambda s: s.name)
