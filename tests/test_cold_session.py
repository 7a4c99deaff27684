"""A cold session's build work done once: renamed kernel copies (a model's repeated layers)
built once, the build pass's program reused by the session, the worker check run on the
evaluated image (docs/performance.md, "Work a cold session does once")."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyopencl as cl
import pytest

from polyfuse.core.program import PolyfuseError, Program
from polyfuse.frontend.builder import ProgramBuilder
from polyfuse.runtime import device as dv
from polyfuse.runtime.execute import (
    CompiledProgram,
    distinct_kernels,
    image_check,
    kernel_aliases,
)

MODELS = Path(__file__).resolve().parent.parent / "examples" / "models"

_BODY = "{ const int i = get_global_id(0); y[i] = 2.0f * x[i] + %s; }\n"


def _layers(third: str = "2.0f", global_size: int = 64) -> Program:
    """Two kernels that differ only in their names and a third with its own constant."""
    src = "".join(f"__kernel void {name}(__global const float *x, __global float *y)\n"
                  + _BODY % const for name, const in
                  (("layer0", "1.0f"), ("layer1", "1.0f"), ("other", third)))
    b = ProgramBuilder(src)
    for n in "abcd":
        b.buffer(n, 4 * 64)
    b.launch("layer0", (global_size,), (16,), ["a", "b"])
    b.launch("layer1", (global_size,), (16,), ["b", "c"])
    b.launch("other", (global_size,), (16,), ["c", "d"])
    return b.build()


@pytest.fixture(scope="module")
def cq() -> tuple:
    try:
        return dv.get_context()
    except PolyfuseError as err:  # pragma: no cover - no OpenCL device
        pytest.skip(str(err))


def test_renamed_copies_are_built_once_and_compute_the_same(cq) -> None:
    prog = _layers()
    assert kernel_aliases(prog) == {"layer0": "layer0", "layer1": "layer0", "other": "other"}
    ctx, queue = cq
    ex = CompiledProgram(prog, ctx=ctx, queue=queue)
    assert "void layer1" not in ex.image.source
    assert "void layer0" in ex.image.source and "void other" in ex.image.source
    ex.reset()
    res = ex.execute()
    a = res.initial["a"].view(np.float32)
    np.testing.assert_allclose(res.buffers["d"], 2 * (2 * (2 * a + 1) + 1) + 2, rtol=1e-6)
    assert ex.program is prog  # launches still name their own kernels


def test_a_kernel_that_differs_is_not_served_by_another() -> None:
    """The text up to the kernel's name decides: a changed constant, or the same text built
    with other options, is a kernel of its own."""
    assert kernel_aliases(_layers(third="1.0f"))["other"] == "layer0"
    prog = _layers()
    copy = prog.kernels["layer1"]
    opts = dataclasses.replace(prog, kernels={
        **prog.kernels, "layer1": dataclasses.replace(copy, build_options=("-DX=1",))})
    assert kernel_aliases(opts) == {"layer0": "layer0", "layer1": "layer1", "other": "other"}
    assert distinct_kernels(opts) is opts


def test_the_worker_check_follows_the_steps(cq) -> None:
    """The check of an image is keyed by its evaluated steps: the same kernels launched over
    another grid are checked again, not answered from the verdict of the first."""
    ctx, queue = cq
    one, other = (CompiledProgram(_layers(global_size=g), ctx=ctx, queue=queue).image
                  for g in (64, 32))
    assert one.source == other.source
    assert image_check(one).key != image_check(other).key
    assert image_check(one).key == image_check(
        CompiledProgram(_layers(), ctx=ctx, queue=queue).image).key
    # float data stays behind: the worker gets integer roots only
    assert not image_check(one).trial.args[0].initial  # type: ignore[union-attr]


def test_a_fused_session_compiles_its_program_once(cq, tmp_path, monkeypatch) -> None:
    """The build pass builds the source the session runs, in the context the session gets:
    one compile in this process (the check's is in its worker)."""
    from polyfuse import InferenceSession

    monkeypatch.setenv("POLYFUSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(dv, "_PROGRAM_CACHE", {})
    builds: list[str] = []
    real = cl.Program.build

    def counting(self: cl.Program, *args: object, **kwargs: object) -> cl.Program:
        builds.append(self._source)  # pyopencl keeps the text it was made from
        return real(self, *args, **kwargs)

    monkeypatch.setattr(cl.Program, "build", counting)
    sess = InferenceSession(str(MODELS / "bert_qkv.onnx"), _form="blocked", cache=False)
    assert builds == [sess.source]
