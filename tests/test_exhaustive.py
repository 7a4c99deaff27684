"""The exhaustive planner (polyfuse/fusion/exhaustive.py): optimal on small programs, certified.

The greedy planner leaves the denoise program (``fused_host_programs/denoise``: gamma correction
then a blur on one channel, the same blur on the other) at 3 launches: the two identical blurs
sit at different ASAP steps, so P3 never compares them.  The search finds 2, the fused program
verifies against the unfused one on the OpenCL device (``test_fused_host.py`` also runs its
rewritten host), and on seeded random programs of a few launches the plan's launch count is the
brute-force minimum over every partition of the launches into legal groups.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

import polyfuse
import polyfuse.fusion.exhaustive as exhaustive
from polyfuse.core.program import REFERENCE_TARGET
from polyfuse.fusion import check_plan, plan_fusion
from polyfuse.fusion.decisions import Searched
from polyfuse.oracle.kernelgen import (
    C,
    Ex,
    GenAccess,
    GenKernel,
    GenLaunch,
    GenProgram,
    T,
    add,
)
from polyfuse.passes.pipeline import fuse_program

DENOISE = Path(__file__).resolve().parent / "fused_host_programs" / "denoise"


def _denoise() -> polyfuse.Program:
    return polyfuse.load_opencl(str(DENOISE / "kernels.cl"), host=str(DENOISE / "host.c"),
                                argv=["100", "out.txt"])


def _greedy(uar: polyfuse.UAR, monkeypatch: pytest.MonkeyPatch) -> int:
    with monkeypatch.context() as m:
        m.setattr(exhaustive, "MAX_LAUNCHES", 0)
        return plan_fusion(uar).launches_after


def test_search_fuses_identical_launches_at_different_depths(
        monkeypatch: pytest.MonkeyPatch) -> None:
    program = _denoise()
    uar = polyfuse.build_uar(program)
    assert _greedy(uar, monkeypatch) == 3
    plan = plan_fusion(uar)
    assert plan.launches_after == 2
    assert check_plan(plan) == []
    blurs = tuple(op.id for op in program.launches if op.kernel == "blur3")
    assert [g.members for g in plan.groups][-1] == blurs
    assert all(Searched(2, 3) in g.notes for g in plan.groups)
    result = fuse_program(program, verify=True)
    assert result.plan.launches_after == 2
    assert result.verification is not None and result.verification.ok, result.verified


def test_greedy_plan_kept_on_a_tie_and_above_the_threshold(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Equal counts keep the greedy plan (checked-in schedules unchanged); beyond
    MAX_LAUNCHES the search does not run."""
    uar = polyfuse.build_uar(_denoise())
    calls: list[int] = []
    real = exhaustive._Search.run

    def counted(self: exhaustive._Search, greedy: int):  # noqa: ANN202 - test spy
        calls.append(greedy)
        return real(self, greedy)

    monkeypatch.setattr(exhaustive._Search, "run", counted)
    monkeypatch.setattr(exhaustive, "MAX_LAUNCHES", 2)
    assert plan_fusion(uar).launches_after == 3 and calls == []
    monkeypatch.setattr(exhaustive, "MAX_LAUNCHES", 12)
    qkv = polyfuse.load_opencl(str(Path(__file__).resolve().parents[1] / "examples" / "qkv" /
                                   "kernels.cl"),
                               host=str(Path(__file__).resolve().parents[1] / "examples" /
                                        "qkv" / "host.c"))
    plan = plan_fusion(polyfuse.build_uar(qkv))
    assert plan.launches_after == 1 and calls == []  # one launch: nothing to search
    assert not any(isinstance(n, Searched) for g in plan.groups for n in g.notes)


# ----------------------------------------------------------------------------------------------
# Brute force on generated programs
# ----------------------------------------------------------------------------------------------

GX, LX, BX = T("gx"), T("lx"), T("bx")
#: kernel shapes on one 1-D grid (16 work-items, groups of 4), with the width of the edge from
#: the launch that wrote their input: thread, global (the next group's element), block (a pair
#: of lanes reads one element)
READS: dict[str, Ex] = {"copy": GX, "shift": add(GX, C(1)),
                        "pair": add(Ex("mul", (4, BX)), Ex("div", (LX, 2)))}


def _program(rng: random.Random, n: int) -> GenProgram:
    """``n`` launches of a few shared kernels, each reading an input or an earlier output."""
    kernels = {name: GenKernel(name, 1, GenAccess("out", GX), (GenAccess("in0", read),))
               for name, read in READS.items()}
    launches, sources = [], ["a0", "a1"]
    for i in range(n):
        name = rng.choice(sorted(READS))
        launches.append(GenLaunch(name, (16,), (4,), (("out", f"b{i}"),
                                                      ("in0", rng.choice(sources)))))
        sources.append(f"b{i}")
    buffers = tuple((b, 17, "float") for b in sources)
    return GenProgram(tuple(kernels.values()), tuple(launches), buffers)


def _partitions(items: list[int]) -> Iterator[list[list[int]]]:
    if not items:
        yield []
        return
    head, rest = items[0], items[1:]
    for part in _partitions(rest):
        yield [[head], *part]
        for k in range(len(part)):
            yield [*part[:k], [head, *part[k]], *part[k + 1:]]


def _brute_force_minimum(uar: polyfuse.UAR) -> int:
    """Fewest launches over every partition whose groups are legal and whose plan the
    certificate accepts."""
    launches = [op.id for op in uar.program.launches]
    search = exhaustive._Search(uar, launches, {m: 1 for m in launches})
    best = len(launches)
    for part in _partitions(launches):
        sets = [frozenset(p) for p in part]
        if len(sets) >= best or not search._legal(sets):
            continue
        plan = exhaustive._plan_of(search, sets, len(sets), best, REFERENCE_TARGET)
        if plan is not None and not check_plan(plan):
            best = len(sets)
    return best


def test_plan_is_the_brute_force_minimum_on_generated_programs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(27)
    improved = 0
    for _ in range(16):
        gp = _program(rng, rng.randint(3, 6))
        uar = polyfuse.build_uar(gp.build())
        plan = plan_fusion(uar)
        context = f"\n{gp.source}\n{gp.host_description()}"
        assert check_plan(plan) == [], context
        assert plan.launches_after == _brute_force_minimum(uar), context
        greedy = _greedy(uar, monkeypatch)
        assert plan.launches_after <= greedy, context
        improved += plan.launches_after < greedy
    assert improved, "no generated program where the search beats the greedy planner"
