"""Autotuning: only verified variants are chosen, every variant is reported, the cache skips timing.

No test asserts a time: timings on a shared CPU are noise at these sizes.  What is pinned down is
the decision logic — which variants are eligible, what the table says, when measurement happens.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

import polyfuse
from polyfuse.codegen import FusedProgram
from polyfuse.core.program import Launch
from polyfuse.passes import compilation as passes
from polyfuse.passes import orchestration_tuning as at
from polyfuse.passes.compilation import Compilation

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
PARAMS = {"qkv": {}, "elementwise_chain": {"n": 1024}}


def load(example: str) -> polyfuse.Program:
    d = EXAMPLES / example
    return polyfuse.load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"))


@pytest.fixture
def timing_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts calls of time_program made by autotune (name of each timed program)."""
    calls: list[str] = []
    real = at.time_program

    def counting(program: polyfuse.Program, **kw: Any) -> Any:
        calls.append(program.name)
        return real(program, **kw)

    monkeypatch.setattr(at, "time_program", counting)
    return calls


@pytest.mark.parametrize("example", sorted(PARAMS))
def test_autotune_picks_verified_variant_and_caches(example: str, tmp_path: Path,
                                                    timing_calls: list[str]) -> None:
    program = load(example)
    params = PARAMS[example]
    messages: list[str] = []
    res = at.autotune(program, params=params, repeat=2, cache_dir=tmp_path,
                      progress=messages.append)
    assert not res.cached
    assert [r.variant for r in res.table] == ["vertical", "horizontal"]
    assert res.variant in ("vertical", "horizontal")
    assert res.chosen.verified and res.chosen.error is None
    assert res.chosen.duplicate_of is None  # the chosen row is the one that was timed
    assert res.chosen.launches is not None and res.chosen.launches < res.unfused.launches
    assert res.unfused.kernel_time is not None and res.unfused.kernel_time > 0
    assert res.fused.plan.groups and res.fused.source
    assert timing_calls, "the first call measures"
    assert messages and any("chose" in m for m in messages)
    assert res.cache_path is not None and res.cache_path.exists()
    assert res.cache_path.parent.name == res.device
    text = res.table_text()
    assert "unfused" in text and "vertical" in text and "horizontal" in text

    timing_calls.clear()
    again = at.autotune(program, params=params, repeat=2, cache_dir=tmp_path)
    assert again.cached
    assert timing_calls == [], "a cache hit must not time anything"
    assert again.variant == res.variant
    assert again.table == res.table and again.unfused == res.unfused
    assert again.fused.source == res.fused.source  # code is regenerated, not stored


def test_identical_plans_are_tuned_once(tmp_path: Path, timing_calls: list[str]) -> None:
    """Variants whose plans coincide are generated and timed once and reported as duplicates."""
    program = load("elementwise_chain")
    res = at.autotune(program, params={"n": 1024}, repeat=1, cache_dir=tmp_path,
                      variants=("vertical", "horizontal", "vertical"))
    assert [r.variant for r in res.table] == ["vertical", "horizontal"]
    sigs = {v: at.plan_signature(polyfuse.fusion.plan_fusion(polyfuse.build_uar(program),
                                                              orchestration=v))
            for v in ("vertical", "horizontal")}
    if sigs["vertical"] == sigs["horizontal"]:
        assert res.table[1].duplicate_of == "vertical"
        assert len(timing_calls) == 2  # unfused + one variant
    else:
        assert len(timing_calls) == 3


def _make_variants_distinct(monkeypatch: pytest.MonkeyPatch) -> dict[int, str]:
    """Record which variant produced each plan, and keep every plan distinct for the tuner
    (the planner may give identical plans, which would hide the variant under test)."""
    made: dict[int, str] = {}
    real_plan = passes.plan

    def plan(c: Compilation) -> Compilation:
        out = real_plan(c)
        made[id(out.plan)] = c.options.orchestration
        return out

    monkeypatch.setattr(passes, "plan", plan)
    monkeypatch.setattr(at, "plan_signature", lambda p: f"{made.get(id(p))}-{id(p)}")
    return made


def _corrupt(fused: FusedProgram) -> FusedProgram:
    """A fused program that skips its kernels: its outputs keep their initial contents."""
    prog = fused.program
    ops = tuple(op for op in prog.ops if not isinstance(op, Launch))
    return dataclasses.replace(fused, program=dataclasses.replace(prog, ops=ops))


