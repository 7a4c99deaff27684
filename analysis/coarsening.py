"""Thread + block coarsening chosen by measurement vs the untuned original, per kernel launch.

For each program under ``examples/coarsening/`` (PolyBench-ACC, Rodinia and NVIDIA-SDK style
OpenCL host + kernel programs: stencils, GEMM, tiled transpose, reduction, convolution,
gaussian, hotspot, pathfinder, matrix-vector):
:func:`polyfuse.passes.coarsening_tuning.tune_coarsening` generates the variants of every launch,
refuses the illegal ones, prunes, verifies the rest against the original on random inputs, times
them interleaved with the original and confirms the fastest against the original in a second
interleaved run (the original is kept when it is not beaten).  The per-launch speedup is original /
chosen kernel time (medians) from that confirmation run; the whole program, coarsened with every
launch's choice and verified, is also timed against the original.  The tuning cache is not used, so
every figure is measured now.

    python analysis/coarsening.py [--examples gemm ...] [--repeat 10] [--device SPEC] [--out DIR]

Writes ``DIR/coarsening.md`` and ``DIR/coarsening.json`` (default DIR: ``analysis/results``) and
prints the table and the paths; progress goes to stderr.  Timings on a shared machine are noisy:
the script interleaves every comparison and reports the spread of the confirmation run.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import polyfuse
from polyfuse.passes.coarsening_tuning import tune_coarsening

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "coarsening"


def _progress(msg: str) -> None:
    print(f"[coarsening] {msg}", file=sys.stderr, flush=True)


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main(argv: Any = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", nargs="*", help="only these example directories")
    ap.add_argument("--repeat", type=int, default=10, help="timed runs per variant")
    ap.add_argument("--rounds", type=int, default=5, help="interleaving rounds")
    ap.add_argument("--device", default=None, help="OpenCL device (PLATFORM:DEVICE)")
    ap.add_argument("--out", type=Path, default=ROOT / "analysis" / "results")
    args = ap.parse_args(argv)
    names = args.examples or sorted(p.name for p in EXAMPLES.iterdir() if (p / "host.c").exists())
    rows: list[dict[str, Any]] = []
    programs: list[dict[str, Any]] = []
    failed = 0
    for name in names:
        d = EXAMPLES / name
        t0 = time.time()
        _progress(f"{name}: tuning")
        try:
            prog = polyfuse.load_opencl(d / "kernels.cl", host=d / "host.c")
            rep = tune_coarsening(prog, device=args.device, use_cache=False,
                                  repeat=args.repeat, rounds=args.rounds, progress=_progress)
        except polyfuse.PolyfuseError as err:
            _progress(f"{name}: FAILED: {err}")
            failed += 1
            continue
        for lt in rep.launches:
            wd = lt.work_dim
            rows.append({
                "program": name, "launch": lt.launch, "kernel": lt.kernel,
                "variants": len(lt.variants),
                "timed": sum(v.status == "timed" for v in lt.variants),
                "pruned": lt.pruned,
                "illegal": sum(v.status == "illegal" for v in lt.variants),
                "thread": list(lt.chosen.thread[:wd]), "block": list(lt.chosen.block[:wd]),
                "original_s": lt.original_time_s, "chosen_s": lt.chosen_time_s,
                "speedup": lt.speedup or 1.0, "reason": lt.reason,
            })
        programs.append({"program": name, "original_s": rep.original_time_s,
                         "coarsened_s": rep.coarsened_time_s, "speedup": rep.speedup or 1.0,
                         "verified": None if rep.verification is None else rep.verification.ok,
                         "seconds": round(time.time() - t0, 1),
                         "report": rep.to_dict()})
        _progress(f"{name}: done in {time.time() - t0:.0f} s")
    gm = _geomean([r["speedup"] for r in rows])
    gm_prog = _geomean([p["speedup"] for p in programs])
    lines = ["# Coarsening: tuned variant vs untuned original (kernel time, medians)", "",
             "| program | launch | kernel | thread | block | variants | timed | pruned | illegal "
             "| original (ms) | chosen (ms) | speedup |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        o = f"{r['original_s'] * 1e3:.3f}" if r["original_s"] else ""
        c = f"{r['chosen_s'] * 1e3:.3f}" if r["chosen_s"] else ""
        lines.append(f"| {r['program']} | {r['launch']} | {r['kernel']} | {r['thread']} | "
                     f"{r['block']} | {r['variants']} | {r['timed']} | {r['pruned']} | "
                     f"{r['illegal']} | {o} | {c} | {r['speedup']:.2f} |")
    lines += ["", f"Geomean speedup over {len(rows)} launches: {gm:.3f}x", "",
              "| program | original (ms) | coarsened (ms) | speedup | verified |",
              "|---|---|---|---|---|"]
    for p in programs:
        o = f"{p['original_s'] * 1e3:.3f}" if p["original_s"] else ""
        c = f"{p['coarsened_s'] * 1e3:.3f}" if p["coarsened_s"] else ""
        lines.append(f"| {p['program']} | {o} | {c} | {p['speedup']:.2f} | {p['verified']} |")
    lines += ["", f"Geomean whole-program speedup over {len(programs)} programs: {gm_prog:.3f}x"]
    text = "\n".join(lines) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "coarsening.md").write_text(text)
    (args.out / "coarsening.json").write_text(json.dumps(
        {"launches": rows, "programs": programs, "geomean_launch_speedup": gm,
         "geomean_program_speedup": gm_prog}, indent=1, default=str))
    print(text)
    print(f"wrote {args.out / 'coarsening.md'} and {args.out / 'coarsening.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
