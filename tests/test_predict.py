"""``polyfuse predict`` and ``polyfuse.predict``: the model's time per launch, the measured
time and the error beside it, and clear errors on bad input.

The tests run against a synthetic calibration saved under the default device's key (in a cache
of each test's own), so they do not spend the calibration's seconds; no test asserts
a measured time, only that it is there and consistent with the error reported.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import polyfuse
from polyfuse.apps.prediction import LaunchPrediction, Prediction
from polyfuse.perf import model as pm

ROOT = Path(__file__).resolve().parent.parent
CHAIN = ROOT / "examples" / "elementwise_chain"
LAUNCH_KEYS = {"kernel", "count", "predicted_s", "measured_s", "error", "counts", "features"}


def synthetic() -> pm.Calibration:
    costs = {f: 1e-10 for f in pm.FEATURES}
    costs["launches"] = 5e-6
    return pm.Calibration(device_key="", costs=costs, p=2.0, subgroup_size=8,
                          device="synthetic")


@pytest.fixture
def saved_calibration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> pm.Calibration:
    """A synthetic calibration cached for the default device (what the CLI loads), in a cache
    of the test's own: saved in the suite's shared cache, it would rank the kernels of every
    later compilation on this worker (a CLI fuse split its groups by the synthetic costs)."""
    own = tmp_path / "cache"
    shutil.copytree(os.environ["POLYFUSE_CACHE"], own)  # the device probes, not re-run
    monkeypatch.setenv("POLYFUSE_CACHE", str(own))
    cal = synthetic()
    cal.device_key = pm.calibration_key(None)
    cal.save()
    return cal


def run_cli(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polyfuse.apps.cli", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_cli_json_schema_with_measurement(saved_calibration: pm.Calibration):
    r = run_cli("predict", CHAIN / "kernels.cl", "--host", CHAIN / "host.c", "--param",
                "n=4096", "--measure", "--repeat", "3", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)  # stdout holds the JSON alone
    assert data["device"] and data["calibration"].endswith(".json")
    assert [lp["kernel"] for lp in data["launches"]] == ["scale", "add", "relu", "copy"]
    for lp in data["launches"]:
        assert LAUNCH_KEYS <= set(lp)
        assert lp["count"] == 1 and lp["predicted_s"] > 0 and lp["measured_s"] > 0
        p, m = lp["predicted_s"], lp["measured_s"]
        assert lp["error"] == pytest.approx(max(p / m, m / p) - 1)
        assert lp["counts"]["work_items"] == 4096
    # each launch streams n floats of each array once (add: two in, one out), counted once
    # however many features charge them
    assert [lp["counts"]["gmem_bytes"] for lp in data["launches"]] == \
        [8 * 4096, 12 * 4096, 8 * 4096, 8 * 4096]
    assert data["geomean_error"] == pytest.approx(
        pm.geomean_error([(lp["predicted_s"], lp["measured_s"]) for lp in data["launches"]]))
    assert "calibration of" in r.stderr  # progress, and where the calibration is


def test_cli_text_table_without_measurement(saved_calibration: pm.Calibration):
    r = run_cli("predict", CHAIN / "kernels.cl", "--host", CHAIN / "host.c", "--param",
                "n=4096")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:3] == ["launch", "kernel", "count"]
    assert "predicted us" in lines[0] and "measured us" not in lines[0]
    assert {ln.split()[1] for ln in lines[2:6]} == {"scale", "add", "relu", "copy"}
    assert any(ln.startswith("calibration: ") and ln.endswith(".json") for ln in lines)


@pytest.mark.parametrize("args, message", [
    (("missing.cl", "--host", "x.c"), "missing.cl: no such file"),
    ((CHAIN / "kernels.cl",), "give the host program (--host HOST.c)"),
    ((CHAIN / "host.c", "--host", CHAIN / "host.c"), ""),  # a host as kernels: one line
    ((ROOT / "README.md",), "not an ONNX model (.onnx) nor OpenCL C (.cl)"),
])
def test_cli_bad_input_is_one_line(saved_calibration: pm.Calibration, args, message):
    r = run_cli("predict", *args)
    assert r.returncode == 1
    assert r.stdout == ""
    err = r.stderr.strip().splitlines()[-1]
    assert err.startswith("polyfuse: error:") and message in err
    assert "Traceback" not in r.stderr


def test_python_api_program_and_onnx(saved_calibration: pm.Calibration):
    prog = polyfuse.load_opencl(str(CHAIN / "kernels.cl"), host=str(CHAIN / "host.c"),
                                params={"n": 2048})
    pred = polyfuse.predict(prog, calibration=saved_calibration, measure=True, repeat=2)
    assert isinstance(pred, Prediction) and len(pred.launches) == 4
    assert pred.predicted_s == pytest.approx(sum(lp.predicted_s for lp in pred.launches))
    assert pred.geomean_error is not None and pred.geomean_error >= 0
    assert json.loads(json.dumps(pred.to_dict()))["launches"][0]["kernel"] == "scale"
    onnx = polyfuse.predict(ROOT / "examples" / "models" / "mlp_gelu_ln.onnx",
                            calibration=saved_calibration)
    assert onnx.launches and all(lp.measured_s is None for lp in onnx.launches)
    assert all(lp.predicted_s > 0 for lp in onnx.launches)


def test_an_onnx_models_kernel_form_is_chosen(saved_calibration: pm.Calibration):
    """``form`` (``--form``) loads an ONNX model's kernels in that form: the blocked form's
    products are register blocks (``block_iterations``), the tiled form's are not; a form
    for OpenCL C is refused."""
    model = ROOT / "examples" / "models" / "mlp_gelu_ln.onnx"
    forms = {f: polyfuse.predict(model, calibration=saved_calibration, form=f)
             for f in ("tiled", "blocked")}
    blocks = {f: sum(lp.features.get("block_iterations", 0.0) for lp in p.launches)
              for f, p in forms.items()}
    assert blocks["tiled"] == 0 < blocks["blocked"]
    with pytest.raises(polyfuse.PolyfuseError, match="ONNX model only"):
        polyfuse.predict(CHAIN / "kernels.cl", host=str(CHAIN / "host.c"),
                         params={"n": 2048}, calibration=saved_calibration, form="blocked")


def test_an_onnx_model_is_predicted_in_the_form_its_session_runs(
        saved_calibration: pm.Calibration):
    """Without ``form``, a model is predicted in the kernel form an ``InferenceSession`` of it
    runs (the usual form on a CPU before a session has measured it), and the prediction says
    which form and why; an explicit ``form`` is said to be asked for."""
    from polyfuse.apps.session import session_form

    model = ROOT / "examples" / "models" / "mlp_gelu_ln.onnx"
    form, how = session_form(str(model), {}, None)
    pred = polyfuse.predict(model, calibration=saved_calibration)
    assert pred.form == f"{form} ({how})"
    same = polyfuse.predict(model, calibration=saved_calibration, form=form)
    assert same.form == f"{form} (asked for)"
    assert [lp.features for lp in pred.launches] == [lp.features for lp in same.launches]
    assert f"kernel form {form}" in pred.table()
    assert pred.to_dict()["form"] == pred.form
    chain = polyfuse.predict(CHAIN / "kernels.cl", host=str(CHAIN / "host.c"),
                             params={"n": 2048}, calibration=saved_calibration)
    assert chain.form == "" and "kernel form" not in chain.table()


def test_a_short_program_is_measured_over_more_runs_than_asked(
        saved_calibration: pm.Calibration):
    """``repeat`` is the least number of recorded runs: a program of microseconds is run
    until its runs took ``min_time_s``, so its medians are the kernels', not the scheduler's;
    ``min_time_s=0`` records exactly ``repeat`` runs."""
    from polyfuse.perf.launches import MAX_RUNS, measure_launches, predict_program

    prog = polyfuse.load_opencl(str(CHAIN / "kernels.cl"), host=str(CHAIN / "host.c"),
                                params={"n": 256})
    launches = predict_program(prog, saved_calibration, params={"n": 256})
    short = measure_launches(prog, launches, params={"n": 256}, repeat=3, min_time_s=0.05)
    assert all(lp.runs is not None and 3 < lp.runs <= MAX_RUNS for lp in short)
    exact = measure_launches(prog, launches, params={"n": 256}, repeat=3, min_time_s=0.0)
    assert [lp.runs for lp in exact] == [3] * len(exact)
    assert all(lp.measured_s and lp.measured_s > 0 for lp in short + exact)


def test_cli_takes_a_real_programs_flags(saved_calibration: pm.Calibration):
    """A real host program needs its command line and definitions, as ``polyfuse fuse`` takes
    them: ``--args`` sizes the getopt host's launch (its loop of ``-i`` launches counted as
    instances), ``-D`` defines a macro; without ``--args`` the same host is refused in one
    line naming what to give."""
    d = ROOT / "tests" / "host_programs" / "getopt_c"
    r = run_cli("predict", d / "kernels.cl", "--host", d / "host.c", "--args", "-i 3 -n 512",
                "-D", "UNUSED_BY_THIS_HOST=1", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    (launch,) = data["launches"]
    assert launch["count"] == 3 and launch["counts"]["work_items"] == 3 * 512
    # the host passes a NULL local size: predicted (and measured) at one the note names
    assert data["notes"] == ["launch 0 (inc): the host leaves the local size to the device; "
                             "predicted and measured at (256,)"]
    r = run_cli("predict", d / "kernels.cl", "--host", d / "host.c")
    assert r.returncode == 1 and "--args" in r.stderr.strip().splitlines()[-1]
    r = run_cli("predict", ROOT / "examples" / "models" / "mlp_gelu_ln.onnx", "-D", "X=1")
    assert r.returncode == 1 and "takes no --host, -I, -D nor --args" in r.stderr


def test_launch_in_host_loop_is_per_instance():
    """A launch repeated by a host loop: count = instances, times per instance."""
    b = polyfuse.ProgramBuilder(str(CHAIN / "kernels.cl"), name="looped")
    b.buffer("x", 4 * 1024)
    b.buffer("a", 4 * 1024)
    b.write("x")
    with b.loop("t", 0, 5):
        b.launch("scale", (1024,), (64,), {"x": "x", "a": "a", "alpha": 2, "n": 1024})
    b.read("a")
    b.finish()
    cal = synthetic()
    looped = polyfuse.predict(b.build(), calibration=cal).launches
    b1 = polyfuse.ProgramBuilder(str(CHAIN / "kernels.cl"), name="once")
    b1.buffer("x", 4 * 1024)
    b1.buffer("a", 4 * 1024)
    b1.write("x")
    b1.launch("scale", (1024,), (64,), {"x": "x", "a": "a", "alpha": 2, "n": 1024})
    b1.read("a")
    b1.finish()
    once = polyfuse.predict(b1.build(), calibration=cal).launches
    assert looped[0].count == 5 and once[0].count == 1
    assert looped[0].predicted_s == pytest.approx(once[0].predicted_s, rel=0.05)


OPAQUE_HELPER = """
void spin(__global const uchar *in, __global uchar *out, uint n)
{
    uint acc = 1;
    for (int i = 1; i < 5000; i++)
        acc += in[(i * 3) % n];
    for (uint i = get_global_id(0); i < n; i += get_global_size(0))
        out[i] = in[i] + (uchar) acc;
}

