"""Wavefront launch fusion in the fused program: ``fused.cl``, the Python runtime, ``--verify``.

The 2-layer LSTM of ``examples/lstm2`` launches 2 kernels per (layer, step).  isl proves that
every loop-carried dependence crosses to a later anti-diagonal ``l + t``, so the fused group runs
once per wavefront step with both layers side by side: ``L*T*k`` launches become ``L + T - 1``,
verified against the unfused program.  A recurrence whose dependence stays on one anti-diagonal
is not run along it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from polyfuse.codegen import generate_fused
from polyfuse.codegen.decisions import NoWavefront, WavefrontLaunch
from polyfuse.frontend.host import load_opencl
from polyfuse.fusion.decisions import WavefrontSchedule
from polyfuse.fusion.global_ import wavefront_proof
from polyfuse.passes.pipeline import fuse_program
from polyfuse.runtime.execute import compile_program

LSTM2 = Path(__file__).resolve().parent.parent / "examples" / "lstm2"


@pytest.mark.parametrize("steps", [5])
def test_lstm_runs_one_launch_per_wavefront_step(steps: int) -> None:
    program = load_opencl(str(LSTM2 / "kernels.cl"), host=str(LSTM2 / "host.c"),
                          argv=[str(steps)])
    result = fuse_program(program, verify=True)
    assert result.verification is not None and result.verification.ok, \
        result.verification.summary()
    layers = 2
    assert result.plan.launches_before == layers * steps * 2
    # the plan runs one fused launch per (layer, step); code generation's wavefront one per step
    assert result.plan.launches_after == layers * steps
    assert result.fused.launches_after == layers + steps - 1
    fused = result.fused
    assert list(fused.wavefronts) == [0]
    assert wavefront_proof(result.uar, result.plan.groups[0].members) is None
    assert "__kernel void pf_wave_g0(" in fused.source
    [launch] = fused.program.launches
    assert launch.kernel == "pf_wave_g0"
    assert [lp.iterator for lp in launch.loops] == ["pf_w"]
    assert compile_program(fused.program).launch_count == layers + steps - 1
    assert any(isinstance(n, WavefrontLaunch) and (n.slots, n.outer, n.inner) == (2, "l", "t")
               for n in result.fused.groups[0].notes)


def test_time_outer_nest_runs_the_layers_side_by_side() -> None:
    """Time outer, layers inner (the other common nesting): the copies side by side are still
    the layers (the loop with constant bounds), the steps run over t + l."""
    d = LSTM2.parent.parent / "tests" / "fused_host_programs" / "lstm2_time_outer"
    program = load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"), argv=["4"])
    result = fuse_program(program, verify=True)
    assert result.verification is not None and result.verification.ok
    [wf] = result.fused.wavefronts.values()
    assert (wf.slot, wf.slots) == ("l", 2)
    assert result.plan.launches_before == 16 and result.fused.launches_after == 2 + 4 - 1
    assert compile_program(result.fused.program).launch_count == 5


def test_dependence_on_one_antidiagonal_is_not_a_wavefront(tmp_path: Path) -> None:
    """Layer l at step t reads h_{t+2} of the layer below, written at (l - 1, t + 1): the same
    anti-diagonal.  No wavefront is claimed, and the fused program still verifies."""
    host = (LSTM2 / "host.c").read_text()
    line = "int below = ((l - 1) * (steps + 1) + t + 1) * HIDDEN;"
    assert line in host
    (tmp_path / "host.c").write_text(host.replace(
        line, "int below = ((l - 1) * (steps + 1) + t + 2) * HIDDEN;").replace(
        "int steps = argc > 1 ? atoi(argv[1]) : 6;", "int steps = argc > 1 ? atoi(argv[1]) : 5;"))
    (tmp_path / "kernels.cl").write_text((LSTM2 / "kernels.cl").read_text())
    program = load_opencl(str(tmp_path / "kernels.cl"), host=str(tmp_path / "host.c"),
                          argv=["4"])
    result = fuse_program(program, verify=True)
    assert result.verification is not None and result.verification.ok
    assert not result.fused.wavefronts
    assert "pf_wave" not in result.fused.source
    assert not any(isinstance(n, WavefrontSchedule) for g in result.plan.groups for n in g.notes)
    assert not any(isinstance(n, (WavefrontLaunch, NoWavefront))
                   for k in result.fused.groups for n in k.notes)
    assert compile_program(result.fused.program).launch_count == 2 * 4
    # a plan claiming the wavefront anyway (say, an edited plan.json) is proved wrong again
    [group] = [g for g in result.plan.groups if len(g.members) == 2]
    assert wavefront_proof(result.uar, group.members) == \
        "a dependence stays within a wavefront step (or goes backwards)"
    forged = dataclasses.replace(group, schedule="{ G0[l, t] -> [l + t, t] }",
                                 notes=group.notes + (WavefrontSchedule("l + t"),))
    plan = dataclasses.replace(result.plan, groups=tuple(
        forged if g.id == group.id else g for g in result.plan.groups))
    fused = generate_fused(plan)
    assert not fused.wavefronts
    assert any(isinstance(n, NoWavefront) and n.why.startswith("a dependence stays within")
               for k in fused.groups for n in k.notes)
