"""The default device is chosen by measurement among the working ones, cached, and explained by
``polyfuse devices``; ``PYOPENCL_CTX`` still wins."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _devices(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "PYOPENCL_CTX"}
    full.update({"POLYFUSE_CACHE": str(tmp_path), "PYTHONPATH": str(ROOT), **env})
    return subprocess.run([sys.executable, "-m", "polyfuse", "devices"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=full)


def test_default_device_is_measured_cached_and_explained(tmp_path):
    r = _devices(tmp_path)
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("default:"))
    usable = [ln.split()[0] for ln in r.stdout.splitlines()
              if ln[:1].isdigit() and "  yes" in ln]
    assert line.split()[1] in usable  # names one of the usable ids
    cache = tmp_path / "default_device.json"
    if len(usable) > 1:
        assert "fastest on a 16-launch probe" in line
        entry = next(iter(json.loads(cache.read_text()).values()))
        assert len(entry["seconds"]) == len(usable) and entry["key"] in entry["seconds"]
        # the second run reuses the measurement: same choice
        again = _devices(tmp_path)
        assert next(ln for ln in again.stdout.splitlines()
                    if ln.startswith("default:")).split()[1] == line.split()[1]
    else:
        assert "only device" in line


def test_pyopencl_ctx_wins(tmp_path):
    r = _devices(tmp_path, PYOPENCL_CTX="0:0")
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("default:"))
    assert line.startswith("default: 0:0 ") and "(from PYOPENCL_CTX" in line


def test_rule_prefers_a_gpu_on_real_size_work_unless_measured_slower():
    """With a GPU among the working devices every device runs the real-size probe (a GPU's
    launch latency would lose the 16-launch one) and the fastest wins; without one, the
    16-launch probe decides, as for small models on CPUs."""
    from polyfuse.runtime.device import DEFAULT_RULE, choose_default

    def measure(seconds):
        return lambda dev, probe: seconds[dev][probe]

    seconds = {"pocl": {"16-launch": 20e-6, "real-size": 30e-3},
               "gpu": {"16-launch": 90e-6, "real-size": 0.2e-3}}
    is_gpu = lambda dev: dev == "gpu"
    assert choose_default(["pocl", "gpu"], is_gpu, measure(seconds)) == (
        1, "real-size", [30e-3, 0.2e-3])
    seconds["gpu"]["real-size"] = 40e-3  # measurement says otherwise: the CPU device
    assert choose_default(["pocl", "gpu"], is_gpu, measure(seconds))[:2] == (0, "real-size")
    seconds["basic"] = {"16-launch": 10e-6, "real-size": 60e-3}
    assert choose_default(["pocl", "basic"], is_gpu, measure(seconds))[:2] == (1, "16-launch")
    assert "a GPU unless measurement says" in DEFAULT_RULE and "PYOPENCL_CTX" in DEFAULT_RULE