__kernel void busy(__global const uchar *in, __global uchar *out, uint n)
{
    spin(in, out, n);
}
"""


def test_a_call_the_model_keeps_opaque_is_refused(tmp_path: Path):
    """A helper with statements (a loop of 5000 loads per work-item, as AMD's
    ConcurrentKernel sample has) is kept opaque by the front-end: its arrays are read and
    written entirely, which keeps dependences sound, but its work is in no count (the
    sample's launches were predicted at 1.6 us and measured at 12-23 ms).  The prediction is
    refused, naming the kernel's file and line, the kernel and the call."""
    src = tmp_path / "busy.cl"
    src.write_text(OPAQUE_HELPER)
    b = polyfuse.ProgramBuilder(str(src), name="opaque")
    b.buffer("in", 4096)
    b.buffer("out", 4096)
    b.write("in")
    b.launch("busy", (256,), (64,), {"in": "in", "out": "out", "n": 4096})
    b.read("out")
    b.finish()
    with pytest.raises(polyfuse.PolyfuseError,
                       match=r"busy\.cl:\d+: kernel busy: in is passed to spin\(\), which "
                             r"polyfuse does not inline: the work of that call is in no count"):
        polyfuse.predict(b.build(), calibration=synthetic())


def test_error_measure():
    lp = LaunchPrediction(0, "k", 1, {}, predicted_s=2e-6, measured_s=1e-6)
    assert lp.error == pytest.approx(1.0)
    assert LaunchPrediction(0, "k", 1, {}, 1e-6, 2e-6).error == pytest.approx(1.0)
    assert LaunchPrediction(0, "k", 1, {}, 1e-6).error is None
    pred = Prediction("p", "d", "k", "c.json", False, (
        LaunchPrediction(0, "a", 1, {}, 4e-6, 1e-6), LaunchPrediction(1, "b", 1, {}, 1e-6, 1e-6)))
    assert pred.geomean_error == pytest.approx(math.sqrt(4.0) - 1)
