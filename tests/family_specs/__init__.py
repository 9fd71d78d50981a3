"""Conformance specs of the causal families, one module per family folder (``SPECS = [conformance.Spec]``).

:func:`all_specs` collects them for ``tests/test_models_conformance.py`` and its mesh counterpart.
"""

import importlib
import pkgutil


def specs_by_family() -> dict[str, list]:
    """Family module name -> its ``SPECS``."""
    return {m.name: list(importlib.import_module(f"{__name__}.{m.name}").SPECS) for m in pkgutil.iter_modules(__path__)}


def all_specs() -> list:
    """Every module's ``SPECS``, sorted by name (unique names)."""
    specs = [s for family in specs_by_family().values() for s in family]
    names = [s.name for s in specs]
    assert len(names) == len(set(names)), f"duplicate spec names: {names}"
    return sorted(specs, key=lambda s: s.name)
