"""``polyfuse fuse`` times an ONNX model in the kernel form a session runs, for a bounded number
of runs, and says what it timed (issue 22 item 4)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BERT_QKV = ROOT / "examples" / "models" / "bert_qkv.onnx"


def test_runs_fit_the_budget():
    from polyfuse.runtime.execute import runs_within

    assert runs_within(None, 30.0, 5) == 5  # no budget: every run asked for
    assert runs_within(5.0, 0.001, 5) == 5  # a small model: the runs asked for
    assert runs_within(5.0, 2.0, 5) == 2  # a real-size one: what fits in the budget
    assert runs_within(5.0, 26.6, 5) == 1  # never none


def test_session_form_is_the_measured_choice_else_the_usual_one(monkeypatch):
    from polyfuse.apps import session

    monkeypatch.setattr(session, "_cached_form", lambda *a: None)
    assert session.session_form(str(BERT_QKV)) == (
        session.USUAL_FORM, "the session's usual choice; not yet measured for this model")
    assert session.USUAL_FORM == "blocked"
    monkeypatch.setattr(session, "_cached_form", lambda *a: "tiled")
    assert session.session_form(str(BERT_QKV))[0] == "tiled"


def test_fuse_times_the_sessions_form_and_says_so(tmp_path, monkeypatch):
    """The plan and fused.cl stay the tiled form's; the timing runs the blocked form's programs
    (register-blocked products: ``acc_0_0``), each bounded by the budget, and the summary
    names the form and the runs."""
    import polyfuse.runtime as runtime
    from polyfuse.apps import session
    from polyfuse.apps.batch import TIMING_BUDGET_S, fuse_model

    monkeypatch.setattr(session, "_cached_form", lambda *a: None)
    timed: list[tuple[bool, float]] = []
    real = runtime.time_program

    def spy(program, **kw):
        timed.append((any("acc_0_0" in k.source for k in program.kernels.values()),
                      kw.get("budget_s")))
        return real(program, **kw)

    monkeypatch.setattr(runtime, "time_program", spy)
    s = fuse_model(str(BERT_QKV), str(tmp_path), timing=True, repeat=3, cache=False)
    assert s.error is None, s.error
    assert timed == [(True, TIMING_BUDGET_S)] * 2  # unfused, then fused
    assert s.timed == "blocked, 3+3 runs" and s.row()[-2] == "blocked, 3+3 runs"
    assert s.unfused_ms > 0 and s.fused_ms > 0
    assert "acc_0_0" not in (tmp_path / "bert_qkv" / "fused.cl").read_text()
