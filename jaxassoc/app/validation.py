"""Every option a job is given is used by its metric or refused by name, before any model is loaded.

Ranges are checked by the config dataclasses themselves (``__post_init__``, :mod:`jaxassoc.app.config`).
Here: a shared option (``stats.*``, ``dataset.sample``, ``template.*``, ``whitening.*``) set to a value
other than its dataclass default is refused unless the metric declares that it reads it
(:class:`~jaxassoc.app.registry.MetricSpec` ``uses``), and any option, a metric's own included, is
refused when the metric says this job's setting leaves it unused (``ignores``); a key its group's
dataclass does not have (added with ``+``) is refused by :func:`check_known_keys`. The default audit uses
:func:`unused_options` to forward the command line's ``stats.*`` options only to the parts that read them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from jaxassoc.app.spec import Job, MetricSpec
from jaxassoc.errors import ConfigError

SHARED_GROUPS = ("stats", "whitening", "template")


def field_default(field: dataclasses.Field) -> Any:
    """The default value of a dataclass field (``default`` or ``default_factory()``)."""
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def _changed(group: str, obj: Any, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        f"{group}.{f.name}": getattr(obj, f.name)
        for f in dataclasses.fields(obj)
        if f.name not in skip and getattr(obj, f.name) != field_default(f)
    }


def changed_options(job: Job) -> dict[str, Any]:
    """The shared options and the metric's own options whose values differ from their dataclass defaults."""
    changed = {}
    for group in SHARED_GROUPS:
        changed |= _changed(group, getattr(job, group))
    if job.dataset.sample is not None:
        changed["dataset.sample"] = job.dataset.sample
    return changed | _changed("metric", job.metric, skip=("name",))


def check_known_keys(group: str, keys: Any, obj: Any) -> None:
    """ConfigError naming a key of config group ``group`` that its dataclass ``obj`` has no field for: a key
    added with ``+`` (``+dataset.path=...`` on a dataset that reads no file) would otherwise be dropped."""
    fields = {f.name for f in dataclasses.fields(obj)}
    extra = [k for k in keys if k not in fields]
    if extra:
        name = getattr(obj, "name", None)
        raise ConfigError(
            f"{group}.{extra[0]} is not an option of {group}={name}: it would be ignored"
            f"{_did_you_mean(extra[0], sorted(fields), group)}; its options are {', '.join(sorted(fields))}; "
            "remove the override"
        )


def _did_you_mean(key: str, keys: list[str], group: str = "") -> str:
    """`` (did you mean stats.n_permutations?)`` for a key close to valid ones (empty when none is close)."""
    from jaxassoc.app.cli import closest

    near = [f"{group}.{k}" if group else k for k in closest(key, keys)]
    return f" (did you mean {' or '.join(near)}?)" if near else ""


def check_top_level_keys(keys: Any, schema: type) -> None:
    """ConfigError naming a top-level key the app's schema has no field for (``+sede=5``: a typo that
    ``+`` would add and nothing would read); ``hydra`` is Hydra's own."""
    fields = {f.name for f in dataclasses.fields(schema)} | {"hydra"}
    extra = [k for k in keys if k not in fields]
    if extra:
        raise ConfigError(
            f"{extra[0]} is not an option of jaxassoc: it would be ignored"
            f"{_did_you_mean(extra[0], sorted(fields - {'hydra'}))}; the top-level options are "
            f"{', '.join(sorted(fields - {'hydra'}))} and the groups' keys (e.g. stats.n_permutations); remove the "
            f"override"
        )


def _declared(spec: MetricSpec, key: str) -> bool:
    group = key.split(".")[0]
    return spec.uses is None or group == "metric" or key in spec.uses or group in spec.uses


def _reads(spec: MetricSpec) -> str:
    return (
        ", ".join(sorted(spec.uses))
        if spec.uses
        else "none of the stats, dataset.sample, template or whitening options"
    )


def unused_options(spec: MetricSpec, job: Job) -> dict[str, str]:
    """The options set (not at their defaults) that ``job``'s metric does not read, each with why."""
    ignored = dict(spec.ignores(job)) if spec.ignores is not None else {}
    unused = {}
    for key in changed_options(job):
        if not _declared(spec, key):
            unused[key] = f"metric={spec.name} does not read it (it reads {_reads(spec)})"
        elif key in ignored:
            unused[key] = ignored[key]
    return unused


def check_options(spec: MetricSpec, job: Job) -> None:
    """ConfigError naming the first option set that the job's metric does not use (and the others)."""
    unused = unused_options(spec, job)
    if unused:
        changed = changed_options(job)
        key, why = next(iter(unused.items()))
        others = f" (also unused: {', '.join(k for k in unused if k != key)})" if len(unused) > 1 else ""
        raise ConfigError(
            f"{key}={changed[key]!r} has no effect with metric={spec.name} dataset={job.dataset.name}: {why}; "
            f"remove the override{others}"
        )


def check_groups_read(spec: MetricSpec, overrides: list[str]) -> None:
    """ConfigError for a command-line override of a group one job does not read: ``audit`` (``audit=...``,
    ``+audit.x=...``) outside ``metric=audit``, and ``dataset`` for a metric that reads none
    (``reads_dataset=False``); the choice would be ignored and the rows would not record it."""
    for override in overrides:
        group = override.lstrip("+~").split("=")[0].split(".")[0]
        if group == "audit":
            raise ConfigError(
                f"{override} has no effect with metric={spec.name}: the audit options configure metric=audit only; "
                f"remove the override"
            )
        if group == "dataset" and not spec.reads_dataset:
            raise ConfigError(
                f"{override} has no effect with metric={spec.name}: it reads no dataset (its rows record none); "
                f"remove the override"
            )
