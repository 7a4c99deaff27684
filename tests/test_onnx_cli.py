"""The ONNX batch path of the CLI: fuse with --jobs, a failing model in a batch, run."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "examples" / "models"
QUICK = [MODELS / "bert_qkv.onnx", MODELS / "resnext_block.onnx"]


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "polyfuse", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def test_jobs_2_gives_the_same_plans_as_jobs_1(tmp_path):
    one = run_cli("fuse", *QUICK, "--out", tmp_path / "j1", "--jobs", "1", "--no-timing")
    two = run_cli("fuse", *QUICK, "--out", tmp_path / "j2", "--jobs", "2", "--no-timing")
    assert one.returncode == 0 and two.returncode == 0, one.stderr + two.stderr
    for model in QUICK:
        stem = model.stem
        plan1 = (tmp_path / "j1" / stem / "plan.json").read_text()
        assert plan1 == (tmp_path / "j2" / stem / "plan.json").read_text()
        for name in ("fused.cl", "report.md"):
            assert (tmp_path / "j2" / stem / name).exists()
    assert "bert_qkv" in one.stdout and "resnext_block" in one.stdout
    qkv = json.loads((tmp_path / "j1" / "bert_qkv" / "plan.json").read_text())
    assert (qkv["launches_before"], qkv["launches_after"]) == (9, 1)


def test_failing_model_does_not_stop_the_batch(tmp_path):
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"this is not a protobuf")
    r = run_cli("fuse", bad, QUICK[0], "--out", tmp_path / "o", "--no-timing", "--verify")
    assert r.returncode == 1
    rows = {line.split()[0]: line for line in r.stdout.splitlines()[2:]}
    assert "FAILED" in rows["broken"] and rows["bert_qkv"].rstrip().endswith("ok")
    assert (tmp_path / "o" / "bert_qkv" / "plan.json").exists()
    errors = [ln for ln in r.stderr.splitlines() if "error:" in ln]
    assert errors and all("Traceback" not in ln for ln in r.stderr.splitlines())
    assert any("broken" in ln for ln in errors)


@pytest.mark.parametrize("unfused", [False, True])
def test_run_matches_onnxruntime(tmp_path, unfused):
    ort = pytest.importorskip("onnxruntime")
    from polyfuse.frontend.onnx import load_onnx_model

    model = MODELS / "mlp_gelu_ln.onnx" if unfused else MODELS / "bert_qkv.onnx"
    info = load_onnx_model(str(model))
    rng = np.random.default_rng(0)
    inputs = {t.name: rng.standard_normal(t.shape).astype(np.float32) for t in info.inputs}
    np.savez(tmp_path / "in.npz", **inputs)
    args = ["run", model, "--inputs", tmp_path / "in.npz", "--save", tmp_path / "out.npz"]
    r = run_cli(*args, *(["--unfused"] if unfused else []))
    assert r.returncode == 0, r.stderr
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    expected = dict(zip([o.name for o in session.get_outputs()], session.run(None, inputs)))
    with np.load(tmp_path / "out.npz") as got:
        assert sorted(got.files) == sorted(expected)
        for name, want in expected.items():
            np.testing.assert_allclose(got[name], want, rtol=1e-4, atol=1e-5)


def test_run_says_on_which_device_the_model_runs_and_why(monkeypatch):
    """Given no device, ``run`` says which device the session picked for this model's work
    (the line is absent where the default stands: one device, or PYOPENCL_CTX)."""
    from polyfuse.apps.session import session_device

    monkeypatch.delenv("PYOPENCL_CTX", raising=False)
    model = MODELS / "bert_qkv.onnx"
    chosen = session_device(str(model), {})
    r = run_cli("run", model, "--random")
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "lowest estimated time of this model" in ln]
    if chosen is None:
        assert not lines
    else:
        assert lines == [f"polyfuse: on {chosen[0].name.strip()}: {chosen[1]}"]


def test_run_bad_inputs_file(tmp_path):
    r = run_cli("run", MODELS / "bert_qkv.onnx", "--inputs", tmp_path / "nope.npz",
                "--save", tmp_path / "out.npz")
    assert r.returncode == 1 and "nope.npz" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("command", ["fuse", "run", "inputs"])
def test_param_on_a_static_model_is_an_error(tmp_path, command):
    extra = {"fuse": ["--out", tmp_path / "o", "--no-timing"],
             "run": ["--random", "--save", tmp_path / "out.npz"], "inputs": []}[command]
    r = run_cli(command, QUICK[0], "--param", "batch=4", "-q", *extra)
    assert r.returncode == 1, r.stdout + r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(errors) == 1 and "Traceback" not in r.stderr
    assert "bert_qkv.onnx: --param batch" in errors[0] and "static" in errors[0]
    assert not (tmp_path / "out.npz").exists()
