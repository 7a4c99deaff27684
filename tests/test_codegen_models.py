"""The fused kernels' models, each distinct kernel parsed once (polyfuse.codegen.models).

The oracle is the old path: print the whole fused source and parse it with the kernel
front-end.  On bundled programs and models (OpenCL hosts, an unrolled LSTM whose cells repeat,
and a 2-layer PyTorch-style encoder whose layers are identical) the fused program must hold the
same kernel records (source, places, notes, domains, accesses and schedule as isl sets), and
generation with sharing switched off must give byte-identical source and plan.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import polyfuse
from polyfuse.codegen import models
from polyfuse.core.program import Kernel, shared_runtime_options
from polyfuse.frontend import opencl
from polyfuse.frontend.onnx import load_onnx_model
from polyfuse.passes.pipeline import fuse_program
from polyfuse.report import plan_json, plan_to_text

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="module")
def encoder2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer post-LN encoder as PyTorch exports it (analysis/scaling.py's generator)."""
    sys.path.insert(0, str(ROOT / "analysis"))
    try:
        import scaling
    finally:
        sys.path.pop(0)
    return scaling.write_model(2, 64, tmp_path_factory.mktemp("enc"))


#: a smoothing pass run twice (a halo read keeps the passes apart, so the two fused kernels
#: print alike): a loop with a doubling step and a barrier under a data-dependent branch make the
#: front-end write source lines into the model's notes, which must move with the second copy
SMOOTH = """
__kernel void smooth(__global const float *a, __global float *b, const int n) {
  int i = get_global_id(0);
  float s = 0.0f;
  for (int k = 1; k < 8; k *= 2) {
    s += a[(i + k) % n];
  }
  if (s > 0.0f) {
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  b[i] = s;
}
"""


def _smooth_twice() -> polyfuse.Program:
    b = polyfuse.ProgramBuilder(SMOOTH, name="smooth_twice")
    for x in "abc":
        b.buffer(x, 4 * 256)
    b.write("a")
    b.launch("smooth", global_size=(256,), local_size=(64,), args={"a": "a", "b": "b", "n": 256})
    b.launch("smooth", global_size=(256,), local_size=(64,), args={"a": "b", "b": "c", "n": 256})
    b.read("c", blocking=True)
    return b.build()


def _program(name: str, encoder2: Path) -> polyfuse.Program:
    if name == "smooth_twice":
        return _smooth_twice()
    if name == "encoder2":
        return load_onnx_model(str(encoder2)).program
    if name.endswith(".onnx"):
        return load_onnx_model(str(EXAMPLES / "models" / name)).program
    d = EXAMPLES / name
    return polyfuse.load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"))


def _same_isl(a: Any, b: Any) -> bool:
    return a.get_space() == b.get_space() and a.is_equal(b)


def _assert_same_kernel(a: Kernel, b: Kernel) -> None:
    assert (a.name, a.source, a.loc, a.notes, a.params, a.arrays, a.work_dims, a.uses,
            a.context, a.build_options) == (b.name, b.source, b.loc, b.notes, b.params, b.arrays,
                                             b.work_dims, b.uses, b.context, b.build_options)
    assert list(a.helpers) == list(b.helpers)
    assert a.schedule.is_equal(b.schedule)
    assert len(a.statements) == len(b.statements) and len(a.barriers) == len(b.barriers)
    for s, t in zip(a.statements, b.statements):
        assert (s.id, s.code, s.loc, s.order, s.exact_domain) == (t.id, t.code, t.loc, t.order,
                                                                  t.exact_domain)
        assert _same_isl(s.domain, t.domain)
        assert len(s.accesses) == len(t.accesses)
        for x, y in zip(s.accesses, t.accesses):
            assert (x.array, x.address_space, x.direction, x.exact, x.reason, x.loc, x.dtype) == \
                (y.array, y.address_space, y.direction, y.exact, y.reason, y.loc, y.dtype)
            assert _same_isl(x.relation, y.relation)
    for s, t in zip(a.barriers, b.barriers):
        assert (s.id, s.fences, s.loc, s.order, s.uniform) == (t.id, t.fences, t.loc, t.order,
                                                              t.uniform)
        assert _same_isl(s.domain, t.domain)


