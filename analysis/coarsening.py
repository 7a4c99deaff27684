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
        [-D NAME=VALUE ...] [--size-target-us US] [--budget-s S]

Sizes: each example's host guards its problem sizes (``#ifndef NI`` / ``#define NI 256`` /
``#endif``), so ``-D NAME=VALUE`` changes them (for every example loaded).  With
``--size-target-us US`` each example is first grown for the device: every guarded size is
multiplied by a scale factor that doubles (1, 2, 4, ...), each size loaded and its original
program timed on the device, until the original's slowest kernel (one launch instance) runs for
at least US microseconds -- capped by device memory (the buffers at most 1/:data:`MEMORY_SHARE`
of it) and by the time budget (the sizing's share of it, and a next size whose tuning would not
fit the rest); then it is tuned at that size.  On a fast
GPU the default sizes run for microseconds, where launch overhead, not the kernel, is timed.
``--budget-s S`` bounds the whole run: each example gets an equal share of what is left (the
sizing at most :data:`SIZING_SHARE` of it), and the tuner keeps the original for what its
share does not reach (:func:`~polyfuse.passes.coarsening_tuning.tune_coarsening`).  Without
these options the run is the one at the examples' own sizes.

Writes ``DIR/coarsening.md`` and ``DIR/coarsening.json`` (default DIR: ``analysis/results``) and
prints the table and the paths; progress goes to stderr.  Timings on a shared machine are noisy:
the script interleaves every comparison and reports the spread of the confirmation run.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import operator
import re
import sys
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's polyfuse, not an installed one

import polyfuse  # noqa: E402
from polyfuse.core.program import Launch, Program, eval_host_int, host_instances  # noqa: E402
from polyfuse.passes.coarsening_tuning import tune_coarsening  # noqa: E402
from polyfuse.runtime.device import DeviceLimits, DeviceSpec, get_context  # noqa: E402
from polyfuse.runtime.execute import time_program  # noqa: E402

EXAMPLES = ROOT / "examples" / "coarsening"


def _progress(msg: str) -> None:
    print(f"[coarsening] {msg}", file=sys.stderr, flush=True)


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


# ----------------------------------------------------------------------------------------------
# Sizes
# ----------------------------------------------------------------------------------------------

#: the buffers of a grown program take at most 1/MEMORY_SHARE of the device's global memory:
#: the tuner holds the original and every variant at once, each with its own buffers
MEMORY_SHARE = 32
#: the sizing takes at most this share of an example's time budget
SIZING_SHARE = 0.4
#: the largest scale factor tried
MAX_SCALE = 1 << 12
#: timed runs of the original per size probed
PROBE_REPEAT = 3
#: tuning one launch costs about this many probes of its size (per variant a precheck, a
#: verification and timed copies, each with its own buffers: host-bound at large sizes; on an
#: H200, transpose at 8192^2 took 160 s for a 2.1 s probe); a size is not grown further when
#: this many probes of the next size (twice the last one's seconds) would not fit the tuning
TUNE_PROBES = 80

#: ``#ifndef NAME`` / ``#define NAME VALUE`` / ``#endif``: a size a run may change
_GUARDED = re.compile(r"^#ifndef[ \t]+(\w+)[ \t]*\n#define[ \t]+\1[ \t]+([^\n]+?)[ \t]*\n"
                      r"#endif\b", re.M)
_INT_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
            ast.LShift: operator.lshift}


def _int_value(text: str) -> Optional[int]:
    """The value of an integer macro body (``256``, ``(1 << 20)``); None for anything else."""
    def ev(node: ast.expr) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _INT_OPS:
            return int(_INT_OPS[type(node.op)](ev(node.left), ev(node.right)))
        raise ValueError(text)

    try:
        return ev(ast.parse(text, mode="eval").body)
    except (SyntaxError, ValueError):
        return None


def size_macros(host: Path) -> dict[str, int]:
    """The sizes an example lets a run change: the integer macros its host guards with
    ``#ifndef`` (step counts and work-group sizes are not guarded, so they stay)."""
    out = {}
    for name, body in _GUARDED.findall(host.read_text()):
        value = _int_value(body)
        if value is not None:
            out[name] = value
    return out


def scaled_defines(sizes: Mapping[str, int], scale: int) -> dict[str, str]:
    """``-D`` definitions multiplying every size by ``scale`` (none at scale 1)."""
    return {} if scale == 1 else {n: str(v * scale) for n, v in sizes.items()}


