"""Corrupt model and vector files through the CLI: exit code != 0 and one `jaxassoc: error:` line naming
the file, never a traceback or a run that finishes on NaN weights."""

import json

import numpy as np
import pytest


def _truncate(folder):
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    return "model.safetensors is not a valid checkpoint file: tensor"


def _drop_tokenizer(folder):
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (folder / name).unlink(missing_ok=True)
    return "has no tokenizer: it needs tokenizer.json"


def _nan_weight(folder):
    from safetensors.numpy import load_file, save_file

    tensors = load_file(folder / "model.safetensors")
    tensors["transformer.wte.weight"][7, 0] = np.nan
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    return "tensors ['transformer.wte.weight'] hold NaN or infinite values"


def _bad_config_field(folder):
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "n_head": "four"}))
    return (
        "config.json is rejected by transformers (StrictDataclassFieldValidationError: "
        "Validation error for field 'n_head'"
    )


@pytest.mark.parametrize("damage", [_truncate, _drop_tokenizer, _nan_weight, _bad_config_field])
def test_cli_refuses_a_damaged_checkpoint_in_one_line_naming_it(tmp_path, tiny_checkpoint, cli, damage):
    folder = tiny_checkpoint("gpt2", into=tmp_path / "damaged")  # a private copy to damage
    expected = damage(folder)
    proc = cli(
        "jaxassoc",
        f"model.source={folder}",
        "model.name=x",
        "model.kind=causal",
        "metric=rpam",
        "dataset=weat_ws",
        "template=tp1",
        "cache_dir=null",
        cwd=tmp_path,
        env={"HYDRA_FULL_ERROR": "0"},
    )
    errors = [line for line in proc.stderr.splitlines() if line.startswith("jaxassoc: error:")]
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert len(errors) == 1 and str(folder) in errors[0] and expected in errors[0], proc.stderr[-2000:]


def test_cli_refuses_a_glove_file_with_an_extra_number_naming_its_line(tmp_path, cli):
    glove = tmp_path / "vectors.txt"
    glove.write_text("the 0.1 0.2 0.3\nbusiness -0.36044 0.4 0.5 0.6\n", encoding="utf-8")
    proc = cli(
        "jaxassoc",
        f"model.source={glove}",
        "model.name=x",
        "model.kind=static",
        "metric=weat",
        "dataset=weat_caliskan2017",
        "cache_dir=null",
        cwd=tmp_path,
        env={"HYDRA_FULL_ERROR": "0"},
    )
    errors = [line for line in proc.stderr.splitlines() if line.startswith("jaxassoc: error:")]
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert len(errors) == 1 and f"{glove}, line 2: 5 fields" in errors[0], proc.stderr[-2000:]
