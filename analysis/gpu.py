"""polyfuse on a GPU: the gpu tests, then a real-size benchmark against torch on the same GPU.

1. ``pytest -m gpu tests/test_gpu.py``: every bundled example and model fused and verified on
   each GPU device (skipped where there is none), one row per test.
2. A BERT-base-like encoder (``analysis/scaling.py``: 12 layers, width 768, sequence 128) and a
   1024x1024x1024 fp32 GEMM through ``polyfuse.InferenceSession`` (fused and unfused) on the
   device, and, when torch with CUDA is importable, the same computations with the same weights
   in torch eager, as a CUDA graph, and ``torch.matmul`` with TF32 off (cuBLAS fp32).  Variants
   are timed interleaved in rounds (wall time to the outputs, medians and spread); polyfuse's
   times include the upload of the input and the read-back of the output, torch's do not.

    python analysis/gpu.py [--device P:D] [--small] [--layers N] [--no-tests] [--out DIR]
        [--forms gpu blocked ...]

``--small`` (1 layer of width 64, a 256-cubed GEMM) runs in a minute on a CPU device, to rehearse
before a GPU run.  Prints one table and writes it to DIR/gpu.csv (default analysis/results).
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import math
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Optional

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import polyfuse  # noqa: E402
from polyfuse.passes.pipeline import device_name  # noqa: E402

_spec = importlib.util.spec_from_file_location("scaling", ROOT / "analysis" / "scaling.py")
scaling = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scaling)
sys.path.insert(0, str(ROOT / "analysis"))

HEADERS = ["part", "workload", "variant", "result", "median ms", "spread", "TFLOP/s"]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def gpu_tests() -> list[list[Any]]:
    """One row per gpu test: its outcome and seconds (pytest's junit report)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        subprocess.run([sys.executable, "-m", "pytest", "tests/test_gpu.py", "-m", "gpu", "-q",
                        "-p", "no:cacheprovider", f"--junitxml={report}"], cwd=ROOT,
                       stdout=sys.stderr, check=False,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                           [str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])))
        rows = []
        for case in ET.parse(report).iter("testcase"):
            outcome = "passed"
            for tag in ("failure", "error", "skipped"):
                hit = case.find(tag)
                if hit is not None:
                    outcome = f"{tag}: {(hit.get('message') or '').splitlines()[0][:60]}"
            rows.append(["test", case.get("name"), "fused, verified", outcome,
                         float(case.get("time", 0)) * 1e3, None, None])
    return rows


