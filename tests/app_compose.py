"""The app's config composed in-process (no subprocess), for tests that call ``run_job`` directly."""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

from jaxassoc.app import main

PLUGINS = Path(__file__).parent / "plugins"


@contextlib.contextmanager
def app_config(*plugins: str) -> Iterator[Callable[..., DictConfig]]:
    """Import the test plugins named (modules in ``tests/plugins``), register every metric and config, and
    yield ``compose(*overrides)`` for the app's root config."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(PLUGINS))
        for plugin in plugins:  # (re)imported: registers its metrics even if another test reset the registry
            importlib.reload(sys.modules[plugin]) if plugin in sys.modules else importlib.import_module(plugin)
        main.register()
        GlobalHydra.instance().clear()
        try:
            with initialize_config_dir(config_dir=str(main.CONF_DIR), version_base="1.3"):
                yield lambda *overrides: compose(config_name="config", overrides=list(overrides))
        finally:
            GlobalHydra.instance().clear()
