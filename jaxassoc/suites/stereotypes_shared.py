"""SeT with one ΔA shared by a group's prompts in several ABC templates (Cao et al. 2022, §3.1; docs/methods.md
§3.6): per (group or prior noun, trait word, subword step) the contexts are that step's head inputs in each
template (:func:`jaxassoc.readouts.stereotypes_shared.template_head_inputs`), each with its own gold subword,
and :func:`~jaxassoc.metrics.set_optax.set_optax` finds the smallest ‖ΔA‖_F that makes the gold win every one
of them by the margin γ. That norm then plays the part of the single-context distance (transform, minimum
over subwords, minus the prior's, median over synonyms: :func:`~jaxassoc.suites.stereotypes.set_columns`),
one score per (group, trait word) for all templates.

The head inputs of every template are held in memory (no chunk cache): about 4 · steps · D bytes per
(template, group or prior, word), some 0.9 GB for SmolLM2-135M over all 33 causal templates.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from jaxassoc.data import AbcData
from jaxassoc.models import LanguageModel
from jaxassoc.progress import stage
from jaxassoc.readouts.stereotypes import default_words
from jaxassoc.readouts.stereotypes_shared import template_head_inputs
from jaxassoc.suites.stereotypes import OptaxOptions, optax_set_terms, set_columns


def shared_set_scores(
    model: LanguageModel,
    abc: AbcData,
    templates: Sequence[str],
    options: OptaxOptions,
    *,
    groups: Sequence[str],
    words: Sequence[str] | None = None,
    bos: bool = True,
    set_transform: str = "neg_distance",
    set_nan_policy: str = "propagate",
    batch_size: int = 32,
    log_as: str | None = None,
) -> pd.DataFrame:
    """SeT of every (group, trait word) with one ΔA per (group or prior, word, subword) shared by
    ``templates``: the columns of :func:`~jaxassoc.suites.stereotypes.set_columns` (``set``,
    ``set_distance_max`` — the shared ‖ΔA‖_F — and the convergence columns) beside ``group`` (singular form)
    and ``word``. ``log_as`` (the job's name) logs a stage line per template and for the solve."""
    words = default_words(abc) if words is None else list(words)
    inputs = []
    for i, template in enumerate(templates, start=1):
        with stage(log_as or "set", f"prompts read (template {i}/{len(templates)} {template!r})", None) as line:
            inputs.append(template_head_inputs(model, abc, template, groups, words, bos=bos, batch_size=batch_size))
            line.count = len(inputs[-1][0])
    n, steps, dim = len(inputs[0][0]), max(x.shape[1] for x, _, _ in inputs), inputs[0][0].shape[2]
    x = np.zeros((n, steps, len(templates), dim), np.float32)
    tokens = np.zeros((n, steps, len(templates)), np.int32)
    valid = np.zeros((n, steps, len(templates)), bool)
    for k, (xk, tk, vk) in enumerate(inputs):
        x[:, : xk.shape[1], k], tokens[:, : tk.shape[1], k], valid[:, : vk.shape[1], k] = xk, tk, vk
    del inputs
    with stage(log_as or "set", f"shared ΔA solved over {len(templates)} templates", int(valid.any(-1).sum())):
        terms = optax_set_terms(model, x, tokens, valid, options)
    shape = (len(groups) + 1, len(words))
    columns = set_columns(shape, terms, valid.any(-1), set_transform=set_transform, set_nan_policy=set_nan_policy)
    return pd.DataFrame({"group": np.repeat(list(groups), len(words)), "word": np.tile(words, len(groups)), **columns})
