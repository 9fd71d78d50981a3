"""Every family refuses (``Family.read_config``, what loading calls: the port's reader, then the fields it left
unread), by a ModelError naming it, each HF config field or value its port does not implement: the cases are data (``REFUSED`` in ``tests/family_specs/<family>.py``, collected by
``family_specs.refusals()``), each base config alone is read without error, so it is the changed fields that
are refused."""

import collections
import importlib

import family_specs
import pytest

from jaxassoc.errors import ModelError
from jaxassoc.models.family import family_for

CASES = family_specs.refusals()


def _ids(cases) -> list[str]:
    seen = collections.Counter()
    out = []
    for family, _, fields, _ in cases:
        name = f"{family}-{'+'.join(fields)}"
        seen[name] += 1
        out.append(name if seen[name] == 1 else f"{name}-{seen[name]}")
    return out


def _family(name: str):
    """The Family of a ``tests/family_specs`` module name (the same name as its ``jaxassoc/models`` folder)."""
    return importlib.import_module(f"jaxassoc.models.{name}").FAMILY


@pytest.mark.parametrize("family, base, fields, words", CASES, ids=_ids(CASES))
def test_an_unsupported_config_field_is_refused_by_name(family, base, fields, words):
    config = family_specs.with_fields(base, fields)
    with pytest.raises(ModelError, match=words):
        family_for(base["model_type"]).read_config(config)


BASES = list({id(base): (family, base) for family, base, _, _ in CASES}.values())


@pytest.mark.parametrize("family, base", BASES, ids=[f"{f}-{b['model_type']}" for f, b in BASES])
def test_each_base_config_is_read(family, base):
    assert family_for(base["model_type"]) is _family(family)
    _family(family).read_config(dict(base))


def test_with_fields_drops_nulls_and_replaces():
    base = {"a": 1, "b": {"x": 1, "y": 2}, "c": 3}
    fields = {"a": None, "b": {"x": None, "z": 3}, "c": family_specs.NULL, "d": [1]}
    assert family_specs.with_fields(base, fields) == {"b": {"z": 3}, "c": None, "d": [1]}
    assert base == {"a": 1, "b": {"x": 1, "y": 2}, "c": 3}  # the base is not changed
