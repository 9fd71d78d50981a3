"""Reading a Hugging Face ``config.json`` for a port, the counterpart of :class:`~jaxassoc.models.checkpoint.TensorTaker`.

A family's ``config_from_hf`` reads the dict through a :class:`ConfigTaker`, which records every field it
reads. Afterwards :meth:`ConfigTaker.finish` refuses, all at once, each field the port did not read whose
value differs from the one transformers' config class for that ``model_type`` gives it when built from the
fields the port did read (its default, or what transformers derives from those: T5's ``dense_act_fn`` from
``feed_forward_proj``): an option the port does not implement is named instead of silently ignored
(penzai's rule). Fields that do not change the
forward pass in evaluation (:func:`inert`: dropout, ids of special tokens, bookkeeping) and fields the
config class does not know (legacy or tool-specific keys) are not refused.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping

from jaxassoc.errors import ModelError

INERT = frozenset(
    {
        "_name_or_path",
        "architectures",
        "bos_token_id",
        "chunk_size_feed_forward",
        "dtype",
        "eos_token_id",
        "id2label",
        "initializer_factor",
        "initializer_range",
        "label2id",
        "model_type",
        "output_attentions",
        "output_hidden_states",
        "pad_token_id",
        "problem_type",
        "return_dict",
        "sep_token_id",
        "torch_dtype",
        "transformers_version",
        "use_cache",
    }
)
"""Config fields that never change a forward pass in evaluation (ids, bookkeeping, caching, outputs)."""


def inert(field: str) -> bool:
    """Whether ``field`` is not one a port must handle: it leaves the forward pass in evaluation unchanged
    (any dropout rate; GPT-2's ``summary_*`` options of a multiple-choice head a language model does not
    have), or it is transformers' private bookkeeping (a leading ``_``, e.g. Gemma 3's
    ``_sliding_window_pattern``, which its public ``layer_types`` restates)."""
    return field in INERT or field.startswith(("_", "summary_")) or "dropout" in field or "pdrop" in field


class ConfigTaker(dict):
    """A HF config dict that records which fields a port's reader looked at (``[]``, ``get``, ``in``)."""

    def __init__(self, hf_config: Mapping[str, Any]):
        super().__init__(hf_config)
        self.read: set[str] = set()

    def __getitem__(self, field: str) -> Any:
        self.read.add(field)
        return super().__getitem__(field)

    def get(self, field: str, default: Any = None) -> Any:
        self.read.add(field)
        return super().get(field, default)

    def __contains__(self, field: object) -> bool:
        self.read.add(str(field))
        return super().__contains__(field)

    def unhandled(self, defaults: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
        """field -> (its value, transformers' default) for each field not read, not inert, known to the
        config class and set to another value than its default."""
        return {
            field: (value, defaults[field])
            for field, value in dict.items(self)
            if field not in self.read and not inert(field) and field in defaults and value != defaults[field]
        }

    def finish(self, port: str) -> None:
        """ModelError naming every field the ``port`` does not handle (see the module docstring)."""
        model_type = dict.get(self, "model_type")
        read = {field: dict.__getitem__(self, field) for field in self.read if dict.__contains__(self, field)}
        problems = self.unhandled(transformers_defaults(model_type, read)) if model_type else {}
        if problems:
            named = "; ".join(f"{f} = {v!r} (transformers' default: {d!r})" for f, (v, d) in sorted(problems.items()))
            raise ModelError(
                f"the {port} port does not implement the config field(s) {named}: it would ignore them, so the "
                "model is refused; remove them from config.json only if they do not change the model"
            )


def superseded(hf_config: Mapping[str, Any], *fields: str) -> None:
    """Mark ``fields`` as handled where another field the port reads decides what they would (Qwen2's
    ``max_window_layers`` when ``layer_types`` is given; Phi-3's ``original_max_position_embeddings``, used
    only by the long-rope scaling the port refuses)."""
    for field in fields:
        _ = field in hf_config


def transformers_defaults(model_type: str, read: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of transformers' config class for ``model_type`` as it builds them from the fields ``read``
    (the class defaults alone if it refuses those; {} for a model type it does not know). transformers'
    own warnings about those values are silenced: the port's checks name what matters."""
    import transformers

    fields = {field: value for field, value in read.items() if field != "model_type"}
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        return transformers.AutoConfig.for_model(model_type, **fields).to_dict()
    except Exception:  # a value transformers rejects: the port's own checks name it
        return _class_defaults(model_type)
    finally:
        transformers.logging.set_verbosity(verbosity)


@functools.lru_cache(maxsize=None)
def _class_defaults(model_type: str) -> dict[str, Any]:
    import transformers

    try:
        return transformers.AutoConfig.for_model(model_type).to_dict()
    except (ValueError, KeyError):
        return {}