def load_example(d: Path, defines: Mapping[str, str]) -> Program:
    """The example in directory ``d`` with host (and kernel) macros ``defines``."""
    return polyfuse.load_opencl(d / "kernels.cl", host=d / "host.c", defines=dict(defines))


def buffer_bytes(prog: Program) -> tuple[int, int]:
    """(all, the largest) root buffer sizes of ``prog`` in bytes."""
    sizes = [eval_host_int(b.size, {}, f"size of buffer {b.name!r}")
             for b in prog.buffers.values() if b.parent is None and b.size is not None]
    return sum(sizes), max(sizes, default=0)


def slowest_kernel(prog: Program, *, ctx: Any, queue: Any,
                   repeat: int = PROBE_REPEAT) -> tuple[float, str]:
    """(seconds, kernel) of the slowest launch instance of ``prog`` (medians): a launch in a
    host loop counts once per instance, as the tuner times it."""
    t = time_program(prog, repeat=repeat, ctx=ctx, queue=queue)
    count = Counter(op.id for op, _, _ in host_instances(prog, {}) if isinstance(op, Launch))
    kernel = {op.id: op.kernel for op in prog.launches}
    per = {lid: s / count[lid] for lid, s in t.per_launch.items() if count[lid]}
    lid = max(per, key=lambda k: per[k])
    return per[lid], kernel[lid]


@dataclass(frozen=True)
class SizeChoice:
    """The size an example is tuned at, and how it was found."""

    scale: int
    defines: Mapping[str, str]
    slowest_s: float
    kernel: str
    nbytes: int
    reason: str
    #: every size probed: (scale, slowest kernel s, buffer bytes, seconds the probe took)
    probes: tuple[tuple[int, float, int, float], ...]
    program: Program

    def to_dict(self) -> dict[str, Any]:
        return {"scale": self.scale, "defines": dict(self.defines),
                "slowest_kernel_s": self.slowest_s, "slowest_kernel": self.kernel,
                "buffer_bytes": self.nbytes, "reason": self.reason,
                "probes": [{"scale": s, "slowest_kernel_s": t, "buffer_bytes": b, "seconds": w}
                           for s, t, b, w in self.probes]}


def choose_size(d: Path, target_s: float, *, device: DeviceSpec = None,
                defines: Mapping[str, str] = {},  # noqa: B006 - read only
                budget_s: Optional[float] = None) -> SizeChoice:
    """Double the scale of example ``d``'s sizes until its original program's slowest kernel
    runs for ``target_s`` on ``device``, within the memory cap and the time the example has,
    ``budget_s`` for its sizing and tuning (module doc).  ``defines`` are given at every size
    (and win over the scaled ones)."""
    sizes = {n: v for n, v in size_macros(d / "host.c").items() if n not in defines}
    ctx, queue = get_context(device)
    limits = DeviceLimits.from_device(queue.device)
    cap = limits.global_mem_size // MEMORY_SHARE
    end = None if budget_s is None else time.monotonic() + budget_s * SIZING_SHARE
    probes: list[tuple[int, float, int, float]] = []
    best: Optional[SizeChoice] = None
    scale = 1
    while True:
        defs = {**scaled_defines(sizes, scale), **defines}
        prog = load_example(d, defs)
        nbytes, largest = buffer_bytes(prog)
        if best is not None and (nbytes > cap or largest > limits.max_mem_alloc_size):
            return replace(best, reason=f"x{scale} needs {nbytes / 2**20:.0f} MiB of buffers: "
                                        f"over the cap ({cap / 2**20:.0f} MiB)")
        t0 = time.monotonic()
        t, kernel = slowest_kernel(prog, ctx=ctx, queue=queue)
        took = time.monotonic() - t0
        probes.append((scale, t, nbytes, took))
        best = SizeChoice(scale, defs, t, kernel, nbytes, "", tuple(probes), prog)
        _progress(f"{d.name}: x{scale}: slowest kernel {kernel} {t * 1e6:.0f} us, "
                  f"{nbytes / 2**20:.1f} MiB")
        if t >= target_s:
            return replace(best, reason="target reached")
        if not sizes:
            return replace(best, reason="no guarded size macro to grow")
        if scale >= MAX_SCALE:
            return replace(best, reason=f"largest scale x{MAX_SCALE}")
        if end is not None and time.monotonic() >= end:
            return replace(best, reason="sizing time budget spent")
        if budget_s is not None and 2 * took * TUNE_PROBES > budget_s * (1 - SIZING_SHARE):
            return replace(best, reason=f"the tuning of x{2 * scale} would not fit the time "
                                        "budget")
        scale *= 2


