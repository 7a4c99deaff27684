"""The code stays ruff-clean: a lint failure is a test failure, so CI catches it."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_clean():
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.fail("ruff is not installed (pip install -e '.[test]')")
    result = subprocess.run(
        [ruff, "check", "polyfuse", "tests", "analysis"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
