"""Each option's default lives in its config dataclass only: a YAML of an option group (metric, stats,
whitening, mesh) may name its schema and set values that *differ* from the dataclass (a preset such as
``mesh=data``), never repeat a default, which would become a second copy that drifts. The model, dataset,
template and audit groups are catalogues of facts (a model's source and kind), not option defaults."""

from pathlib import Path

import pytest
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from jaxassoc.app import main

CONF = Path(__file__).resolve().parents[1] / "conf"
OPTION_GROUPS = ("metric", "stats", "whitening", "mesh")


def _yamls():
    return [p for g in OPTION_GROUPS for p in sorted((CONF / g).glob("*.yaml"))]


def repeated_defaults(path: Path) -> list[str]:
    """The keys of a group YAML whose value equals its schema dataclass's default."""
    main.register()
    group = path.parent.name
    raw = OmegaConf.load(path)
    defaults = raw.get("defaults") or [f"{group}_schema"]
    schema = OmegaConf.structured(ConfigStore.instance().load(f"{group}/{defaults[0]}.yaml").node)
    repeated = []
    for key in raw:
        if key in ("defaults", "name") or OmegaConf.is_missing(schema, key):
            continue
        if OmegaConf.to_container(raw)[key] == OmegaConf.to_container(schema)[key]:
            repeated.append(key)
    return repeated


@pytest.mark.parametrize("path", _yamls(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_group_yaml_repeats_no_dataclass_default(path):
    assert repeated_defaults(path) == []


def test_the_check_sees_a_repeated_default(tmp_path):
    (tmp_path / "metric").mkdir()
    path = tmp_path / "metric" / "rpam.yaml"
    path.write_text("defaults:\n  - rpam_schema\nname: rpam\nmax_new_tokens: 16\nnormalise: false\n")
    assert repeated_defaults(path) == ["max_new_tokens"]
