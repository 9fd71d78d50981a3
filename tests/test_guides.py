"""The guides' code runs: every ```python block of README.md, docs/*.md and examples/README.md is run in a
fresh interpreter (8 simulated CPU devices, as the mesh guide needs), except a block marked
``<!-- excerpt of FILE ... -->``, whose every line (blank lines, comments and lines with ``...`` aside) must
appear in one of the files it names, so an excerpt cannot drift from the code it quotes."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "examples" / "README.md"]
BLOCK = re.compile(r"(?:<!-- excerpt of (?P<files>[^>]*?) -->\n)?```python\n(?P<code>.*?)```", re.S)


def blocks():
    for guide in GUIDES:
        text = guide.read_text()
        for n, match in enumerate(BLOCK.finditer(text), start=1):
            line = text[: match.start("code")].count("\n") + 1
            yield pytest.param(
                match["code"],
                (match["files"] or "").split(),
                id=f"{guide.relative_to(ROOT)}:{line}",
                marks=pytest.mark.slow if "load_model(" in match["code"] else (),
            )


CASES = list(blocks())


def test_the_guides_have_code_to_check():
    assert len(CASES) >= 6


@pytest.mark.process  # each runnable block in its own interpreter
@pytest.mark.parametrize("code, files", CASES)
def test_guide_block(code, files, tmp_path):
    if files:
        sources = "\n".join((ROOT / f).read_text() for f in files)
        quoted = {line.strip() for line in sources.splitlines()}
        absent = [
            line
            for line in code.splitlines()
            if line.strip() and not line.strip().startswith("#") and "..." not in line and line.strip() not in quoted
        ]
        assert not absent, f"the excerpt of {files} has lines the files no longer hold: {absent}"
        return
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": "--xla_force_host_platform_device_count=8",
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
