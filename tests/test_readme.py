"""Every fast command of the README's shell blocks works as written, from the repository root.

The blocks are the README's ```sh fences, one command per line.  ``.venv/bin/`` is the
environment running this test when the repository has no ``.venv`` of its own (a worktree); the
repository's code is used either way.  Commands that set up, run the whole suite or take
minutes (``make``, the research scripts, batches of models, roofline measurements) are left to
their own tests and to CI.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: not run here: long jobs, and what installs packages or starts a server (JupyterLab)
SLOW = re.compile(r"^make\b|analysis/|\*\.onnx|\broofline\b|pip install|\bjupyter\b")
INTERNAL = re.compile(r"DESIGN|\b[Ss]eeds? 00\d\b|\.\./shared|§")


def readme_blocks() -> list[list[str]]:
    """The commands of each ```sh block, in order (a block may use what an earlier line of it
    wrote, e.g. ``inputs --save`` then ``run --inputs``)."""
    text = (ROOT / "README.md").read_text()
    out = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        lines = [ln.strip() for ln in block.splitlines()]
        out.append([ln for ln in lines if ln and not ln.startswith("#")])
    return out


def _fast(block: list[str]) -> list[str]:
    return [c for c in block if not SLOW.search(c)]


def test_readme_has_commands():
    cmds = [c for block in readme_blocks() for c in block]
    assert any(c.startswith("make demo") for c in cmds)
    assert any(c.startswith("make test-fast") for c in cmds)
    assert sum(1 for c in cmds if not SLOW.search(c)) >= 10


def _as_run_here(command: str) -> str:
    if (ROOT / ".venv" / "bin" / "polyfuse").exists():
        return command
    bin_dir = Path(sys.executable).parent

    def local(m: re.Match) -> str:
        if m.group(1) == "polyfuse":
            return f"{shlex.quote(sys.executable)} -m polyfuse"
        return shlex.quote(str(bin_dir / m.group(1)))

    return re.sub(r"(?<![\w/.])\.venv/bin/(\S+)", local, command)


@pytest.mark.parametrize("block", [b for b in readme_blocks() if _fast(b)],
                         ids=lambda b: _fast(b)[0].split()[1] if len(_fast(b)[0].split()) > 1
                         else _fast(b)[0])
def test_readme_commands_run(block: list[str]):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for command in _fast(block):
        proc = subprocess.run(["bash", "-c", _as_run_here(command)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{command}\n{proc.stderr[-2000:]}"
        assert "Traceback" not in proc.stderr, command
        assert not INTERNAL.search(proc.stdout + proc.stderr), command
