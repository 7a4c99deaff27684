"""Real-size PyTorch blocks through polyfuse's InferenceSession against onnxruntime (1 thread).

The models come from :mod:`analysis.export_real_size` (``out/real_size/*.onnx``: a BERT-base
layer and 12 layers, a GPT-2 MLP block, a ResNet-50 bottleneck, a MobileNetV2 block, and both
blocks at stride 2 as their networks downsample).  For each:

* a cold build (``cache=False``) of the fused and the unfused session, timed; a build that runs
  past ``--build-timeout`` seconds is abandoned and reported with the stage it was in;
* the outputs of both sessions checked against onnxruntime's (rtol 1e-3, atol 1e-4) before
  anything is timed;
* ``run`` times of onnxruntime, fused and unfused alternating in ``--rounds`` rounds in one
  process: medians and IQR/median spread; wall time, or with ``--clock cpu`` the calling
  thread's CPU time (onnxruntime with one thread and PoCL's ``basic`` device compute in that
  thread; on a machine shared with other jobs wall time also counts the waits for a core);
* a per-kernel table of each session (profiling events, median of ``--profile`` runs): for
  each launch the nodes it computes, its time, and for those holding a MatMul/Gemm/Conv the
  product's GFLOP/s and the fraction of numpy's one-thread sgemm on the same shape (a Conv as
  its implicit product per image and group); with ``--clock cpu`` each launch is run and
  timed alone in CPU time, numpy too;
* with ``--ort-nodes``, onnxruntime's own per-node times (its profiler, median of ``--profile``
  runs), to set each fused kernel against the nodes onnxruntime runs for the same work (its
  Conv nodes carry their fused activation or Add; ``ReorderInput``/``ReorderOutput`` are its
  layout changes).

    python analysis/real_size.py [--only bert_layer gpt2_mlp ...]
        [--dir out/real_size] [--rounds 5] [--repeat 20] [--build-timeout 300] [--device SPEC]
        [--clock wall|cpu] [--ort-nodes]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # numpy's sgemm on one thread, as documented

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "analysis"))

import onnx  # noqa: E402
from vs_onnxruntime import ort_session, spread, warm_up  # noqa: E402

import polyfuse  # noqa: E402
from polyfuse.apps.onnx_run import random_inputs  # noqa: E402

DEFAULT_MODELS = ["bert_layer", "gpt2_mlp", "resnet_bottleneck", "mobilenet_block",
                  "resnet_downsample", "mobilenet_downsample", "bert_12"]
RTOL, ATOL = 1e-3, 1e-4


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class BuildTimeout(Exception):
    pass


def _alarm(_signum: int, _frame: Any) -> None:
    raise BuildTimeout()


def build(path: str, fused: bool, timeout: int, device: Optional[str]
          ) -> tuple[Optional[Any], float, str]:
    """(session, seconds, why not) of a cold build, abandoned after ``timeout`` seconds."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout)
    t0 = time.perf_counter()
    try:
        sess = polyfuse.InferenceSession(path, fused=fused, cache=False, device=device)
        return sess, time.perf_counter() - t0, ""
    except BuildTimeout as err:
        import traceback

        # the innermost polyfuse functions it was in: the stage that takes the time
        stage = [f"{Path(f.filename).stem}.{f.name}" for f in
                 traceback.extract_tb(err.__traceback__) if "/polyfuse/" in f.filename][-3:]
        where = " > ".join(stage)
        return None, time.perf_counter() - t0, f"not built in {timeout} s (in {where})"
    except Exception as err:  # noqa: BLE001 - reported, not hidden
        return None, time.perf_counter() - t0, f"{type(err).__name__}: {str(err)[:200]}"
    finally:
        signal.alarm(0)


