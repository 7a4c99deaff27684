"""The pipeline certifies every plan before code generation (polyfuse.fusion.certify).

A forged plan with a wrong group (a dropped ``barrier_before``, a wrong re-indexing) stands for
a planner bug: the pipeline must not emit that group fused, must say why, and the program it
emits instead must still compute what the unfused original computes.  Correct plans, including
padded heterogeneous groups, must pass unchanged.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import islpy as isl
import pytest

import polyfuse
import polyfuse.fusion
from polyfuse.fusion import FusionPlan, check_plan, plan_fusion
from polyfuse.fusion.certify import REFUSED, certify
from polyfuse.fusion.decisions import CertificateSplit, Refused
from polyfuse.passes.pipeline import fuse_program
from polyfuse.report import write_outputs

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _program(name: str) -> polyfuse.Program:
    d = EXAMPLES / name
    return polyfuse.load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"))


def _without_barrier(plan: FusionPlan) -> FusionPlan:
    """group_neighbor's one group (L1 then L2 reading L1's neighbours in its work-group) with
    the barrier before L2 dropped: the bug fixed in fusion/reindex.py, recreated."""
    (g,) = plan.groups
    assert [f.barrier_before for f in g.fragments] == [False, True]
    frags = (g.fragments[0], dataclasses.replace(g.fragments[1], barrier_before=False))
    return dataclasses.replace(plan, groups=(dataclasses.replace(g, fragments=frags),))


def test_a_group_without_its_barrier_is_split_and_the_reason_recorded():
    uar = polyfuse.build_uar(_program("group_neighbor"))
    good = plan_fusion(uar)
    assert certify(good) is good
    bad = certify(_without_barrier(good))
    assert [g.members for g in bad.groups] == [(1,), (2,)]
    step = good.groups[0].step
    assert [g.step for g in bad.groups] == [step, step + 1]
    assert (good.launches_after, bad.launches_after) == (1, 2)
    assert check_plan(bad) == []
    for g in bad.groups:
        assert g.orchestration == "single" and not g.fragments[0].barrier_before
        assert any(isinstance(n, CertificateSplit) and n.members == (1, 2)
                   and any("without a barrier" in p for p in n.problems) for n in g.notes), g.notes
    refused = [b for b in bad.blocked if b.reason.kind is Refused.CERTIFICATE]
    assert [(b.src, b.dst, b.array) for b in refused] == [(1, 2, "d_c")]


def test_a_wrong_reindexing_in_a_chain_is_split_and_steps_stay_separated():
    """elementwise_chain's three launches in one group, the second one mirrored within each
    work-group: L0 -> L1 no longer pairs one work-item; the split plan keeps every dependence
    running from a lower step to a higher one."""
    uar = polyfuse.build_uar(_program("elementwise_chain"))
    good = plan_fusion(uar)
    (g,) = good.groups
    wrong = dataclasses.replace(g.fragments[1], reindex=isl.Map(
        g.fragments[1].reindex_text.replace("l0' = l0", "l0' = 63 - l0")))
    assert not wrong.reindex.is_equal(g.fragments[1].reindex)
    forged = dataclasses.replace(good, groups=(dataclasses.replace(
        g, fragments=(g.fragments[0], wrong) + g.fragments[2:]),))
    assert check_plan(forged)
    out = certify(forged)
    assert [h.members for h in out.groups] == [(m,) for m in g.members]
    assert [h.step for h in out.groups] == [g.step + k for k in range(len(g.members))]
    assert check_plan(out) == []
    assert all(not f.reindex.is_equal(wrong.reindex) for h in out.groups for f in h.fragments)


def test_later_groups_move_up_a_step_for_the_split_members():
    """QKV side by side (orchestration ``horizontal``): the three projections in one group, the
    combine in a later one.  The group of three is forged wrong (L8's rows merged) and split in
    three: the combine's step moves up by two, after all the pieces."""
    uar = polyfuse.build_uar(_program("qkv"))
    good = plan_fusion(uar, orchestration="horizontal")
    g0, g1 = good.groups
    assert len(g0.members) == 3 and g0.step < g1.step
    frags = tuple(dataclasses.replace(f, reindex=isl.Map(
        f.reindex_text.replace("l1' = l1", "l1' = 0"))) if f.launch == g0.members[1] else f
        for f in g0.fragments)
    assert frags[1].reindex_text != g0.fragments[1].reindex_text
    forged = dataclasses.replace(good, groups=(dataclasses.replace(g0, fragments=frags), g1))
    out = certify(forged)
    assert [h.members for h in out.groups] == [(m,) for m in g0.members] + [g1.members]
    assert [h.step for h in out.groups] == [g0.step, g0.step + 1, g0.step + 2, g1.step + 2]
    assert any(isinstance(n, CertificateSplit) and any("not injective" in p for p in n.problems)
               for n in out.groups[0].notes), out.groups[0].notes
    assert out.groups[3].fragments == g1.fragments
    assert (good.launches_after, out.launches_after) == (2, 4)
    assert check_plan(out) == []


def test_the_pipeline_refuses_the_forged_group_and_still_verifies(monkeypatch, tmp_path):
    """Through fuse_program (what ``polyfuse fuse`` runs): the forged plan is certified, split,
    generated and verified against the unfused program; plan.json and report.md say why."""
    program = _program("group_neighbor")
    monkeypatch.setattr(polyfuse.fusion, "plan_fusion",  # what the plan pass calls
                        lambda uar, **kw: _without_barrier(plan_fusion(uar, **kw)))
    result = fuse_program(program, verify=True)
    assert result.ok, result.verification.summary()
    assert result.plan.launches_after == 2
    assert [g.members for g in result.plan.groups] == [(1,), (2,)]
    paths = write_outputs(result, tmp_path)
    plan_json = json.loads(paths["plan"].read_text())
    assert any(b["reason"].startswith(REFUSED) for b in plan_json["blocked"])
    report = paths["report"].read_text()
    assert REFUSED in report and "without a barrier" in report


@pytest.mark.parametrize("name", ["group_neighbor", "elementwise_chain", "qkv", "stencil3"])
def test_correct_plans_pass_unchanged(name):
    uar = polyfuse.build_uar(_program(name))
    for orchestration in ("auto", "horizontal"):
        plan = plan_fusion(uar, orchestration=orchestration)
        assert certify(plan) is plan


def test_padded_heterogeneous_group_passes():
    """Independent kernels with local sizes 4 and 8 side by side (orchestration ``hetero``),
    the smaller one using its local ids: padding it is justified (no barriers, local ids kept),
    so the group stays fused and verifies."""
    src = """
    __kernel void k0(__global float *out, __global const float *a) {
      int i = get_global_id(0); float s = 0.0f;
      for (int j = 0; j < 2; j++) s += a[i] * (float)(get_local_id(0) + j);
      out[i] = s;
    }
    __kernel void k1(__global float *out, __global const float *b) {
      out[get_global_id(0)] += b[get_local_id(0)];
    }"""
    b = polyfuse.ProgramBuilder(src, name="padded")
    for name, size in (("o0", 16), ("o1", 8), ("a", 16), ("b", 8)):
        b.buffer(name, 4 * size)
        b.write(name)
    b.launch("k0", global_size=(16,), local_size=(4,), args={"out": "o0", "a": "a"})
    b.launch("k1", global_size=(8,), local_size=(8,), args={"out": "o1", "b": "b"})
    b.read("o0", blocking=True)
    b.read("o1", blocking=True)
    program = b.build()
    plan = plan_fusion(polyfuse.build_uar(program), orchestration="hetero")
    assert [(len(g.members), g.local_size) for g in plan.groups] == [(2, (8,))]
    assert check_plan(plan) == []
    assert certify(plan) is plan
    result = fuse_program(program, orchestration="hetero", verify=True)
    assert result.plan.launches_after == 1
    assert result.ok, result.verification.summary()


def test_a_group_code_generation_cannot_produce_is_split_not_fatal(monkeypatch, tmp_path):
    """Any refusal while generating a group of several launches (RecursiveGaussian: a guard
    that cannot move below its barriers) splits that group into its launches, with the
    refusal as the reason, and the program is still fused, generated and verified."""
    import polyfuse.codegen.fuse as fuse
    from polyfuse.codegen import CodegenError

    assemble = fuse._assemble_group

    def refusing(plan, group, *args, **kw):
        if len(group.members) > 1:
            raise CodegenError(f"plan group {group.id}: fragment 2 has barriers and its guard "
                               "cannot be moved below its barriers")
        return assemble(plan, group, *args, **kw)

    monkeypatch.setattr(fuse, "_assemble_group", refusing)
    program = _program("elementwise_chain")
    assert [len(g.members) for g in plan_fusion(polyfuse.build_uar(program)).groups] == [4]
    result = fuse_program(program, verify=True)
    assert result.ok, result.verification.summary()
    assert [g.members for g in result.plan.groups] == [(3,), (4,), (5,), (6,)]
    assert result.plan.launches_after == 4 and check_plan(result.plan) == []
    for g in result.plan.groups:
        (note,) = [n for n in g.notes if isinstance(n, CertificateSplit)]
        assert note.refused is Refused.CODEGEN and "cannot be moved" in note.problems[0]
    paths = write_outputs(result, tmp_path)
    plan_json = json.loads(paths["plan"].read_text())
    assert plan_json["launches_after"] == 4
    assert [b["reason"] for b in plan_json["blocked"]
            if b["reason"].startswith(Refused.CODEGEN.value)], plan_json["blocked"]
    report = paths["report"].read_text()
    assert Refused.CODEGEN.value in report and "cannot be moved below its barriers" in report
