"""The bundled examples and models, fused and verified on every OpenCL GPU device present, and
the default device rule choosing a GPU.  Marked ``gpu``; where no GPU is listed (CI) each test is
skipped with a line saying so.  ``analysis/gpu.py`` runs them with the real-size benchmark."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pyopencl as cl
import pytest

import polyfuse
from polyfuse.apps.onnx_run import fuse_onnx
from polyfuse.passes.pipeline import device_name, fuse_program, size_buffers
from polyfuse.runtime.device import list_devices, probe_device

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("regenerate", ROOT / "schedules" / "regenerate.py")
regenerate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(regenerate)
EXAMPLES = [p for p in regenerate.example_dirs() if p.suffix != ".onnx"]
MODELS = [p for p in regenerate.example_dirs() if p.suffix == ".onnx"]


def gpu_devices() -> list[str]:
    """Ids (``P:D``) of the GPU devices that build and run a probe kernel."""
    return [dev_id for dev_id, _, dev in list_devices()
            if dev.type & cl.device_type.GPU and probe_device(dev) is None]


GPUS = gpu_devices()
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not GPUS, reason="no OpenCL GPU device here (`polyfuse devices` lists "
                                        "none; see docs/gpu.md): the gpu tests need one"),
]
DEVICES = GPUS or ["none"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("example", EXAMPLES, ids=regenerate.plan_name)
def test_example_fused_and_verified(device: str, example: Path) -> None:
    program = polyfuse.load_opencl(str(example / "kernels.cl"), host=str(example / "host.c"))
    result = fuse_program(size_buffers(program), verify=True, device=device)
    assert result.ok, result.verified
    assert result.verified["device"] == device_name(device)
    assert result.fused.launches_after <= result.plan.launches_before


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("model", MODELS, ids=regenerate.plan_name)
def test_model_fused_and_verified(device: str, model: Path) -> None:
    result = fuse_onnx(model, verify=True, device=device)
    assert result.ok, result.verified
    assert result.verified["reference"] == "onnxruntime + unfused"
    assert result.verified["device"] == device_name(device)
    assert result.plan.launches_after < result.plan.launches_before


def test_default_is_a_gpu_and_fuse_verify_runs_there(tmp_path: Path) -> None:
    """Without --device or PYOPENCL_CTX, `polyfuse devices` names a GPU by its rule and
    `polyfuse fuse ... --verify` verifies there, with no other step."""
    env = {k: v for k, v in os.environ.items() if k != "PYOPENCL_CTX"}
    env.update({"POLYFUSE_CACHE": str(tmp_path / "cache"), "PYTHONPATH": os.pathsep.join(
        [str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])})

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "polyfuse", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=600)

    devices = cli("devices")
    assert devices.returncode == 0, devices.stderr
    default = next(ln for ln in devices.stdout.splitlines() if ln.startswith("default:"))
    assert default.split()[1] in GPUS and "lowest estimated layer time" in default, devices.stdout
    qkv = ROOT / "examples" / "qkv"
    fused = cli("fuse", str(qkv / "kernels.cl"), "--host", str(qkv / "host.c"), "--out",
                str(tmp_path / "out"), "--verify")
    assert fused.returncode == 0, fused.stderr
    verified = json.loads((tmp_path / "out" / "plan.json").read_text())["verified"]
    assert verified["ok"] and verified["device"] == device_name(default.split()[1])
