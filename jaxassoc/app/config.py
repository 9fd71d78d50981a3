"""Structured configs: the schema every Hydra config group is validated against.

Each group's YAML files (``conf/<group>/*.yaml``) are checked against a dataclass registered here in
Hydra's ConfigStore, so an unknown key or a value of the wrong type fails at start-up with a message
naming the key, before any model is loaded. Metric-specific options live in one dataclass per metric
(``metric/<name>_schema``), which a metric's YAML names in its ``defaults`` list.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING


@dataclass
class ModelConfig:
    """A model: an embedded name, a local folder or file, or a hub id (with revision)."""

    name: str = MISSING  # short name used in result tables
    source: str = MISSING  # embedded name ("smollm2-135m"), folder, .gguf file or hub id
    revision: Optional[str] = None
    kind: str = "causal"  # causal | masked | encoder | static
    dtype: str = "float32"  # float32 | bfloat16 (compute dtype)
    batch_size: int = 32
    shard: bool = False  # data-parallel over all local (or, with distributed, global) devices
    add_bos: Optional[bool] = None  # None: the tokenizer's default


@dataclass
class DatasetConfig:
    name: str = MISSING  # a name in jaxassoc.data.DATASETS
    sample: Optional[int] = None  # a seeded subsample of this many items (None: all)


@dataclass
class TemplateConfig:
    name: str = "none"
    text: Optional[str] = None  # e.g. "These words are associated: {target} and"
    quote: str = '"'


@dataclass
class WhiteningConfig:
    name: str = "none"  # none | zca
    eps: float = 1e-3
    reference: str = "corpus_word_types"  # corpus_word_types | vocabulary_uniform (static vectors)
    max_samples: int = 100_000


@dataclass
class StatsConfig:
    ddof: int = 1
    exact_bound: int = 1_000_000
    n_permutations: int = 100_000
    n_bootstrap: int = 10_000
    confidence: float = 0.95
    alternative: str = "greater"  # greater | less | two-sided
    ties: str = "strict"  # strict | inclusive
    alpha: float = 0.05


@dataclass
class MetricConfig:
    """Options every metric has; each metric extends it with its own dataclass."""

    name: str = MISSING


@dataclass
class AuditPart:
    """One line of the default audit: a (model, metric, dataset) job with its own overrides."""

    name: str = MISSING
    overrides: list[str] = field(default_factory=list)


@dataclass
class AuditConfig:
    parts: list[AuditPart] = field(default_factory=list)


@dataclass
class AppConfig:
    model: ModelConfig = MISSING
    metric: Any = MISSING  # a MetricConfig subclass, chosen by the metric group
    dataset: DatasetConfig = MISSING
    template: TemplateConfig = field(default_factory=TemplateConfig)
    whitening: WhiteningConfig = field(default_factory=WhiteningConfig)
    stats: StatsConfig = field(default_factory=StatsConfig)
    audit: AuditConfig = field(default_factory=AuditConfig)
    seed: int = 0
    quiet: bool = False
    resume: bool = True  # skip a job whose results already exist in its output folder
    cache_dir: Optional[str] = None  # on-disk cache of model outputs (None: no cache)
    distributed: bool = False  # call jax.distributed.initialize() before any work (multi-host)


GROUP_SCHEMAS: dict[str, type] = {
    "model": ModelConfig,
    "dataset": DatasetConfig,
    "template": TemplateConfig,
    "whitening": WhiteningConfig,
    "stats": StatsConfig,
}


def register_configs(metric_schemas: dict[str, type], metric_yamls: set[str] = frozenset()) -> None:
    """Register the app schema, one schema per group, and one per metric (``metric/<name>_schema``).

    Each metric's schema is also stored as ``metric/<name>`` with its defaults, so a plugin metric needs
    no YAML; a built-in metric's YAML in ``conf/metric/`` takes precedence and names its schema.
    """
    cs = ConfigStore.instance()
    cs.store(name="app_schema", node=AppConfig)
    for group, schema in GROUP_SCHEMAS.items():
        cs.store(group=group, name=f"{group}_schema", node=schema)
    cs.store(group="metric", name="audit_schema", node=MetricConfig)
    for name, schema in metric_schemas.items():
        cs.store(group="metric", name=f"{name}_schema", node=schema)
        if name not in metric_yamls:  # a plugin's metric: `metric=<name>` works without a YAML file
            cs.store(group="metric", name=name, node=schema(name=name))
