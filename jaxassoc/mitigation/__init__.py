"""Changing a bias: concept erasers and scoring-time debiasing (docs/methods.md §11).

- :mod:`~jaxassoc.mitigation.eraser` — ``Eraser`` (``x' = x - ((x - mean) @ down) @ up``, a pytree),
  ``projection``, ``stack`` (one per layer), ``as_edit`` (a site edit, ``sites.Transform``).
- :mod:`~jaxassoc.mitigation.leace` — ``fit_leace`` (Belrose et al. 2023) and its ``orth`` variant.
- :mod:`~jaxassoc.mitigation.inlp` — ``fit_inlp`` (Ravfogel et al. 2020).
- :mod:`~jaxassoc.mitigation.sentence_debias` — ``fit_sentence_debias`` (Liang et al. 2020).
- :mod:`~jaxassoc.mitigation.site_fit` — ``fit_at_site`` (an eraser fitted on a model's states at a named
  site, one per layer for ``layers.*``, cached), ``bound`` (the model with it bound there), ``pooled_states``.
- :mod:`~jaxassoc.mitigation.hard_debias` — ``hard_debias`` (Bolukbasi et al. 2016) for static vectors,
  ``gender_direction``, ``neutralize``, ``equalize``.
- :mod:`~jaxassoc.mitigation.self_debias` — Self-Debias at scoring time (Schick et al. 2021):
  ``SelfDebias`` (a model's scoring transform, ``model.with_scoring``), ``self_debias_log_probs``,
  ``self_debias_masked_log_probs``, ``self_debias_sentence_log_prob``, ``prefixes_for``.

Example::

    from jaxassoc.mitigation import fit_leace
    eraser = fit_leace(x, z)  # x (n, d) float, z (n,) integer classes or (n, k) one-hot
    erased = eraser(x)
"""

from jaxassoc.mitigation.eraser import Eraser, as_edit, projection, stack
from jaxassoc.mitigation.hard_debias import HardDebiasResult, equalize, gender_direction, hard_debias, neutralize
from jaxassoc.mitigation.inlp import fit_inlp
from jaxassoc.mitigation.leace import fit_leace
from jaxassoc.mitigation.self_debias import (
    SelfDebias,
    prefixes_for,
    self_debias_log_probs,
    self_debias_masked_log_probs,
    self_debias_sentence_log_prob,
)
from jaxassoc.mitigation.sentence_debias import fit_sentence_debias
from jaxassoc.mitigation.site_fit import bound, fit_at_site, pooled_states

__all__ = [
    "Eraser",
    "HardDebiasResult",
    "SelfDebias",
    "as_edit",
    "bound",
    "equalize",
    "fit_at_site",
    "fit_inlp",
    "fit_leace",
    "fit_sentence_debias",
    "gender_direction",
    "hard_debias",
    "neutralize",
    "pooled_states",
    "prefixes_for",
    "projection",
    "self_debias_log_probs",
    "self_debias_masked_log_probs",
    "self_debias_sentence_log_prob",
    "stack",
]
