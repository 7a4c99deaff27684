"""Coarsening at other sizes: the examples' guarded size macros, ``-D``, the size search of
``analysis/coarsening.py --size-target-us`` and the tuner's time budget.

A fast GPU runs the examples at their own sizes in microseconds (launch overhead, not the
kernel); the size search grows them until the original's slowest kernel runs long enough.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from polyfuse.codegen.coarsen import Factors, launch_geometry
from polyfuse.passes.coarsening_tuning import BUDGET_SPENT, tune_coarsening

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "coarsening"

sys.path.insert(0, str(ROOT / "analysis"))
try:
    import coarsening
finally:
    sys.path.pop(0)


def test_every_example_guards_its_sizes_and_only_them():
    sizes = {d.name: coarsening.size_macros(d / "host.c")
             for d in EXAMPLES.iterdir() if (d / "host.c").exists()}
    assert sizes["gemm"] == {"NI": 256, "NJ": 256, "NK": 256}
    assert sizes["reduction"] == {"N": 1 << 20}  # `(1 << 20)` evaluated
    assert sizes["jacobi2d"] == {"N": 512}  # TSTEPS and the work-group sizes stay
    assert sizes["pathfinder"] == {"COLS": 32768}
    assert all(sizes.values()), sizes  # every example can be grown
    assert coarsening.scaled_defines(sizes["gemm"], 1) == {}
    assert coarsening.scaled_defines(sizes["gemm"], 4) == {"NI": "1024", "NJ": "1024",
                                                           "NK": "1024"}


def test_defines_change_the_sizes_the_program_runs_at():
    d = EXAMPLES / "jacobi2d"
    base = coarsening.load_example(d, {})
    big = coarsening.load_example(d, coarsening.scaled_defines({"N": 512}, 2))
    assert coarsening.buffer_bytes(base) == (2 * 512 * 512 * 4, 512 * 512 * 4)
    assert coarsening.buffer_bytes(big) == (2 * 1024 * 1024 * 4, 1024 * 1024 * 4)
    assert launch_geometry(base.launches[0], {}).global_size[:2] == (512, 512)
    assert launch_geometry(big.launches[0], {}).global_size[:2] == (1024, 1024)
    assert len(big.launches) == len(base.launches)  # TSTEPS is not a size


def test_coarsened_program_verifies_at_the_larger_size():
    prog = coarsening.load_example(EXAMPLES / "gemm", {"NI": "512", "NJ": "512"})
    assert launch_geometry(prog.launches[0], {}).global_size[:2] == (512, 512)
    # the requested variant applied as is; tune_coarsening raises if it differs from the
    # original on random inputs (every buffer)
    rep = tune_coarsening(prog, factors=[Factors.of((2, 1), (1, 2))], tune=False,
                          use_cache=False)
    assert rep.verification is not None and rep.verification.ok
    assert not any(lt.chosen.identity for lt in rep.launches)


def _fake_timing(monkeypatch, per_byte: float) -> None:
    """Kernel time proportional to the program's buffer bytes (no timing noise)."""
    def slowest(prog, **_kw):
        return coarsening.buffer_bytes(prog)[0] * per_byte, "k"

    monkeypatch.setattr(coarsening, "slowest_kernel", slowest)


def test_size_search_doubles_until_the_target(monkeypatch):
    d = EXAMPLES / "reduction"
    base = coarsening.buffer_bytes(coarsening.load_example(d, {}))[0]
    _fake_timing(monkeypatch, 1e-9)
    choice = coarsening.choose_size(d, 3.5 * base * 1e-9)
    assert choice.scale == 4 and choice.reason == "target reached"
    assert choice.defines == {"N": str(4 << 20)}
    assert [s for s, _, _, _ in choice.probes] == [1, 2, 4]
    assert coarsening.buffer_bytes(choice.program)[0] == choice.nbytes > 3 * base
    # a given definition is kept at every size and is not grown
    fixed = coarsening.choose_size(d, 3.5 * base * 1e-9, defines={"N": str(1 << 21)})
    assert fixed.scale == 1 and fixed.defines == {"N": str(1 << 21)}
    assert fixed.reason == "no guarded size macro to grow"


def test_size_search_stops_at_the_memory_cap_and_the_budget(monkeypatch):
    from polyfuse.runtime.device import get_context

    d = EXAMPLES / "reduction"
    base = coarsening.buffer_bytes(coarsening.load_example(d, {}))[0]
    mem = get_context()[1].device.global_mem_size
    _fake_timing(monkeypatch, 1e-9)
    monkeypatch.setattr(coarsening, "MEMORY_SHARE", mem // (3 * base))  # cap: about 3x
    capped = coarsening.choose_size(d, 1.0)
    assert capped.scale == 2 and "over the cap" in capped.reason
    spent = coarsening.choose_size(d, 1.0, budget_s=0.0)
    assert spent.scale == 1 and spent.reason == "sizing time budget spent"
    # time to size, no time to tune a larger size
    monkeypatch.setattr(coarsening, "SIZING_SHARE", 1 - 1e-9)
    short = coarsening.choose_size(d, 1.0, budget_s=1000.0)
    assert short.scale == 1 and short.reason == "the tuning of x2 would not fit the time budget"


def test_size_search_on_the_device_keeps_a_size_that_reaches_the_target():
    choice = coarsening.choose_size(EXAMPLES / "transpose", 1e-9)
    assert choice.scale == 1 and choice.defines == {} and choice.slowest_s >= 1e-9
    assert choice.kernel == "transpose" and choice.reason == "target reached"


def test_spent_budget_keeps_the_original_and_is_not_cached(tmp_path):
    prog = coarsening.load_example(EXAMPLES / "atax", {})
    rep = tune_coarsening(prog, budget_s=0.0, cache_dir=tmp_path)
    assert [lt.reason for lt in rep.launches] == [BUDGET_SPENT] * 2
    assert all(lt.chosen.identity for lt in rep.launches)
    assert rep.result.program.launches == prog.launches
    assert not list(tmp_path.rglob("*.json"))


def test_script_reports_the_sizes_it_ran_at(monkeypatch, tmp_path):
    _fake_timing(monkeypatch, 1e-12)
    # no time to tune: every launch keeps the original (fast), still loaded at the grown size
    monkeypatch.setattr(coarsening, "tune_coarsening",
                        lambda prog, **kw: tune_coarsening(prog, **{**kw, "budget_s": 0.0}))
    d = EXAMPLES / "gaussian"
    target = 1.5 * coarsening.buffer_bytes(coarsening.load_example(d, {}))[0] * 1e-12
    rc = coarsening.main(["--examples", "gaussian", "--size-target-us", str(target * 1e6),
                          "--out", str(tmp_path)])
    assert rc == 0
    doc = json.loads((tmp_path / "coarsening.json").read_text())
    (z,) = doc["sizes"]
    assert z["scale"] == 2 and z["defines"] == {"SIZE": "256"}
    assert [p["scale"] for p in z["probes"]] == [1, 2]
    launches = doc["programs"][0]["report"]["launches"]
    assert {tuple(la["original"]["global_size"]) for la in launches} == {(256,), (256, 256)}
    assert {r["reason"] for r in doc["launches"]} == {BUDGET_SPENT}
    md = (tmp_path / "coarsening.md").read_text()
    assert "| gaussian | 2 | SIZE=256 | k |" in md


@pytest.mark.parametrize("text,value", [("256", 256), ("(1 << 20)", 1 << 20),
                                        ("(4 * 64)", 256), ("1024u", None), ("N * 2", None)])
def test_macro_values(text, value):
    assert coarsening._int_value(text) == value
