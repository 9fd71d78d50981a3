"""A statistics kernel compiled for its amount of work: quickly for small work, fully optimised for large.

On the CPU, XLA's backend optimisation level 0 compiles a permutation or bootstrap kernel in about half the
time (0.27-0.31 s against 0.50-0.72 s on 2 cores) and runs it about three times slower (10^4 partitions of
64 items: 0.06 s against 0.02 s), with bit-identical results: XLA does not enable fast-math, so LLVM may
not reorder float arithmetic at any level. Every test size of a job is a compilation of its own, and a job's
first run (an empty compilation cache) meets them all: below :data:`QUICK_WORK` elements of work the saved
compile time outweighs the slower run, so such calls take level 0. Other backends always optimise fully.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax._src.core

QUICK_WORK = 1 << 22
"""Elements of work (e.g. partitions x items) up to which a kernel is compiled at level 0: there the fully
optimised run takes under ~0.1 s on 2 CPU cores, less than the ~0.3 s of compile time level 0 saves."""

_QUICK = {"xla_backend_optimization_level": 0}


class ByWork:
    """``jax.jit`` of ``fn`` twice, one compiled quickly; ``kernel(*args, work=n, **kwargs)`` picks by ``n``."""

    def __init__(self, fn: Callable, static_argnames: tuple[str, ...]):
        self.full = jax.jit(fn, static_argnames=static_argnames)
        self.quick = jax.jit(fn, static_argnames=static_argnames, compiler_options=_QUICK)
        self.__wrapped__ = fn
        self.__doc__ = fn.__doc__

    def __call__(self, *args, work: int, **kwargs):
        quick = work <= QUICK_WORK and jax.default_backend() == "cpu" and not _tracing(args, kwargs)
        return (self.quick if quick else self.full)(*args, **kwargs)


def _tracing(args, kwargs) -> bool:
    """Inside another function's trace (jit, vmap, grad): there the kernel is inlined into the caller's
    compilation, which alone may carry compiler options."""
    if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves((args, kwargs))):
        return True
    clean = getattr(jax._src.core, "trace_state_clean", None)  # no public API tells an outer trace apart
    return clean is not None and not clean()


def by_work(*static_argnames: str) -> Callable[[Callable], ByWork]:
    """Decorator: :class:`ByWork` of the function with these static arguments."""
    return lambda fn: ByWork(fn, static_argnames)
