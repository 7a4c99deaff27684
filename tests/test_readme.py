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
SLOW = re.compile(r"^make\b|analysis/|\*\.onnx|\broofline\b")
INTERNAL = re.compile(r"DESIGN|\bseeds? \d|\.\./shared|§")


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    out = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                out.append(line)
    return out


def test_readme_has_commands():
    cmds = readme_commands()
    assert any(c.startswith("make demo") for c in cmds)
    assert any(c.startswith("make test-fast") for c in cmds)
    assert sum(1 for c in cmds if not SLOW.search(c)) >= 10


@pytest.mark.parametrize("command", [c for c in readme_commands() if not SLOW.search(c)])
def test_readme_command_runs(command: str):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = command
    if not (ROOT / ".venv" / "bin" / "polyfuse").exists():
        bin_dir = Path(sys.executable).parent

        def local(m: re.Match) -> str:
            if m.group(1) == "polyfuse":
                return f"{shlex.quote(sys.executable)} -m polyfuse.cli"
            return shlex.quote(str(bin_dir / m.group(1)))

        run = re.sub(r"(?<![\w/.])\.venv/bin/(\S+)", local, command)
    proc = subprocess.run(["bash", "-c", run], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"{command}\n{proc.stderr[-2000:]}"
    assert "Traceback" not in proc.stderr
    assert not INTERNAL.search(proc.stdout + proc.stderr), command
