"""The head inputs of one ABC template's prompts, whatever the model's objective (a causal LM's teacher-forced
pass, a masked LM's write-in steps): what SeT with one ΔA shared by a group's prompts in several templates
needs (Cao et al. 2022, §3.1; docs/methods.md §3.6; :mod:`jaxassoc.suites.stereotypes_shared`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jaxassoc.data import AbcData
from jaxassoc.models import LanguageModel
from jaxassoc.readouts.stereotypes import build_problems, causal_head_inputs
from jaxassoc.readouts.stereotypes_mlm import build_masked_problems, check_masked_model, write_in_head_inputs

SLOT = "<sgroup>"  # the groups are named by their singular form, whatever the templates' slots


def template_head_inputs(
    model: LanguageModel,
    abc: AbcData,
    template: str,
    groups: Sequence[str],
    words: Sequence[str],
    *,
    bos: bool,
    batch_size: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Head inputs x (N, S, D), trait tokens and their mask (N, S) of one template, N = (groups + prior) ×
    words row-major; ``groups`` in their singular form, put in the template's slot."""
    slot = abc.slot_of(template)
    to_slot = dict(zip(abc.groups[SLOT], abc.groups[slot]))
    fillers = [to_slot[g] for g in groups]
    if model.objective == "masked":
        check_masked_model(model)
        problems = build_masked_problems(model.tokenizer, abc, template, fillers, words, mask_id=model.vocab.mask_id)
        return write_in_head_inputs(model, problems, batch_size)
    bos_id = model.vocab.bos_id if bos else None
    problems = build_problems(model.tokenizer, abc, template, fillers, words, bos_id=bos_id)
    return causal_head_inputs(model, problems, batch_size=batch_size)
