"""Never slower by choice (polyfuse/passes/group_weighing.py): every fused group is weighed
against its launches apart, by the performance model and, when the model cannot rank them, by
timing; a group found slower is split, the program stays right, and report.md says why."""

from __future__ import annotations

from pathlib import Path

import pytest

import polyfuse
from polyfuse.passes import group_weighing
from polyfuse.passes.pipeline import fuse_program
from polyfuse.report import report_markdown

ROOT = Path(__file__).resolve().parent.parent
QKV = ROOT / "examples" / "qkv"
GEMM = ROOT / "examples" / "gemm_bias_relu_transpose"


def _load(example: Path) -> polyfuse.Program:
    return polyfuse.load_opencl(str(example / "kernels.cl"), host=str(example / "host.c"))


def _predicting(monkeypatch: pytest.MonkeyPatch, fused_factor: float, per_launch_s: float
                ) -> None:
    """The model predicts every unfused launch at ``per_launch_s`` and every fused launch at
    ``fused_factor`` times the members it replaces (launches of the fused program are told
    apart from the unfused program's by their kernels' names)."""
    real = group_weighing._launch_seconds

    def fake(program, cal, params):
        seconds = real(program, cal, params)  # the real counts still run
        fused = any(op.kernel.startswith("fused_") for op in program.launches)
        if not fused:
            return dict.fromkeys(seconds, per_launch_s)
        return {op.id: per_launch_s * fused_factor * _members(op.kernel)
                for op in program.launches}

    members: dict[str, int] = {}

    def _members(kernel: str) -> int:
        return members.get(kernel, 1)

    real_weigh = group_weighing.weigh

    def weigh(c, *, timing=True):
        members.update({k.kernel: len(c.plan.groups[k.group].members) for k in c.fused.groups})
        return real_weigh(c, timing=timing)

    monkeypatch.setattr(group_weighing, "_launch_seconds", fake)
    monkeypatch.setattr(group_weighing, "weigh", weigh)


def test_a_group_the_model_predicts_slower_is_split_and_still_right(monkeypatch):
    _predicting(monkeypatch, fused_factor=3.0, per_launch_s=1e-3)
    result = fuse_program(_load(QKV), verify=True)
    assert result.ok
    w = result.weighing
    assert w is not None and w.verdicts and all(not v.fused for v in w.verdicts)
    assert all(v.decided_by == "model" for v in w.verdicts)
    assert all(len(g.members) == 1 for g in result.plan.groups)
    assert result.fused.launches_after == result.plan.launches_before
    report = report_markdown(result)
    assert "## Fused groups against their launches apart" in report
    assert "split by the model" in report and "**apart**" in report
    assert any(b.reason.kind.name == "SLOWER" for b in result.plan.blocked)


def test_a_group_the_model_predicts_faster_is_kept(monkeypatch):
    _predicting(monkeypatch, fused_factor=0.2, per_launch_s=1e-3)
    result = fuse_program(_load(QKV))
    assert result.fused.launches_after == 1
    assert [v.decided_by for v in result.weighing.verdicts] == ["model"]
    assert result.weighing.verdicts[0].fused


def test_a_close_group_is_timed_and_the_measured_faster_is_kept(monkeypatch):
    _predicting(monkeypatch, fused_factor=1.0 / 1.1, per_launch_s=1e-2)
    result = fuse_program(_load(GEMM), verify=True)
    assert result.ok
    (v,) = result.weighing.verdicts
    assert v.decided_by == "timing" and v.measured_fused_s and v.measured_apart_s
    assert v.fused == (v.measured_fused_s <= v.measured_apart_s * group_weighing.TIMING_MARGIN)
    assert (result.fused.launches_after == 1) == v.fused
    assert "by timing: fused" in v.why


@pytest.mark.parametrize("fused_factor,kept", [(1.1, False), (1 / 1.1, True)])
def test_a_close_group_with_a_small_stake_follows_the_model_untimed(monkeypatch, fused_factor,
                                                                   kept):
    """Under STAKE_FLOOR_S nothing is timed: a group predicted slower fused is split, one
    predicted faster kept, and the report says why."""
    _predicting(monkeypatch, fused_factor=fused_factor, per_launch_s=1e-6)
    result = fuse_program(_load(GEMM), verify=True)
    assert result.ok
    (v,) = result.weighing.verdicts
    assert v.decided_by == "stake" and v.fused is kept and v.measured_fused_s is None
    assert (result.fused.launches_after == 1) is kept
    assert v.why.startswith(("kept fused" if kept else "split") + " by the model's direction")