@pytest.mark.parametrize("bad", ["vertical", "horizontal"])
def test_variant_failing_verification_is_never_chosen(bad: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      timing_calls: list[str]) -> None:
    made = _make_variants_distinct(monkeypatch)
    real_generate = passes.generate

    def generate(c: Compilation) -> Compilation:
        out = real_generate(c)
        return out.replace(fused=_corrupt(out.fused)) if made.get(id(c.plan)) == bad else out

    monkeypatch.setattr(passes, "generate", generate)
    res = at.autotune(load("qkv"), repeat=1, cache_dir=tmp_path)
    good = "horizontal" if bad == "vertical" else "vertical"
    rows = {r.variant: r for r in res.table}
    assert res.variant == good
    assert not rows[bad].verified and "verification failed" in (rows[bad].error or "")
    assert rows[bad].kernel_time is None, "a discarded variant is not timed"
    assert rows[good].verified
    assert len(timing_calls) == 2  # unfused + the good variant only


def test_all_variants_failing_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_generate = passes.generate

    def generate(c: Compilation) -> Compilation:
        out = real_generate(c)
        return out.replace(fused=_corrupt(out.fused))

    monkeypatch.setattr(passes, "generate", generate)
    with pytest.raises(at.TuneError) as info:
        at.autotune(load("qkv"), repeat=1, cache_dir=tmp_path)
    assert info.value.table and all(not r.verified for r in info.value.table)
    assert not list(tmp_path.rglob("*.json")), "a failed tuning is not cached"


def test_stale_or_broken_cache_is_retuned(tmp_path: Path, timing_calls: list[str]) -> None:
    program = load("qkv")
    res = at.autotune(program, repeat=1, cache_dir=tmp_path)
    assert res.cache_path is not None
    data = json.loads(res.cache_path.read_text())
    for entry in data["entries"].values():
        entry["plan_signature"] = "from-an-older-planner"
    res.cache_path.write_text(json.dumps(data))
    timing_calls.clear()
    assert not at.autotune(program, repeat=1, cache_dir=tmp_path).cached
    assert timing_calls
    res.cache_path.write_text("{ not json")
    assert not at.autotune(program, repeat=1, cache_dir=tmp_path).cached
    assert at.autotune(program, repeat=1, cache_dir=tmp_path).cached


def test_cache_dir_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLYFUSE_CACHE", str(tmp_path))
    assert at.default_cache_dir() == tmp_path / "tune"
    res = at.autotune(load("qkv"), repeat=1)
    assert res.cache_path is not None and tmp_path in res.cache_path.parents


def test_program_hash_tracks_what_matters() -> None:
    a = load("elementwise_chain")
    assert at.program_hash(a, {"n": 1024}) == at.program_hash(load("elementwise_chain"),
                                                              {"n": 1024})
    assert at.program_hash(a, {"n": 1024}) != at.program_hash(a, {"n": 2048})
    assert at.program_hash(a) != at.program_hash(load("qkv"))
    renamed = dataclasses.replace(a, name="other", files=())
    assert at.program_hash(renamed, {"n": 1024}) == at.program_hash(a, {"n": 1024})


def test_progress_goes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    at.stderr_progress("hello")
    out, err = capsys.readouterr()
    assert out == "" and "hello" in err


def test_model_prunes_variants_predicted_far_slower(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """QKV has two distinct verified variants; a model ranking horizontal 10x slower prunes it
    before timing, and the table says so."""
    import polyfuse.perf.model as pm

    monkeypatch.setattr(pm.Calibration, "for_device", classmethod(lambda cls, *a, **k: None))
    monkeypatch.setattr(pm, "rank_variants",
                        lambda programs, cal, params=None: [(0, 1e-3), (1, 1e-2)])
    result = at.autotune(load("qkv"), params=PARAMS["qkv"], cache_dir=tmp_path, repeat=1)
    rows = {r.variant: r for r in result.table}
    assert result.variant == "vertical"
    assert rows["horizontal"].error and "pruned" in rows["horizontal"].error
    assert rows["horizontal"].kernel_time is None


def test_unavailable_model_prunes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import polyfuse.perf.model as pm

    def broken(cls, *a, **k):
        raise polyfuse.PolyfuseError("no calibration")

    monkeypatch.setattr(pm.Calibration, "for_device", classmethod(broken))
    result = at.autotune(load("qkv"), params=PARAMS["qkv"], cache_dir=tmp_path, repeat=1)
    assert all(r.kernel_time is not None for r in result.table)
