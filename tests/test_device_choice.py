"""The default device is chosen by a speed probe that represents real work among the working ones,
cached per device, and explained by ``polyfuse devices``; ``PYOPENCL_CTX`` still wins."""

from __future__ import annotations

import json
import os
import re
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
    lines = r.stdout.splitlines()
    line = next(ln for ln in lines if ln.startswith("default:"))
    usable = [ln.split()[0] for ln in lines if ln[:1].isdigit() and "  yes" in ln]
    assert line.split()[1] in usable  # names one of the usable ids
    # both figures of every usable device, and the rule that combines them
    speed = {ln.split()[0]: ln for ln in lines if " speed: " in ln}
    assert sorted(speed) == sorted(usable)
    for text in speed.values():
        assert re.search(r"product 128x768x768 [\d.]+ ms, 16 launches [\d.]+ ms, "
                         r"estimated layer [\d.]+ ms$", text), text
    assert "12 x a 128x768x768 blocked MatMul + a chain of 16" in next(
        ln for ln in lines if ln.startswith("rule:"))
    cache = json.loads((tmp_path / "device_speed.json").read_text())
    assert len(cache) == len(usable)
    assert all(set(v) == {"product", "chain"} for v in cache.values())
    if len(usable) > 1:
        assert "lowest estimated layer time" in line
        # the second run reuses the measurement: same choice, same figures
        again = _devices(tmp_path).stdout.splitlines()
        assert next(ln for ln in again if ln.startswith("default:")) == line
        assert [ln for ln in again if " speed: " in ln] == list(speed.values())
    else:
        assert "only device" in line


def test_pyopencl_ctx_wins(tmp_path):
    r = _devices(tmp_path, PYOPENCL_CTX="0:0")
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("default:"))
    assert line.startswith("default: 0:0 ") and "(from PYOPENCL_CTX" in line


def test_rule_minimizes_the_estimated_layer_time():
    """The score is 12 products and one launch chain (a BERT-base layer): a GPU wins on its
    products despite slow launches, unless measured slower; between CPU devices the faster
    product wins over the faster launches; a device whose probe failed only as a last resort."""
    from polyfuse.runtime.device import DEFAULT_RULE, DeviceSpeed, choose_default

    def measure(speeds):
        return lambda devs: [speeds[d] for d in devs]

    speeds = {"pocl": DeviceSpeed(product=1.5e-3, chain=20e-6),
              "gpu": DeviceSpeed(product=0.05e-3, chain=0.5e-3),
              "basic": DeviceSpeed(product=2.0e-3, chain=10e-6),
              "broken": None}
    assert speeds["pocl"].score == 12 * 1.5e-3 + 20e-6
    assert choose_default(["pocl", "gpu"], measure(speeds)) == (
        1, [speeds["pocl"], speeds["gpu"]])
    speeds["gpu"] = DeviceSpeed(product=1.6e-3, chain=0.5e-3)  # measured slower: the CPU
    assert choose_default(["pocl", "gpu"], measure(speeds))[0] == 0
    assert choose_default(["basic", "pocl"], measure(speeds))[0] == 1  # launches lose
    assert choose_default(["broken", "basic"], measure(speeds))[0] == 1
    assert choose_default(["broken"], measure(speeds))[0] == 0
    assert "a GPU unless measurement says" in DEFAULT_RULE and "PYOPENCL_CTX" in DEFAULT_RULE


def test_speed_figures_are_cached_under_the_stable_key(tmp_path, monkeypatch):
    """Measured once per device under ``stable_device_key`` (not the key with PoCL's free
    memory in it): a cached entry is used without measuring, a missing one is measured and
    stored, a failed one is neither stored nor fatal."""
    from polyfuse.runtime import device as dv

    class Fake:
        def __init__(self, name):
            self.name = name

    monkeypatch.setattr(dv, "stable_device_key", lambda d: f"PoCL|{d.name}|3.1")
    monkeypatch.setattr(dv, "_SPEEDS", {})
    monkeypatch.setenv("POLYFUSE_CACHE", str(tmp_path))
    (tmp_path / "device_speed.json").write_text(json.dumps(
        {f"PoCL|a|3.1|speed {dv._SPEED_VERSION}": {"product": 2e-3, "chain": 1e-5}}))
    asked = []

    def measure(devs, timeout):
        asked.append([d.name for d in devs])
        return [None if d.name == "c" else dv.DeviceSpeed(1e-3, 2e-5) for d in devs]

    monkeypatch.setattr(dv, "_measure_speeds", measure)
    a, b, c = Fake("a"), Fake("b"), Fake("c")
    assert dv.device_speeds([a, b, c]) == [dv.DeviceSpeed(2e-3, 1e-5),
                                           dv.DeviceSpeed(1e-3, 2e-5), None]
    assert asked == [["b", "c"]]  # together, the cached one not again
    table = json.loads((tmp_path / "device_speed.json").read_text())
    assert sorted(table) == [f"PoCL|{n}|3.1|speed {dv._SPEED_VERSION}" for n in "ab"]
    monkeypatch.setattr(dv, "_SPEEDS", {})
    assert dv.device_speeds([b])[0] == dv.DeviceSpeed(1e-3, 2e-5)  # from disk
    assert asked == [["b", "c"]]