def interleaved(fns: dict[str, Callable[[], Any]], repeat: int, rounds: int = 5
                ) -> dict[str, list[float]]:
    """Wall-time samples of each callable, alternating in rounds (two warm-ups each first)."""
    for fn in fns.values():
        fn()
        fn()
    out: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            for _ in range(max(1, repeat // rounds)):
                t0 = time.perf_counter()
                fn()
                out[name].append(time.perf_counter() - t0)
    return out


def _summary(samples: list[float], flop: Optional[float]) -> tuple[float, float, Optional[float]]:
    q1, med, q3 = np.percentile(samples, [25, 50, 75])
    return med * 1e3, float((q3 - q1) / med), (flop / med / 1e12 if flop else None)


def gemm_model(n: int) -> onnx.ModelProto:
    """One ``n``-cubed fp32 MatMul: the input times a seeded random initializer."""
    w = np.random.default_rng(0).random((n, n), dtype=np.float32) - np.float32(0.5)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["A", "B"], ["C"], name="gemm")], f"gemm{n}",
        [helper.make_tensor_value_info("A", TensorProto.FLOAT, [n, n])],
        [helper.make_tensor_value_info("C", TensorProto.FLOAT, [n, n])],
        [numpy_helper.from_array(w, "B")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def torch_cuda() -> Optional[Any]:
    """torch, when it is importable and sees a CUDA device, with TF32 off (fp32 as OpenCL)."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch


def torch_encoder(torch: Any, model: onnx.ModelProto, layers: int, width: int
                  ) -> Callable[[Any], Any]:
    """``analysis/scaling.py``'s encoder in torch, with the ONNX model's weights."""
    hidden, heads, seq, _ = scaling.SIZES[width]
    dh = hidden // heads
    w = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()).cuda()
         for t in model.graph.initializer}
    norm = torch.nn.functional.layer_norm

    def run(x: Any) -> Any:
        for k in range(layers):
            p = f"l{k}_"
            q, kk, v = ((x @ w[p + "W" + c] + w[p + "b" + c]).view(1, seq, heads, dh)
                        for c in "qkv")
            probs = torch.softmax((q.transpose(1, 2) @ kk.permute(0, 2, 3, 1))
                                  / math.sqrt(dh), dim=-1)
            ctx = (probs @ v.transpose(1, 2)).transpose(1, 2).reshape(1, seq, hidden)
            ln1 = norm(ctx @ w[p + "Wo"] + w[p + "bo"] + x, (hidden,), w[p + "ln1_g"],
                       w[p + "ln1_b"], 1e-5)
            h = torch.relu(ln1 @ w[p + "W1"] + w[p + "b1"]) @ w[p + "W2"] + w[p + "b2"]
            x = norm(h + ln1, (hidden,), w[p + "ln2_g"], w[p + "ln2_b"], 1e-5)
        return x

    return run


def torch_variants(torch: Any, fn: Callable[[Any], Any], x: np.ndarray
                   ) -> tuple[dict[str, Callable[[], Any]], np.ndarray]:
    """``fn`` eager and as a CUDA graph, each waiting for its result; and its output."""
    static = torch.from_numpy(x).cuda()
    with torch.no_grad():
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                fn(static)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = fn(static)
        graph.replay()
        torch.cuda.synchronize()
        result = out.cpu().numpy()

    def eager() -> None:
        with torch.no_grad():
            fn(static)
        torch.cuda.synchronize()

    def replay() -> None:
        graph.replay()
        torch.cuda.synchronize()

    return {"torch eager": eager, "torch CUDA graph": replay}, result


def benchmark(name: str, path: Path, x: np.ndarray, flop: float, device: Optional[str],
              torch_fn: Optional[tuple[Any, Callable[[Any], Any], str]], repeat: int,
              forms: Sequence[Optional[str]] = (None,), kernels: bool = False
              ) -> list[list[Any]]:
    """polyfuse fused and unfused in each kernel form (None: the form the session chooses),
    and torch, on one model: a row per variant, and one per session build (seconds)."""
    rows: list[list[Any]] = []
    fns: dict[str, Callable[[], Any]] = {}
    results: dict[str, str] = {}
    fused_sessions = {}
    ref: Optional[np.ndarray] = None
    for form in forms:
        for fused in (True, False):
            kind = "fused" if fused else "unfused"
            log(f"benchmark {name}: building the {kind} session ({form or 'chosen form'})")
            t0 = time.perf_counter()
            sess = polyfuse.InferenceSession(str(path), device=device, fused=fused,
                                             **({"_form": form} if form else {}))
            built = time.perf_counter() - t0
            chosen = form or (sess.form_choice or {}).get("form", "?")
            label = f"polyfuse {kind} [{chosen}{'' if form else ', chosen'}]"
            rows.append(["build", name, label, "cached" if sess.cached else "cold",
                         built * 1e3, None, None])
            feeds = {sess.get_inputs()[0].name: x}
            out = sess.run(None, feeds)[0]
            if ref is None:
                ref = out
            label += f" ({sess.launches} launches)"
            fns[label] = (lambda s=sess, f=feeds: s.run(None, f))
            results[label] = _agrees(out, ref)
            if fused:
                fused_sessions[label] = (sess, feeds)
    if torch_fn is not None:
        torch, fn, tlabel = torch_fn
        variants, out = torch_variants(torch, fn, x)
        for k, v in variants.items():
            fns[f"{k} ({tlabel})"] = v
            results[f"{k} ({tlabel})"] = _agrees(out.reshape(ref.shape), ref)
    log(f"benchmark {name}: timing {len(fns)} variants interleaved")
    for variant, samples in interleaved(fns, repeat).items():
        med, spread, tflops = _summary(samples, flop)
        rows.append(["benchmark", name, variant, results[variant], med, spread, tflops])
    for label, (sess, feeds) in fused_sessions.items():
        prof = [sess.run_profiled(feeds)[1] for _ in range(max(3, repeat // 5))]
        rows.append(["benchmark", name, f"{label}, kernels only", "",
                     float(np.median(prof)) * 1e3, None, flop / float(np.median(prof)) / 1e12])
        if kernels:
            from real_size import kernel_table

            print(f"per kernel, {name}, {label} (profiling events; 'x numpy' is against this "
                  "machine's CPU numpy):")
            print("\n".join(kernel_table(sess, str(path), 10, cpu=False)), flush=True)
    return rows


def _agrees(out: np.ndarray, ref: np.ndarray) -> str:
    """Whether ``out`` matches polyfuse's unfused output (fp32, reordered sums)."""
    err = float(np.max(np.abs(out.astype(np.float64) - ref)) / (np.max(np.abs(ref)) or 1.0))
    return f"{'matches' if err < 1e-3 else 'DIFFERS'} unfused ({err:.1e})"


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="P:D (default: PYOPENCL_CTX, else the rule "
                                                   "`polyfuse devices` prints)")
    ap.add_argument("--small", action="store_true",
                    help="1 encoder layer of width 64, a 256-cubed GEMM: a rehearsal")
    ap.add_argument("--layers", type=int, default=None,
                    help="encoder layers (default 12; 1 with --small): one layer of BERT-base "
                         "builds its sessions in seconds where 12 take minutes")
    ap.add_argument("--no-tests", action="store_true", help="only the benchmark")
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--kernels", action="store_true",
                    help="also print each fused session's per-kernel table")
    ap.add_argument("--forms", nargs="*", default=None,
                    help="kernel forms to build and time side by side (default: the form "
                         "the session chooses)")
    ap.add_argument("--out", type=Path, default=ROOT / "analysis" / "results")
    args = ap.parse_args(argv)
    if args.device:
        os.environ["PYOPENCL_CTX"] = args.device
    rows = [] if args.no_tests else gpu_tests()
    forms: list[Optional[str]] = list(args.forms) if args.forms else [None]
    layers, width, n = (1, 64, 256) if args.small else (12, 768, 1024)
    layers = args.layers or layers
    torch = torch_cuda()
    log(f"device: {device_name(args.device)}; torch with CUDA: "
        f"{'yes' if torch is not None else 'no (torch rows left out)'}")
    args.out.mkdir(parents=True, exist_ok=True)
    hidden, _, seq, ffn = scaling.SIZES[width]
    with tempfile.TemporaryDirectory() as tmp:
        encoder = scaling.bert_encoder(layers, width)
        path = Path(tmp) / "encoder.onnx"
        onnx.save(encoder, str(path))
        x = np.random.default_rng(1).standard_normal((1, seq, hidden), dtype=np.float32)
        flop = layers * 2.0 * seq * (4 * hidden * hidden + 2 * seq * hidden + 2 * hidden * ffn)
        tfn = None if torch is None else (torch, torch_encoder(torch, encoder, layers, width),
                                          "same weights")
        rows += benchmark(f"encoder {layers}x{width}, seq {seq}", path, x, flop, args.device,
                          tfn, args.repeat, forms, args.kernels)
        gemm = gemm_model(n)
        path = Path(tmp) / "gemm.onnx"
        onnx.save(gemm, str(path))
        a = np.random.default_rng(2).random((n, n), dtype=np.float32)
        tfn = None
        if torch is not None:
            b = torch.from_numpy(numpy_helper.to_array(gemm.graph.initializer[0]).copy()).cuda()
            tfn = (torch, lambda t: torch.matmul(t, b), "cuBLAS, TF32 off")
        rows += benchmark(f"GEMM {n}^3 fp32", path, a, 2.0 * n ** 3, args.device, tfn,
                          args.repeat, forms, args.kernels)
    table = [[_cell(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in [HEADERS] + table) for i in range(len(HEADERS))]
    print(f"device: {device_name(args.device)}")
    for r in [HEADERS, ["-" * w for w in widths]] + table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    with open(args.out / "gpu.csv", "w", newline="") as fh:
        csv.writer(fh).writerows([HEADERS] + rows)
    print(f"wrote {args.out / 'gpu.csv'}")
    return 1 if any(str(r[3]).startswith(("failure", "error", "DIFFERS")) for r in rows) else 0


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3g}" if v < 100 else f"{v:.0f}"
    return str(v)


if __name__ == "__main__":
    sys.exit(main())
