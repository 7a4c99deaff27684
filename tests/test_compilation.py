"""The compilation record and its passes (polyfuse/passes/compilation.py,
polyfuse.passes.pipeline.PASSES): each pass fills in its stage once, progress comes as typed events,
and the applications load a model once and coarsen it once."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

import polyfuse
from polyfuse.core.program import REFERENCE_TARGET, PolyfuseError
from polyfuse.frontend import onnx as onnx_frontend
from polyfuse.passes import coarsening_tuning
from polyfuse.passes.compilation import Compilation, Event, Options, Stage
from polyfuse.passes.pipeline import PASSES, compile_program, fuse_program, result_of

ROOT = Path(__file__).resolve().parent.parent
QKV = ROOT / "examples" / "qkv"
BERT_QKV = ROOT / "examples" / "models" / "bert_qkv.onnx"


def _qkv() -> polyfuse.Program:
    return polyfuse.load_opencl(str(QKV / "kernels.cl"), host=str(QKV / "host.c"))


def test_each_pass_fills_its_stage_once_and_reports_typed_events():
    events: list[Event] = []
    c = compile_program(Compilation(target=REFERENCE_TARGET, options=Options(build=False),
                                    program=_qkv(), progress=events.append))
    assert [e.stage for e in events] == [Stage.UAR, Stage.PLAN, Stage.CERTIFY, Stage.GENERATE]
    assert str(events[0]) == "building the UAR"
    assert c.certified and c.fused is not None and c.fused.launches_after == 1
    again = compile_program(c)  # a filled-in record is not analysed again
    assert again.uar is c.uar and again.plan is c.plan and again.fused is c.fused
    assert result_of(c).compilation is c


def test_fuse_program_is_the_pass_list():
    program = _qkv()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = fuse_program(program, build=False)
    with pytest.warns(DeprecationWarning, match="device=False"):
        old = fuse_program(program, build=False, device=False)
    assert old.fused.source == new.fused.source
    assert new.compilation is not None and new.compilation.target == REFERENCE_TARGET
    assert len(PASSES) == len(set(PASSES))


def test_kernel_variant_travels_in_the_target():
    from polyfuse.oplib import linalg
    from polyfuse.oplib._common import REDUCTION_MAX_LANES

    # the tiled default is the library's own widths
    assert REFERENCE_TARGET.kernel.reduction_lanes == REDUCTION_MAX_LANES
    assert REFERENCE_TARGET.kernel.block_cols == linalg.BLOCK_COLS
    blocked = REFERENCE_TARGET.with_variant("blocked")
    assert blocked.kernel.product_form == "blocked" and blocked.kernel.reduction_lanes == 8
    assert blocked.with_variant("tiled").kernel == REFERENCE_TARGET.kernel
    tiled = onnx_frontend.load_onnx(str(BERT_QKV))
    other = onnx_frontend.load_onnx(str(BERT_QKV), target=blocked)
    assert [k.source for k in tiled.kernels.values()] != \
        [k.source for k in other.kernels.values()]
    with pytest.raises(ValueError, match="unknown kernel variant"):
        REFERENCE_TARGET.with_variant("wide")


def test_batch_with_verify_loads_the_model_once(tmp_path, monkeypatch):
    from polyfuse.apps.batch import fuse_model

    loads: list[str] = []
    real = onnx_frontend.load_onnx_model

    def counting(path, **kw):
        loads.append(path)
        return real(path, **kw)

    monkeypatch.setattr(onnx_frontend, "load_onnx_model", counting)
    summary = fuse_model(str(BERT_QKV), str(tmp_path), verify=True, timing=False, cache=False)
    assert summary.error is None and summary.verified is True, summary
    assert loads == [str(BERT_QKV)]
    # the stage timers come from the passes' events, not from their messages
    assert {"load", "build_uar", "plan", "generate", "verify", "write"} <= set(summary.stages)
    assert (tmp_path / "bert_qkv" / "plan.json").is_file()


@pytest.mark.slow
def test_batch_with_tune_coarsens_once(tmp_path, monkeypatch):
    from polyfuse.apps.batch import fuse_model

    calls: list[int] = []

    def refusing(program, **kw):
        calls.append(len(program.launches))
        raise PolyfuseError("not in this test")

    monkeypatch.setattr(coarsening_tuning, "tune_coarsening", refusing)
    summary = fuse_model(str(BERT_QKV), str(tmp_path), tune=True, timing=False, cache=False)
    assert summary.error is None, summary
    assert calls == [1]  # the fused program (one launch), once


def test_device_option_travels_as_an_argument(tmp_path, monkeypatch):
    """``--device`` reaches the passes that run on a device (the verification names it) and
    is not written into the environment."""
    import json

    from polyfuse.apps.cli import main
    from polyfuse.passes.compilation import device_name
    from polyfuse.runtime.device import list_devices, probe_device

    usable = [i for i, _, dev in list_devices() if probe_device(dev) is None]
    if not usable:
        pytest.skip("no usable OpenCL device")
    monkeypatch.delenv("PYOPENCL_CTX", raising=False)
    dev = usable[-1]
    assert main(["--device", dev, "fuse", "-q", str(QKV / "kernels.cl"), "--host",
                 str(QKV / "host.c"), "--verify", "--out", str(tmp_path)]) == 0
    assert "PYOPENCL_CTX" not in os.environ
    verified = json.loads((tmp_path / "plan.json").read_text())["verified"]
    assert verified["ok"] and verified["device"] == device_name(dev)
