"""Hub ids load offline from a Hugging Face cache laid out as ``huggingface_hub`` writes it
(``models--<org>--<name>/{blobs, refs, snapshots/<commit>}``, snapshot files symlinked to blobs), through
``load_model`` and the app's CLI; the revision resolves to its commit in provenance, and a revision or model
the cache lacks is a one-line ModelError that says what to do."""

import hashlib
import json
from pathlib import Path

import huggingface_hub
import numpy as np
import pytest

from jaxassoc.errors import ModelError
from jaxassoc.models import load_model

REPO_ID = "someorg/tiny-gpt2"
OLD, NEW = "1" * 40, "2" * 40  # two commits: NEW is main


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def is_lfs(path: Path) -> bool:
    return path.suffix in (".safetensors", ".bin")


def add_snapshot(
    cache: Path, repo_id: str, commit: str, folder: Path, refs: tuple[str, ...] = (), missing: tuple[str, ...] = ()
) -> Path:
    """Put ``folder``'s files into ``cache`` as the snapshot ``commit`` of ``repo_id``, as a download does:
    each file a blob named by its etag (sha256 for LFS files, git's blob sha1 otherwise) under ``blobs/``,
    linked relatively from ``snapshots/<commit>/``; the commit's file listing in ``trees/<commit>.json``; each
    ref of ``refs`` a file in ``refs/`` holding the commit. Files in ``missing`` are listed but not stored
    (an interrupted download)."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    (repo / "snapshots" / commit).mkdir(parents=True)
    tree = {}
    for file in sorted(f for f in folder.iterdir() if not f.name.startswith(".")):  # not the factory's manifest
        data = file.read_bytes()
        sha256 = hashlib.sha256(data).hexdigest()
        tree[file.name] = {"size": len(data), "blob_id": git_blob_id(data)}
        if is_lfs(file):
            tree[file.name] |= {"lfs_sha256": sha256, "lfs_size": len(data)}
        if file.name in missing:
            continue
        blob = repo / "blobs" / (sha256 if is_lfs(file) else git_blob_id(data))
        blob.write_bytes(data)
        (repo / "snapshots" / commit / file.name).symlink_to(Path("..") / ".." / "blobs" / blob.name)
    (repo / "trees").mkdir(exist_ok=True)
    (repo / "trees" / f"{commit}.json").write_text(json.dumps({"format_version": 1, "files": tree}, indent=1))
    for ref in refs:
        (repo / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    return repo


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory, tiny_checkpoint) -> tuple[Path, dict[str, Path]]:
    """A cache holding two commits of a tiny GPT-2 (different weights), ``main`` at the newer one."""
    root = tmp_path_factory.mktemp("hub")
    folders = {commit: tiny_checkpoint("gpt2", seed, n_positions=256) for seed, commit in enumerate((OLD, NEW))}
    add_snapshot(root / "cache", REPO_ID, OLD, folders[OLD])
    add_snapshot(root / "cache", REPO_ID, NEW, folders[NEW], refs=("main",))
    return root / "cache", folders


@pytest.fixture
def offline(monkeypatch, hub_cache):
    """HF_HUB_CACHE and HF_HUB_OFFLINE=1 in the environment, and in huggingface_hub's constants, which it
    reads from the environment once, on import (a new process would see the environment alone)."""
    cache = str(hub_cache[0])
    monkeypatch.setenv("HF_HUB_CACHE", cache)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", cache)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    return hub_cache


def test_the_cache_has_the_layout_huggingface_hub_reads(hub_cache):
    info = huggingface_hub.scan_cache_dir(hub_cache[0])
    assert not info.warnings
    (repo,) = info.repos
    assert repo.repo_id == REPO_ID and repo.refs["main"].commit_hash == NEW
    assert {r.commit_hash for r in repo.revisions} == {OLD, NEW}
    assert {f.file_name for f in repo.refs["main"].files} >= {"config.json", "model.safetensors", "tokenizer.json"}


@pytest.mark.parametrize("revision, commit", [(OLD, OLD), (NEW, NEW), ("main", NEW), (None, NEW)])
def test_load_model_reads_the_revision_from_the_offline_cache_and_records_its_commit(offline, revision, commit):
    _, folders = offline
    model = load_model(REPO_ID, revision=revision)
    assert (model.name, model.provenance.source, model.provenance.revision) == (REPO_ID, REPO_ID, commit)
    np.testing.assert_array_equal(model.head.W, load_model(folders[commit]).head.W)


@pytest.mark.parametrize("revision", ["v2", "3" * 40])
def test_a_revision_the_cache_lacks_says_what_it_holds_and_what_to_do(offline, revision):
    with pytest.raises(ModelError) as raised:
        load_model(REPO_ID, revision=revision)
    message = str(raised.value)
    assert "\n" not in message and "Traceback" not in message
    assert f"hub model {REPO_ID!r} has no revision {revision!r} in the Hugging Face cache {offline[0]}" in message
    assert f"main = {NEW}" in message and OLD in message and "HF_HUB_OFFLINE is set" in message
    assert "set model.revision to a cached revision" in message
    assert f"`hf download {REPO_ID} --revision {revision}`" in message and "local checkpoint folder" in message


def test_a_hub_id_the_cache_lacks_says_so(offline):
    with pytest.raises(ModelError) as raised:
        load_model("someorg/absent-model", revision="main")
    message = str(raised.value)
    assert f"hub model 'someorg/absent-model' is not in the Hugging Face cache {offline[0]}" in message
    assert "HF_HUB_OFFLINE is set" in message and "`hf download someorg/absent-model --revision main`" in message
    assert "cached revision" not in message and "\n" not in message


def test_an_incomplete_snapshot_or_a_ref_without_one_is_named(tmp_path, monkeypatch, hub_cache):
    cache, folders = tmp_path / "cache", hub_cache[1]
    add_snapshot(cache, REPO_ID, OLD, folders[OLD], refs=("main",))
    add_snapshot(cache, REPO_ID, NEW, folders[NEW], missing=("model.safetensors",))
    (cache / f"models--{REPO_ID.replace('/', '--')}" / "refs" / "v1").write_text("4" * 40)  # its snapshot deleted
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(
        ModelError,
        match=rf"{REPO_ID!r} at revision {NEW!r} is in the Hugging Face cache .* but "
        r"unusable \(\w+Error: .*\), and HF_HUB_OFFLINE is set.*`hf download ",
    ):
        load_model(REPO_ID, revision=NEW)
    with pytest.raises(ModelError, match=rf"no revision 'v1' .*\(it holds: main = {OLD}, {NEW}\)"):
        load_model(REPO_ID, revision="v1")


@pytest.fixture
def offline_cli(offline, cli):
    """``offline_cli(cwd, *overrides)``: the CLI in process, reading hub ids from the offline cache only."""
    return lambda cwd, *overrides: cli("jaxassoc", *overrides, cwd=cwd, env={"HYDRA_FULL_ERROR": "0"})


def test_cli_sweep_over_revisions_records_the_resolved_commits(tmp_path, offline_cli):
    proc = offline_cli(
        tmp_path,
        "-m",
        "metric=unstereo",
        "dataset=winogender",
        "dataset.sample=8",
        "model.name=tiny",
        f"model.source={REPO_ID}",
        f"model.revision={OLD},main",
        "hydra.sweep.dir=sweep",
        "cache_dir=null",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [json.loads(p.read_text()) for p in (tmp_path / "sweep").glob("*/results.json")]
    revisions = {r["provenance"]["config"]["model"]["revision"]: r["provenance"]["model_revision"] for r in records}
    assert revisions == {OLD: OLD, "main": NEW}


def test_cli_with_a_revision_the_cache_lacks_fails_on_one_line(tmp_path, offline_cli):
    proc = offline_cli(
        tmp_path,
        "metric=unstereo",
        "dataset=winogender",
        "dataset.sample=8",
        f"model.source={REPO_ID}",
        "model.revision=v2",
    )
    assert proc.returncode != 0
    (line,) = [line for line in proc.stderr.splitlines() if line.startswith("jaxassoc: error:")]
    assert f"hub model {REPO_ID!r} has no revision 'v2'" in line and "Traceback" not in proc.stderr
