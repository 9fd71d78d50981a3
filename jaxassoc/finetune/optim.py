"""The optimiser and its schedule from config (docs/methods.md §13.3): AdamW (Loshchilov & Hutter 2019) with
a linear warm-up and a cosine or constant schedule, gradients clipped by global norm. Hashable, so a jitted
step takes it as a static argument and compiles once per configuration."""

from __future__ import annotations

import dataclasses

import optax

from jaxassoc.errors import ConfigError

SCHEDULES = ("cosine", "constant")


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
    """``learning_rate`` (peak), ``steps`` (the schedule's length), ``warmup`` (steps of linear warm-up from 0),
    ``schedule`` (after the warm-up: ``cosine`` decay to 0 or ``constant``), ``weight_decay`` (AdamW's,
    decoupled), ``clip`` (global gradient norm; 0: none), Adam's ``b1``, ``b2``, ``eps``."""

    learning_rate: float = 1e-3
    steps: int = 100
    warmup: int = 0
    schedule: str = "cosine"
    weight_decay: float = 0.0
    clip: float = 1.0
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8

    def __post_init__(self) -> None:
        if not self.learning_rate > 0:
            raise ConfigError(f"learning rate {self.learning_rate} must be positive")
        if self.steps < 1 or not 0 <= self.warmup <= self.steps:
            raise ConfigError(
                f"{self.steps} steps with {self.warmup} warm-up steps: need steps >= 1, 0 <= warmup <= steps"
            )
        if self.schedule not in SCHEDULES:
            raise ConfigError(f"schedule {self.schedule!r}: choose one of {list(SCHEDULES)}")

    def learning_rates(self) -> optax.Schedule:
        """The learning rate at each step."""
        after = self.steps - self.warmup
        rest = (
            optax.cosine_decay_schedule(self.learning_rate, max(after, 1))
            if self.schedule == "cosine"
            else optax.constant_schedule(self.learning_rate)
        )
        if not self.warmup:
            return rest
        return optax.join_schedules([optax.linear_schedule(0.0, self.learning_rate, self.warmup), rest], [self.warmup])

    def build(self) -> optax.GradientTransformation:
        """The optax transformation: clip (when ``clip``), then AdamW with :meth:`learning_rates`."""
        adam = optax.adamw(self.learning_rates(), b1=self.b1, b2=self.b2, eps=self.eps, weight_decay=self.weight_decay)
        return optax.chain(optax.clip_by_global_norm(self.clip), adam) if self.clip else adam
