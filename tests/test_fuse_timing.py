"""``polyfuse fuse`` times an ONNX model in the kernel form a session runs, for a bounded number
of runs, and says what it timed (issue 22 item 4)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BERT_QKV = ROOT / "examples" / "models" / "bert_qkv.onnx"


def test_runs_fit_the_budget():
    from polyfuse.runtime.execute import runs_within

    assert runs_within(None, 30.0, 5) == 5  # no budget: every run asked for
    assert runs_within(5.0, 0.001, 5) == 5  # a small model: the runs asked for
    assert runs_within(5.0, 2.0, 5) == 2  # a real-size one: what fits in the budget
    assert runs_within(5.0, 26.6, 5) == 1  # never none


def test_session_form_is_the_measured_choice_else_the_usual_one(monkeypatch):
    from polyfuse.apps import session

    monkeypatch.setattr(session, "_cached_form", lambda *a: None)
    assert session.session_form(str(BERT_QKV)) == (
        session.USUAL_FORM, "the session's usual choice; not yet measured for this model")
    assert session.USUAL_FORM == "blocked"
    monkeypatch.setattr(session, "_cached_form", lambda *a: "tiled")
    assert session.session_form(str(BERT_QKV))[0] == "tiled"


def test_fuse_times_the_sessions_form_and_says_so(tmp_path, monkeypatch):
    """The plan and fused.cl stay the tiled form's; the timing runs the blocked form's programs
    (register-blocked products: ``acc_0_0``), each bounded by the budget, and the summary
    names the form and the runs."""
    import polyfuse.runtime as runtime
    from polyfuse.apps import session
    from polyfuse.apps.batch import TIMING_BUDGET_S, fuse_model

    monkeypatch.setattr(session, "_cached_form", lambda *a: None)
    timed: list[tuple[bool, float]] = []
    real = runtime.time_program

    def spy(program, **kw):
        timed.append((any("acc_0_0" in k.source for k in program.kernels.values()),
                      kw.get("budget_s")))
        return real(program, **kw)

    monkeypatch.setattr(runtime, "time_program", spy)
    s = fuse_model(str(BERT_QKV), str(tmp_path), timing=True, repeat=3, cache=False)
    assert s.error is None, s.error
    assert timed == [(True, TIMING_BUDGET_S)] * 2  # unfused, then fused
    # the runs that fit the budget: all 3 asked for on an idle machine, fewer under load
    m = re.fullmatch(r"blocked, ([123])\+([123]) runs", s.timed)
    assert m is not None, s.timed
    assert s.row()[-2] == s.timed
    assert s.unfused_ms > 0 and s.fused_ms > 0
    assert "acc_0_0" not in (tmp_path / "bert_qkv" / "fused.cl").read_text()


def test_fuse_times_on_the_device_a_session_runs_on(tmp_path, monkeypatch):
    """Given no device, ``fuse`` times the model where a session given none would run it
    (``session_device``: the device weighed by the model's own work)."""
    import polyfuse.runtime as runtime
    from polyfuse.apps import session
    from polyfuse.apps.batch import fuse_model
    from polyfuse.runtime.device import device_spec, get_device

    monkeypatch.delenv("PYOPENCL_CTX", raising=False)
    monkeypatch.setattr(session, "_cached_form", lambda *a: None)
    chosen = session.session_device(str(BERT_QKV), {})
    want = device_spec(chosen[0] if chosen is not None else get_device(None))
    devices: list[object] = []
    real = runtime.time_program

    def spy(program, **kw):
        devices.append(kw.get("device"))
        return real(program, **kw)

    monkeypatch.setattr(runtime, "time_program", spy)
    s = fuse_model(str(BERT_QKV), str(tmp_path), timing=True, repeat=2, cache=False)
    assert s.error is None, s.error
    assert [device_spec(get_device(d)) for d in devices] == [want, want]


def _built_forms(monkeypatch):
    """Record the forms a cold session builds (``_form`` of the inner sessions)."""
    from polyfuse.apps import session

    built = []
    real = session.InferenceSession.__init__

    def spy(self, *args, **kwargs):
        if kwargs.get("_form") is not None:
            built.append(kwargs["_form"])
        real(self, *args, **kwargs)

    monkeypatch.setattr(session.InferenceSession, "__init__", spy)
    return built


def test_the_model_decides_when_one_form_is_far_slower(monkeypatch):
    """A form predicted more than FORM_MARGIN times slower is neither built nor timed, and
    the session says the model chose."""
    import polyfuse
    from polyfuse.apps import session

    monkeypatch.setattr(session, "_predicted_forms", lambda *a: (
        {"tiled": 20.0 * session.FORM_MARGIN, "blocked": 10.0}, "", {}))
    built = _built_forms(monkeypatch)
    sess = polyfuse.InferenceSession(str(BERT_QKV), cache=False)
    assert built == ["blocked"]
    assert sess.form_choice["form"] == "blocked"
    assert sess.form_choice["decided_by"] == "the model"
    assert sess.form_choice["wall_s"] == {}


def test_timing_confirms_forms_the_model_cannot_rank(monkeypatch):
    """Predictions within the margin (or none: an uncalibrated device) leave both forms to be
    built and timed, and the session says why it had no prediction."""
    import polyfuse
    from polyfuse.apps import session

    monkeypatch.setattr(session, "_predicted_forms", lambda *a: (
        {"tiled": 1.5, "blocked": 1.0}, "", {}))
    built = _built_forms(monkeypatch)
    sess = polyfuse.InferenceSession(str(BERT_QKV), cache=False)
    assert sorted(built) == ["blocked", "tiled"]
    assert sess.form_choice["decided_by"] == "timing"
    assert set(sess.form_choice["wall_s"]) == {"blocked", "tiled"}


class _Timed:
    """A stand-in session whose runs take ``seconds`` (a fake clock) and are counted."""

    clock = [0.0]

    def __init__(self, seconds: float):
        self.seconds, self.runs = seconds, 0

    def run(self, names, feeds):
        self.runs += 1
        _Timed.clock[0] += self.seconds


def test_a_form_far_slower_at_its_first_run_is_timed_no_further(monkeypatch):
    """Timing confirms, but a form whose first timed run is past FORM_MARGIN times the
    fastest is not run again (an uncalibrated cold session ran the slow form 10 times); forms
    within the margin get the 9 interleaved runs."""
    from polyfuse.apps import session

    monkeypatch.setattr(session.time, "perf_counter", lambda: _Timed.clock[0])
    cands = {"tiled": _Timed(50.0), "blocked": _Timed(1.0), "other": _Timed(2.0)}
    walls = session._time_forms(cands, {})
    assert [c.runs for c in cands.values()] == [2, 10, 10]  # warm-up + timed runs
    assert walls == {"tiled": 50.0, "blocked": 1.0, "other": 2.0}
    assert min(walls, key=walls.__getitem__) == "blocked"


def test_an_uncalibrated_cpu_ranks_the_forms_with_the_shipped_calibration(tmp_path,
                                                                          monkeypatch):
    """A CPU device with no calibration of its own predicts with the one shipped for the
    development machine's CPU, and says so; a device that is not a CPU gets no prediction."""
    from polyfuse.apps import session

    monkeypatch.setenv("POLYFUSE_CACHE", str(tmp_path))
    predicted, note, loaded = session._predicted_forms(str(BERT_QKV), {}, None)
    assert set(predicted) == {"tiled", "blocked"} and all(t > 0 for t in predicted.values())
    assert "shipped for a reference CPU" in note and set(loaded) == set(predicted)
    gpu = dataclasses.replace(session.device_target(None), is_cpu=False)
    monkeypatch.setattr(session, "device_target", lambda _device: gpu)
    monkeypatch.setattr(session, "device_forms", lambda _device: ("tiled", "gpu"))
    predicted, why, loaded = session._predicted_forms(str(BERT_QKV), {}, None)
    assert predicted == {} and "no calibration" in why and loaded == {}


def test_the_shipped_reference_calibration_has_todays_features():
    """Regenerate it (Calibration.reference_cpu's docstring) when FEATURES change."""
    from polyfuse.perf.model import Calibration

    cal = Calibration.reference_cpu()
    assert cal.costs and cal.fit_geomean_error < 1.0


def test_predictions_of_both_forms_with_a_calibration(tmp_path, monkeypatch):
    """With a calibration on record, both forms' unfused programs are predicted (a fitted
    calibration of the cost of each feature; here a fixed one, written as a device's)."""
    from polyfuse.apps import session
    from polyfuse.perf.model import FEATURES, Calibration, calibration_key
    from polyfuse.runtime.device import get_device

    monkeypatch.setenv("POLYFUSE_CACHE", str(tmp_path))
    cal = Calibration(device_key=calibration_key(get_device(None)),
                      costs={f: 1e-9 for f in FEATURES}, p=4.0, subgroup_size=8)
    cal.save()
    predicted, why, loaded = session._predicted_forms(str(BERT_QKV), {}, None)
    assert why == "" and set(predicted) == {"tiled", "blocked"} == set(loaded)
    assert all(t > 0 for t in predicted.values())


def test_the_form_built_starts_from_the_model_its_prediction_loaded(tmp_path, monkeypatch):
    """A calibrated cold session loads each form's model once, for its prediction, and fuses
    the form it builds from that model (no second front-end load): the same kernels as a
    session of that form loaded afresh."""
    import polyfuse
    import polyfuse.frontend.onnx as front
    from polyfuse.apps import onnx_run, session
    from polyfuse.perf.model import FEATURES, Calibration, calibration_key
    from polyfuse.runtime.device import get_device

    monkeypatch.setenv("POLYFUSE_CACHE", str(tmp_path))
    Calibration(device_key=calibration_key(get_device(None)),
                costs={f: 1e-9 for f in FEATURES}, p=4.0, subgroup_size=8).save()
    loads = []
    real = front.load_onnx_model

    def spy(*a, **kw):
        loads.append(kw.get("target"))
        return real(*a, **kw)

    monkeypatch.setattr(front, "load_onnx_model", spy)
    monkeypatch.setattr(onnx_run, "_FUSED_CACHE", {})
    sess = polyfuse.InferenceSession(str(BERT_QKV), cache=False)
    forms = session.device_forms(None)
    assert len(loads) == len(forms)
    assert [t.kernel.name for t in loads] == list(forms)
    monkeypatch.setattr(onnx_run, "_FUSED_CACHE", {})
    again = polyfuse.InferenceSession(str(BERT_QKV), cache=False,
                                      _form=sess.form_choice["form"])
    assert len(loads) == len(forms) + 1
    assert again.source == sess.source


def test_the_shipped_calibration_ranks_a_real_size_product_blocked_first(tmp_path):
    """A product past the cache (256 x 1024 @ 1024 x 3072, B 12 MB): the blocked form, 5-6x
    faster measured, is predicted faster than the tiled one.  A term that charged every
    strided access as memory traffic once predicted the opposite (a session then ran BERT-base
    in the tiled form, 68x slower than onnxruntime)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from polyfuse.apps.prediction import predict_program
    from polyfuse.frontend.onnx import load_onnx
    from polyfuse.perf.model import Calibration
    from polyfuse.runtime.device import device_target

    w = np.random.default_rng(0).random((1024, 3072), dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "ffn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [256, 1024])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [256, 3072])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "ffn.onnx"
    path.write_bytes(model.SerializeToString())
    cal = Calibration.reference_cpu()
    predicted = {form: sum(lp.predicted_s * lp.count for lp in predict_program(
        load_onnx(str(path), target=device_target(None).with_variant(form)), cal))
        for form in ("tiled", "blocked")}
    assert predicted["blocked"] * 2 < predicted["tiled"]