def _unshared(monkeypatch: pytest.MonkeyPatch) -> None:
    """Switch sharing off: every kernel text parsed on its own, every isl question asked."""
    monkeypatch.setattr(models, "canonical", lambda text, name: None)
    monkeypatch.setattr(models.KernelModels, "answer", lambda self, key, compute: compute())


@pytest.mark.parametrize("name", ["reduction", "stencil3", "smooth_twice", "encoder2"])
def test_models_equal_print_and_parse(name: str, encoder2: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Verification runs the fused source with these records (tests/test_codegen.py,
    tests/test_onnx.py verify through this path), so equal records verify alike."""
    program = _program(name, encoder2)
    extracted = []
    real_extract = opencl.extract_kernel

    def counting(*args: Any, **kw: Any) -> Kernel:
        extracted.append(1)
        return real_extract(*args, **kw)

    monkeypatch.setattr(opencl, "extract_kernel", counting)
    result = fuse_program(program, build=False)
    shared_count = len(extracted)
    fused = result.fused
    # the oracle: the printed source parsed whole, as codegen did before
    old = opencl.parse_kernels(fused.source, f"<fused {program.name}>",
                               options=shared_runtime_options(program.kernels.values()))
    assert list(old) == list(fused.program.kernels)
    for kname, k in old.items():
        _assert_same_kernel(fused.program.kernels[kname], k)
    if name in ("encoder2", "smooth_twice"):
        _assert_layers_shared(fused)
    if name == "smooth_twice":
        first, second = fused.program.kernels.values()
        assert any("barrier at line" in n for n in first.notes)
        assert first.notes != second.notes  # the second copy's own line
    # generation with nothing shared: byte-identical source, plan and models
    _unshared(monkeypatch)
    extracted.clear()
    again = fuse_program(program, build=False)
    assert again.fused.source == fused.source
    assert plan_to_text(plan_json(again.fused)) == plan_to_text(plan_json(fused))
    assert again.fused.dropped_buffers == fused.dropped_buffers
    for kname, k in again.fused.program.kernels.items():
        _assert_same_kernel(fused.program.kernels[kname], k)
    if name in ("encoder2", "smooth_twice"):  # repeated kernels were not modelled again
        assert shared_count < len(extracted)


def _assert_layers_shared(fused: Any) -> None:
    """The second layer reuses the first one's kernel models, renamed and moved to its lines."""
    kernels = fused.program.kernels
    texts: dict[str, list[Kernel]] = {}
    for gid, kname in fused.group_kernels.items():
        lo, hi = fused.kernel_lines[gid]
        text = "\n".join(fused.source.splitlines()[lo - 1:hi]) + "\n"
        key = models.canonical(text, kname)
        assert key is not None
        texts.setdefault(key, []).append(kernels[kname])
    repeats = [ks for ks in texts.values() if len(ks) > 1]
    assert repeats, "identical layers give identical fused kernels"
    for ks in repeats:
        first = ks[0]
        for k in ks[1:]:
            assert k.ast.body is first.ast.body  # one model, shared
            assert k.name != first.name and k.loc.line > first.loc.line
            for s, t in zip(first.statements, k.statements):
                if s.loc is not None and first.loc.line <= s.loc.line:
                    assert t.loc.line - s.loc.line == k.loc.line - first.loc.line


def test_canonical_blanks_names_and_comments_only() -> None:
    text = ("/* plan group 3 (vertical): #4 relu */\n__kernel void fused_g3(__global float *f1_x)\n"
            "{\n  /* fragment 1: launch #4 relu */\n  f1_x[0] = 1.0f;\n}\n")
    other = text.replace("fused_g3", "fused_g9").replace("#4", "#17").replace("group 3", "group 9")
    assert models.canonical(text, "fused_g3") == models.canonical(other, "fused_g9")
    assert models.canonical(text, "fused_g3") != models.canonical(
        other.replace("1.0f", "2.0f"), "fused_g9")
    # the name used in the body as well: not shared (the rename could not be exact)
    assert models.canonical(text.replace("f1_x[0]", "fused_g3[0]"), "fused_g3") is None