def products(path: str) -> dict[str, tuple[int, int, int, int]]:
    """Node label -> (batch, M, N, K) of every MatMul/Gemm of the model, and of every Conv
    as the product it is per image and group (output channels x pixels x window)."""
    model = onnx.shape_inference.infer_shapes(onnx.load(path))
    g = model.graph
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(g.value_info) + list(g.input) + list(g.output)}
    shapes.update({t.name: list(t.dims) for t in g.initializer})
    out = {}
    for i, node in enumerate(g.node):
        if node.op_type not in ("MatMul", "Gemm", "Conv"):
            continue
        sa, sb = shapes[node.input[0]], shapes[node.input[1]]
        attrs = {a.name: a.i for a in node.attribute}
        if node.op_type == "Conv":  # as the implicit product per image and group
            group, so = attrs.get("group", 1), shapes[node.output[0]]
            out[node.name or f"Conv_{i}"] = (so[0] * group, so[1] // group, math.prod(so[2:]),
                                             math.prod(sb[1:]))
        elif node.op_type == "Gemm":
            m, k = sa[::-1] if attrs.get("transA") else sa
            n = sb[0] if attrs.get("transB") else sb[1]
            out[node.name or f"Gemm_{i}"] = (1, m, n, k)
        else:
            m, k, n = sa[-2], sa[-1], sb[-1]
            batch = math.prod(sa[:-2]) if len(sb) == 2 else math.prod(sb[:-2])
            if len(sb) == 2:  # B shared: the batch folds into M
                m, batch = m * batch, 1
            out[node.name or f"MatMul_{i}"] = (batch, m, n, k)
    return out


def numpy_gflops(shape: tuple[int, int, int, int], cpu: bool, reps: int = 5) -> float:
    b, m, n, k = shape
    rng = np.random.default_rng(0)
    a = rng.standard_normal((b, m, k), dtype=np.float32)
    w = rng.standard_normal((b, k, n), dtype=np.float32)
    clock = time.thread_time if cpu else time.perf_counter
    ts = []
    for _ in range(reps):
        t0 = clock()
        np.matmul(a, w)
        ts.append(clock() - t0)
    return 2 * b * m * n * k / float(np.median(ts)) / 1e9


def kernel_table(sess: Any, path: str, runs: int, cpu: bool) -> list[str]:
    """One line per launch of the session's program: kernel, nodes, median time, and for a
    product its GFLOP/s and fraction of numpy's sgemm on the same shape."""
    prods = products(path)
    names: dict[int, str] = {s.launch[0]: s.launch[1].function_name
                             for s in sess._steps if s.kind == "launch"}
    members: dict[str, list[str]] = {}
    if sess.plan is not None:
        for grp in sess.plan.groups:
            members[f"fused_g{grp.id}"] = [f.kernel for f in grp.fragments]
    samples: dict[int, list[float]] = {lid: [] for lid in names}
    ex = sess._ex
    for _ in range(runs):
        if cpu:  # one launch at a time, in the calling thread's CPU time
            for step in sess._steps:
                c0 = time.thread_time()
                ex.enqueue([step])
                ex.finish()
                if step.kind == "launch":
                    samples[step.launch[0]].append(time.thread_time() - c0)
            continue
        events = ex.enqueue(sess._steps, profile=True)
        ex.finish()
        for lid, evt in events:
            samples[lid].append((evt.profile.end - evt.profile.start) * 1e-9)
    total = sum(float(np.median(v)) for v in samples.values())
    lines = [f"    {'kernel':14s} {'ms':>7s} {'share':>6s} {'GFLOP/s':>8s} {'x numpy':>8s}  "
             "product (batch x M x N x K) / nodes"]
    for lid, name in names.items():
        t = float(np.median(samples[lid]))
        parts = members.get(name, [name])
        # kernel names are ``<node label as identifier>_<node index>``; a split-K product's
        # partial products ``<label>_split_<index>`` are its whole product's work
        shapes = [(p, prods[lab]) for p in parts for lab in prods
                  if p.startswith(_ident(lab) + "_")
                  and re.fullmatch(r"(split_)?\d+", p[len(_ident(lab)) + 1:])]
        if shapes:
            flops = sum(2 * math.prod(s) for _, s in shapes)
            ref = sum(2 * math.prod(s) / numpy_gflops(s, cpu) for _, s in shapes) / 1e9
            gf, frac = flops / t / 1e9, ref / t
            desc = ", ".join("x".join(map(str, s)) for _, s in shapes)
            lines.append(f"    {name:14s} {t * 1e3:7.3f} {t / total:6.1%} {gf:8.1f} {frac:8.2f}  "
                         f"{desc} / {len(parts)} nodes")
        else:
            lines.append(f"    {name:14s} {t * 1e3:7.3f} {t / total:6.1%} {'':8s} {'':8s}  "
                         f"{len(parts)} nodes: {', '.join(parts[:4])}"
                         f"{' ...' if len(parts) > 4 else ''}")
    return lines


