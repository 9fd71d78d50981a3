"""Changing a bias: concept erasers and scoring-time debiasing (docs/methods.md §9).

- :mod:`~jaxassoc.mitigation.eraser` — ``Eraser`` (``x' = x - ((x - mean) @ down) @ up``, a pytree),
  ``projection``, ``stack`` (one per layer), ``as_edit`` (a site edit, ``sites.Transform``).
- :mod:`~jaxassoc.mitigation.leace` — ``fit_leace`` (Belrose et al. 2023) and its ``orth`` variant.
- :mod:`~jaxassoc.mitigation.inlp` — ``fit_inlp`` (Ravfogel et al. 2020).
- :mod:`~jaxassoc.mitigation.sentence_debias` — ``fit_sentence_debias`` (Liang et al. 2020).

Example::

    from jaxassoc.mitigation import fit_leace
    eraser = fit_leace(x, z)  # x (n, d) float, z (n,) integer classes or (n, k) one-hot
    erased = eraser(x)
"""

from jaxassoc.mitigation.eraser import Eraser, as_edit, projection, stack
from jaxassoc.mitigation.inlp import fit_inlp
from jaxassoc.mitigation.leace import fit_leace
from jaxassoc.mitigation.sentence_debias import fit_sentence_debias

__all__ = ["Eraser", "as_edit", "fit_inlp", "fit_leace", "fit_sentence_debias", "projection", "stack"]
