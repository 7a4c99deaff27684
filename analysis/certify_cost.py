"""What certifying every plan before code generation adds to ``polyfuse fuse``.

For each bundled program and model (the ones ``schedules/`` checks in) and a 12-layer
width-768 BERT encoder from :mod:`analysis.scaling`, the UAR is built once; then, in interleaved
rounds, planning is timed cold (isl check memo cleared, as in a fresh process) followed by
:func:`polyfuse.fusion.certify.certify` on its plan as the pipeline runs it (memo warm from
planning), and the certificate once more with the memo cleared (its cost without memoization).
CPU seconds of this process; medians and min..max over the rounds.

    python analysis/certify_cost.py [--rounds 3] [--bert-layers 12] [--bert-width 768]
                                    [--no-bundled]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "analysis"))


def _programs(bundled: bool, bert_layers: int, bert_width: int, tmp: Path) -> dict[str, Any]:
    import scaling

    import polyfuse
    from polyfuse.frontend.onnx import load_onnx_model
    from schedules.regenerate import REFERENCE_LIMITS, example_dirs, plan_name

    out = {}
    for ex in example_dirs() if bundled else ():
        out[plan_name(ex)] = (load_onnx_model(str(ex), **REFERENCE_LIMITS).program
                              if ex.suffix == ".onnx" else
                              polyfuse.load_opencl(str(ex / "kernels.cl"),
                                                   host=str(ex / "host.c")))
    if bert_layers:
        path = scaling.write_model(bert_layers, bert_width, tmp)
        out[path.stem] = load_onnx_model(str(path)).program
    return out


def _spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.3f} ({min(xs):.3f}..{max(xs):.3f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bert-layers", type=int, default=12, help="0: no BERT")
    parser.add_argument("--bert-width", type=int, default=768)
    parser.add_argument("--no-bundled", action="store_true", help="only the BERT encoder")
    args = parser.parse_args(argv)

    from polyfuse.fusion import plan_fusion
    from polyfuse.fusion.certify import certify
    from polyfuse.fusion.reindex import clear_memo
    from polyfuse.uar import build_uar

    with tempfile.TemporaryDirectory() as tmp:
        programs = _programs(not args.no_bundled, args.bert_layers, args.bert_width, Path(tmp))
    uars = {name: build_uar(p) for name, p in programs.items()}
    times: dict[str, dict[str, list[float]]] = {n: {"plan": [], "certify": [], "cold": []}
                                                 for n in uars}
    info: dict[str, str] = {}
    for _ in range(args.rounds):
        for name, uar in uars.items():
            clear_memo()
            t = time.process_time()
            plan = plan_fusion(uar)
            times[name]["plan"].append(time.process_time() - t)
            t = time.process_time()
            out = certify(plan)
            times[name]["certify"].append(time.process_time() - t)
            clear_memo()
            t = time.process_time()
            certify(plan)
            times[name]["cold"].append(time.process_time() - t)
            multi = sum(len(g.members) > 1 for g in plan.groups)
            info[name] = (f"{plan.launches_after} launches, {multi} fused group(s), "
                          + ("unchanged" if out is plan else "CHANGED"))
    print(f"{'program':28} {'plan s':>22} {'certify s (pipeline)':>22} {'added':>7} "
          f"{'certify s (no memo)':>22}  plan")
    for name, t in times.items():
        added = statistics.median(t["certify"]) / statistics.median(t["plan"])
        print(f"{name:28} {_spread(t['plan']):>22} {_spread(t['certify']):>22} "
              f"{added:>6.1%} {_spread(t['cold']):>22}  {info[name]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