def ort_node_table(path: str, feeds: dict[str, np.ndarray], runs: int) -> list[str]:
    """onnxruntime's per-node kernel times (its profiler, one thread, median of ``runs``), in
    the order it runs them."""
    with tempfile.TemporaryDirectory() as tmp:
        sess = ort_session(path, profile_prefix=str(Path(tmp) / "ort"))
        sess.run(None, feeds)
        for _ in range(runs):
            sess.run(None, feeds)
        events = json.loads(Path(sess.end_profiling()).read_text())
    times: dict[tuple[str, str], list[float]] = {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            key = (e["name"][:-len("_kernel_time")], e.get("args", {}).get("op_name", ""))
            times.setdefault(key, []).append(e["dur"] * 1e-3)
    total = sum(float(np.median(v[1:] if len(v) > 1 else v)) for v in times.values())
    lines = [f"    {'node':40s} {'op':14s} {'ms':>7s} {'share':>6s}"]
    for (node, op), v in times.items():
        t = float(np.median(v[1:] if len(v) > 1 else v))  # the first run warms up
        lines.append(f"    {node[:40]:40s} {op[:14]:14s} {t:7.3f} {t / total:6.1%}")
    return lines


def _ident(label: str) -> str:
    from polyfuse.frontend.onnx import _identifier

    return _identifier(label, "")


def interleaved(fns: dict[str, Any], repeat: int, rounds: int
                ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall-time and thread-CPU-time samples of each callable, alternating in rounds (each
    warmed up first: ``vs_onnxruntime.WARM_UP_S``)."""
    warm_up(fns)
    per = max(1, -(-repeat // rounds))
    wall: dict[str, list[float]] = {k: [] for k in fns}
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            for _ in range(per):
                t0, c0 = time.perf_counter(), time.thread_time()
                fn()
                cpu[name].append(time.thread_time() - c0)
                wall[name].append(time.perf_counter() - t0)
    return wall, cpu


def ort_feeds(ort: Any, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs from onnxruntime's view of the graph, for when no polyfuse session was
    built to give its own (floats uniform in [-1, 1), integers 0 or 1)."""
    rng = np.random.default_rng(seed)
    kinds = {"tensor(float)": np.float32, "tensor(double)": np.float64,
             "tensor(float16)": np.float16, "tensor(int64)": np.int64, "tensor(int32)": np.int32,
             "tensor(bool)": np.bool_}
    feeds = {}
    for inp in ort.get_inputs():
        dtype = np.dtype(kinds[inp.type])
        shape = [d if isinstance(d, int) else 1 for d in inp.shape]
        feeds[inp.name] = ((rng.random(shape) * 2 - 1).astype(dtype) if dtype.kind == "f"
                           else rng.integers(0, 2, size=shape).astype(dtype))
    return feeds


def check(outs: list, ref: list) -> Optional[str]:
    for i, (a, r) in enumerate(zip(outs, ref)):
        if a.shape != r.shape:
            return f"output {i}: shape {a.shape} != {r.shape}"
        bad = ~np.isclose(a, r, rtol=RTOL, atol=ATOL)
        if bad.any():
            err = float(np.abs(a - r).max())
            return f"output {i}: {int(bad.sum())} elements differ (max abs {err:.2e})"
    return None


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", default=DEFAULT_MODELS)
    ap.add_argument("--dir", default=str(ROOT / "out" / "real_size"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--profile", type=int, default=5)
    ap.add_argument("--build-timeout", type=int, default=300)
    ap.add_argument("--device", default=None)
    ap.add_argument("--ort-nodes", action="store_true",
                    help="also print onnxruntime's per-node times (its profiler)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: the calling thread's CPU time (what a loaded machine does not "
                         "inflate; valid where everything runs in that thread: onnxruntime "
                         "with 1 thread, PoCL's basic device)")
    args = ap.parse_args(argv)
    rows, tables = [], []
    for name in args.only:
        path = str(Path(args.dir) / f"{name}.onnx")
        if not Path(path).is_file():
            rows.append((name, f"missing {path}: run analysis/export_real_size.py"))
            continue
        log(f"{name}: building")
        fused, t_fused, why_f = build(path, True, args.build_timeout, args.device)
        unfused, t_unfused, why_u = build(path, False, args.build_timeout, args.device)
        ort = ort_session(path)
        feeds = (random_inputs(fused.io if fused else unfused.io) if (fused or unfused)
                 else ort_feeds(ort))
        ref = ort.run(None, feeds)
        fns = {"ort": lambda o=ort, f=feeds: o.run(None, f)}
        notes = []
        for label, sess, why in (("fused", fused, why_f), ("unfused", unfused, why_u)):
            if sess is None:
                notes.append(f"{label}: {why}")
                continue
            bad = check(sess.run(None, feeds), ref)
            if bad:
                notes.append(f"{label}: wrong output ({bad}), not timed")
                continue
            fns[label] = lambda s=sess, f=feeds: s.run(None, f)
        log(f"{name}: timing {sorted(fns)}")
        wall, cpu = interleaved(fns, args.repeat, args.rounds)
        samples = cpu if args.clock == "cpu" else wall
        med = {k: float(np.median(v)) for k, v in samples.items()}
        sp = {k: spread(v) for k, v in samples.items()}
        form = fused.form_choice.get("form") if fused and fused.form_choice else "-"
        launches = f"{fused.launches if fused else '-'}/{unfused.launches if unfused else '-'}"
        rows.append((name, med, sp, t_fused if fused else None, t_unfused if unfused else None,
                     form, launches, notes))
        for label, sess in (("fused", fused), ("unfused", unfused)):
            if sess is not None and label in fns:
                tables.append((f"{name}, {label} session", kernel_table(
                    sess, path, args.profile, args.clock == "cpu")))
        if args.ort_nodes:
            tables.append((f"{name}, onnxruntime", ort_node_table(path, feeds, args.profile)))
    print(f"clock: {args.clock}")
    print("| model | onnxruntime ms | fused ms | unfused ms | fused/ort | fused/unfused | "
          "build fused s | build unfused s | form | launches f/u | notes |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    ratios_o, ratios_u = [], []
    for row in rows:
        if len(row) == 2:
            print(f"| {row[0]} | | | | | | | | | | {row[1]} |")
            continue
        name, med, sp, tf, tu, form, launches, notes = row

        def cell(k: str, med: dict = med, sp: dict = sp) -> str:
            return f"{med[k] * 1e3:.2f} ±{sp[k]:.0%}" if k in med else "-"

        fo = med["fused"] / med["ort"] if "fused" in med else None
        fu = med["fused"] / med["unfused"] if "fused" in med and "unfused" in med else None
        if fo:
            ratios_o.append(fo)
        if fu:
            ratios_u.append(fu)
        print(f"| {name} | {cell('ort')} | {cell('fused')} | {cell('unfused')} | "
              f"{f'{fo:.2f}' if fo else '-'} | {f'{fu:.2f}' if fu else '-'} | "
              f"{f'{tf:.0f}' if tf else '-'} | {f'{tu:.0f}' if tu else '-'} | {form} | "
              f"{launches} | {'; '.join(notes)} |")
    if ratios_o:
        print(f"\ngeomean fused/onnxruntime {math.exp(np.mean(np.log(ratios_o))):.2f}"
              + (f", fused/unfused {math.exp(np.mean(np.log(ratios_u))):.2f}" if ratios_u else ""))
    for name, lines in tables:
        how = "launches run one at a time, CPU time" if args.clock == "cpu" else "profiling events"
        if name.endswith("onnxruntime"):
            how = "its profiler, wall time"
        print(f"\n{name}, per kernel (median of {args.profile} runs, {how}):")
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