def _defines(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        out[name] = value if sep else "1"
    return out


def main(argv: Any = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", nargs="*", help="only these example directories")
    ap.add_argument("--repeat", type=int, default=10, help="timed runs per variant")
    ap.add_argument("--rounds", type=int, default=5, help="interleaving rounds")
    ap.add_argument("--device", default=None, help="OpenCL device (PLATFORM:DEVICE)")
    ap.add_argument("--out", type=Path, default=ROOT / "analysis" / "results")
    ap.add_argument("-D", "--define", action="append", default=[], metavar="NAME=VALUE",
                    help="host (and kernel) macro definition for every example (a size)")
    ap.add_argument("--size-target-us", type=float, default=None, metavar="US",
                    help="grow each example's sizes until its slowest kernel runs US us")
    ap.add_argument("--budget-s", type=float, default=None, metavar="S",
                    help="bound the whole run to about S seconds (shared by the examples)")
    args = ap.parse_args(argv)
    names = args.examples or sorted(p.name for p in EXAMPLES.iterdir() if (p / "host.c").exists())
    defines = _defines(args.define)
    end = None if args.budget_s is None else time.monotonic() + args.budget_s
    rows: list[dict[str, Any]] = []
    programs: list[dict[str, Any]] = []
    sized: list[dict[str, Any]] = []
    failed = 0
    for i, name in enumerate(names):
        d = EXAMPLES / name
        t0 = time.time()
        share = None if end is None else max(0.0, (end - time.monotonic()) / (len(names) - i))
        try:
            if args.size_target_us is not None:
                _progress(f"{name}: sizing")
                size = choose_size(d, args.size_target_us * 1e-6, device=args.device,
                                   defines=defines, budget_s=share)
                sized.append({"program": name, **size.to_dict()})
                prog = size.program
            else:
                prog = load_example(d, defines)
            _progress(f"{name}: tuning")
            left = None if share is None else max(0.0, share - (time.time() - t0))
            rep = tune_coarsening(prog, device=args.device, use_cache=False,
                                  repeat=args.repeat, rounds=args.rounds, progress=_progress,
                                  budget_s=left)
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
        _write(args, defines, rows, programs, sized)  # what is done survives a timeout
    text = _write(args, defines, rows, programs, sized)
    print(text)
    print(f"wrote {args.out / 'coarsening.md'} and {args.out / 'coarsening.json'}")
    return 1 if failed else 0


def _write(args: argparse.Namespace, defines: Mapping[str, str], rows: list[dict[str, Any]],
           programs: list[dict[str, Any]], sized: list[dict[str, Any]]) -> str:
    """Write ``coarsening.md`` and ``coarsening.json`` under ``args.out``; the markdown."""
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
    if args.size_target_us is not None:
        lines += ["", f"Sizes: each example grown until its original's slowest kernel runs "
                  f"{args.size_target_us:g} us (scale x every guarded size macro)", "",
                  "| program | scale | sizes | slowest kernel | its time (us) | buffers (MiB) "
                  "| why this size |", "|---|---|---|---|---|---|---|"]
        for z in sized:
            sz = " ".join(f"{n}={v}" for n, v in z["defines"].items()) or "as written"
            lines.append(f"| {z['program']} | {z['scale']} | {sz} | {z['slowest_kernel']} | "
                         f"{z['slowest_kernel_s'] * 1e6:.0f} | {z['buffer_bytes'] / 2**20:.1f} | "
                         f"{z['reason']} |")
    text = "\n".join(lines) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "coarsening.md").write_text(text)
    doc: dict[str, Any] = {"launches": rows, "programs": programs, "geomean_launch_speedup": gm,
                           "geomean_program_speedup": gm_prog}
    if args.size_target_us is not None or defines or args.budget_s is not None:
        doc.update(size_target_us=args.size_target_us, defines=defines,
                   budget_s=args.budget_s, sizes=sized)
    (args.out / "coarsening.json").write_text(json.dumps(doc, indent=1, default=str))
    return text


if __name__ == "__main__":
    sys.exit(main())
