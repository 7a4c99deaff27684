"""polyfuse.InferenceSession: onnxruntime's calling convention, results equal to onnxruntime's,
clear errors for bad feeds, and no symbolic work (sympy, isl) on the run path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import polyfuse
from polyfuse.apps.onnx_run import ATOL, RTOL, onnxruntime_reference

MODELS = Path(__file__).resolve().parent.parent / "examples" / "models"
QKV = str(MODELS / "bert_qkv.onnx")


@pytest.fixture(scope="module")
def sessions():
    return {f: polyfuse.InferenceSession(QKV, fused=f, _form=form)
            for f, form in ((True, "tiled"), (False, "blocked"))}


def _feeds(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"X": (rng.random((1, 32, 64)) * 2 - 1).astype(np.float32)}


def test_run_matches_onnxruntime_fused_and_unfused(sessions):
    feeds = _feeds()
    ref = onnxruntime_reference(QKV, feeds)
    for sess in sessions.values():
        names = [o.name for o in sess.get_outputs()]
        assert names == ["Q", "K", "V"]
        outs = sess.run(None, feeds)
        for name, out in zip(names, outs):
            assert out.shape == ref[name].shape and out.dtype == np.float32
            np.testing.assert_allclose(out, ref[name], rtol=RTOL, atol=ATOL)
        # a second run with other feeds gives other, still correct, outputs
        feeds2 = _feeds(1)
        (v,) = sess.run(["V"], feeds2)
        np.testing.assert_allclose(v, onnxruntime_reference(QKV, feeds2)["V"], rtol=RTOL,
                                   atol=ATOL)
    assert sessions[True].launches == 1  # bert_qkv fuses into one kernel
    assert sessions[False].launches == 9
    assert sessions[True].plan is not None and sessions[False].plan is None
    assert "__kernel void fused_g0" in sessions[True].source


def test_inputs_and_outputs_describe_the_graph(sessions):
    (x,) = sessions[True].get_inputs()
    assert (x.name, x.shape, x.type) == ("X", [1, 32, 64], "tensor(float)")
    assert [o.shape for o in sessions[True].get_outputs()] == [[1, 4, 32, 16]] * 3


@pytest.mark.parametrize("feeds,message", [
    ({}, r"input 'X' is missing \(expected shape \[1, 32, 64\]"),
    ({"X": np.zeros((1, 32, 63), np.float32)}, r"'X' has shape \[1, 32, 63\], expected "
                                                r"\[1, 32, 64\]"),
    ({"X": np.zeros((1, 32, 64), np.float64)}, r"'X' has dtype float64, expected float32"),
    ({"X": np.zeros((1, 32, 64), np.float32), "Y": np.zeros(1)}, r"unknown input\(s\) 'Y'"),
])
def test_bad_feeds_are_clear_errors(sessions, feeds, message):
    with pytest.raises(polyfuse.PolyfuseError, match=message):
        sessions[True].run(None, feeds)


def test_feeds_upload_straight_from_any_layout(sessions):
    """Feeds go to the device from the caller's array: a non-contiguous view is uploaded by
    value, and changing the array after run() does not change the outputs it returned."""
    x = np.asfortranarray(_feeds(2)["X"])
    ref = onnxruntime_reference(QKV, {"X": np.ascontiguousarray(x)})
    for sess in sessions.values():
        assert sess._feed_writes  # the upload skips the host mirror
        q, _k, v = sess.run(None, {"X": x})
        x_copy = x.copy()
        x[:] = 0
        np.testing.assert_allclose(q, ref["Q"], rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(v, ref["V"], rtol=RTOL, atol=ATOL)
        x[:] = x_copy


def test_unknown_output_name(sessions):
    with pytest.raises(polyfuse.PolyfuseError, match="unknown output 'Z'"):
        sessions[True].run(["Z"], _feeds())


def test_run_does_no_symbolic_work(sessions, monkeypatch):
    """Everything symbolic happens at construction: run() must not touch sympy or isl."""
    import islpy
    import sympy

    def boom(*_a, **_k):
        raise AssertionError("symbolic work on the run path")

    for mod, names in ((sympy, ("sympify", "simplify", "Symbol", "Integer")),
                       (islpy, ("Set", "Map", "BasicSet", "BasicMap", "UnionMap", "UnionSet"))):
        for name in names:
            monkeypatch.setattr(mod, name, boom)
    monkeypatch.setattr(polyfuse.core.program, "eval_host_expr", boom)
    monkeypatch.setattr(polyfuse.core.program, "host_instances", boom)
    import polyfuse.runtime.execute as execute

    monkeypatch.setattr(execute, "eval_host_expr", boom)
    monkeypatch.setattr(execute, "eval_host_int", boom)
    monkeypatch.setattr(execute, "host_instances", boom)
    for sess in sessions.values():
        outs = sess.run(None, _feeds())
        assert len(outs) == 3 and all(np.isfinite(o).all() for o in outs)


def test_opencl_program_runs_through_a_session():
    """A host program's written buffers are the inputs, its read buffers the outputs."""
    ex = MODELS.parent / "elementwise_chain"
    program = polyfuse.load_opencl(str(ex / "kernels.cl"), host=str(ex / "host.c"),
                                   params={"n": 256})
    fused = polyfuse.InferenceSession(program, params={"n": 256})
    plain = polyfuse.InferenceSession(program, params={"n": 256}, fused=False)
    assert fused.launches < plain.launches
    feeds = {i.name: np.linspace(-1, 1, i.shape[0]).astype(np.float32)
             for i in plain.get_inputs()}
    for a, b in zip(fused.run(None, feeds), plain.run(None, feeds)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