def test_a_small_stake_within_the_margin_keeps_the_plan_s_group(monkeypatch):
    """A prediction 2 % slower fused is within what the model resolves: the group stays fused
    (the sign of such a difference follows the calibration, not the kernels)."""
    _predicting(monkeypatch, fused_factor=1.02, per_launch_s=1e-6)
    result = fuse_program(_load(GEMM))
    (v,) = result.weighing.verdicts
    assert v.decided_by == "stake" and v.fused and result.fused.launches_after == 1
    assert v.why.startswith("kept fused: within the 5% the model does not resolve")


def test_close_groups_left_untimed_follow_the_model(monkeypatch):
    """With timing off, a close group (inside the margin, over the stake floor) predicted
    slower fused is split."""
    from polyfuse.passes.compilation import Compilation, Options
    from polyfuse.passes.pipeline import compile_program, result_of, target_of

    _predicting(monkeypatch, fused_factor=1.2, per_launch_s=1e-2)
    result = result_of(compile_program(Compilation(
        target=target_of(None), options=Options(weigh_timing=False), program=_load(GEMM))))
    (v,) = result.weighing.verdicts
    assert v.decided_by == "model" and not v.fused and v.measured_fused_s is None
    assert result.weighing.untimed == "timing is off"
    assert result.fused.launches_after > 1


def test_the_real_model_weighs_every_group_of_an_example():
    """With the calibration the device has (on a CPU without one, the shipped reference), every
    multi-launch group gets finite predictions; small examples are decided without timing."""
    result = fuse_program(_load(GEMM))
    w = result.weighing
    assert w is not None and not w.skipped
    assert len(w.verdicts) == sum(len(g.members) > 1 for g in result.plan.groups) >= 1
    for v in w.verdicts:
        assert v.predicted_fused_s > 0 and v.predicted_apart_s > 0
        assert v.decided_by in ("model", "stake")
    assert w.to_dict()["groups"][0]["why"] == w.verdicts[0].why


def test_weighing_is_an_option_and_device_free_compilations_skip_it():
    program = _load(QKV)
    assert fuse_program(program, build=False).weighing is None
    from polyfuse.passes.compilation import Compilation, Options
    from polyfuse.passes.pipeline import compile_program, result_of, target_of

    c = compile_program(Compilation(target=target_of(None), options=Options(weigh=False),
                                    program=program))
    assert result_of(c).weighing is None and c.fused.launches_after == 1


def test_a_session_keeps_its_plan_unweighed(monkeypatch):
    """InferenceSession fuses without weighing (its cold start), whether it is given a file or
    a Program: a group the model would split stays fused."""
    _predicting(monkeypatch, fused_factor=3.0, per_launch_s=1e-3)
    sess = polyfuse.InferenceSession(_load(QKV))
    assert any(len(g.members) > 1 for g in sess.plan.groups)
    assert fuse_program(_load(QKV), weigh=False).weighing is None


def test_fuse_no_weigh_reaches_an_onnx_batch(tmp_path, monkeypatch):
    """``polyfuse fuse MODEL.onnx --no-weigh`` keeps a group the model would split; weighing
    (the default) splits it and the report says so."""
    from polyfuse.apps.batch import fuse_model

    _predicting(monkeypatch, fused_factor=3.0, per_launch_s=1e-3)
    model = ROOT / "examples" / "models" / "bert_qkv.onnx"
    kept = fuse_model(str(model), str(tmp_path / "kept"), timing=False, cache=False,
                      weigh=False)
    split = fuse_model(str(model), str(tmp_path / "split"), timing=False, cache=False)
    assert kept.error is None and split.error is None
    assert kept.launches_after < split.launches_after
    assert "against their launches apart" not in \
        (tmp_path / "kept" / "bert_qkv" / "report.md").read_text()
    assert "against their launches apart" in \
        (tmp_path / "split" / "bert_qkv" / "report.md").read_text()
