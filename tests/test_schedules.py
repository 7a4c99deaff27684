"""The checked-in plans under schedules/ are what polyfuse plans today (regenerate to accept)."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("regenerate", ROOT / "schedules" / "regenerate.py")
regenerate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(regenerate)


@pytest.mark.parametrize("example", regenerate.example_dirs(), ids=regenerate.plan_name)
def test_plan_matches_checked_in(example):
    path = ROOT / "schedules" / f"{regenerate.plan_name(example)}.plan.json"
    assert path.exists(), "no checked-in plan: run python schedules/regenerate.py"
    assert regenerate.plan_text(example) == path.read_text(encoding="utf-8"), (
        f"planning changed for {regenerate.plan_name(example)}: run "
        "`python schedules/regenerate.py` and review the diff of schedules/")


def test_headline_plans():
    """The fusion results the design promises, read from the checked-in plans."""
    plans = {p.name.removesuffix(".plan.json"): json.loads(p.read_text())
             for p in (ROOT / "schedules").glob("*.plan.json")}
    assert plans["qkv"]["launches_after"] == 1 and plans["qkv"]["launches_before"] == 4
    assert (plans["bert_qkv"]["launches_before"], plans["bert_qkv"]["launches_after"]) == (9, 1)
    assert plans["gemm_bias_relu_transpose"]["launches_after"] == 1
    assert plans["stencil3"]["launches_after"] == 2  # global halo edge: not fused
    assert plans["reduction"]["launches_after"] == 2  # cross-group reduction: not fused
    lstm = plans["lstm_cell"]
    assert lstm["launches_before"] == 16 and lstm["launches_after"] == 8
    for plan in plans.values():
        group_of = {m: g["id"] for g in plan["groups"] for m in g["members"]}
        for e in plan["edges"]:
            if e["width"] == "global" and not e["host"] and not e["loop_carried"]:
                assert group_of[e["src"]] != group_of[e["dst"]], e
