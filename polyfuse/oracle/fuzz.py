"""Differential fuzzing of polyfuse, in the style of Csmith: random inputs, an independent oracle.

Two generators, one rule — every outcome is either a verified success or a clean refusal:

* :func:`random_model` builds a random *valid* ONNX graph over the operators polyfuse supports
  (element-wise, MatMul, Softmax, LayerNormalization, reductions, Transpose, Reshape, Slice,
  Concat, Gather) with shapes made of 1s, small powers of two and odd primes, fan-out, diamonds
  and residual additions.  :func:`check_model` fuses it with ``--verify`` (against onnxruntime
  and against the unfused program) in a worker process under a time budget.
* :func:`mutate_program` mutates one of the bundled OpenCL programs (``examples/``): sizes and
  constants (0, 1, odd, 10⁹, negative), non-UTF-8 bytes, truncation, deep nesting, deleted lines.
  :func:`check_program` runs the ``polyfuse`` command on it and accepts exit 0, or exit 1 with
  exactly one ``polyfuse: error:`` line — no traceback, no internal error, no hang.

``python -m polyfuse.oracle.fuzz --minutes N`` runs a campaign and writes every failure (the
model or program, and a ``repro.sh`` with the command) under a directory it prints.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples"
#: dimensions the generator draws from: 1s (broadcast), powers of two and odd primes
DIMS = (1, 1, 2, 3, 4, 5, 7, 8, 13)
OPSET = 17


# ----------------------------------------------------------------------------------------------
# Random ONNX models
# ----------------------------------------------------------------------------------------------


class _Graph:
    """A graph under construction: the tensors available so far and the nodes that made them."""

    def __init__(self, rng: random.Random):
        from onnx import TensorProto, helper

        self.rng = rng
        self.helper = helper
        self.float = TensorProto.FLOAT
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.inputs: list[Any] = []
        self.tensors: list[tuple[str, tuple[int, ...]]] = []
        self.consumed: set[str] = set()
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def input(self, shape: tuple[int, ...]) -> str:
        name = f"input{len(self.inputs)}"
        self.inputs.append(self.helper.make_tensor_value_info(name, self.float, list(shape)))
        self.tensors.append((name, shape))
        return name

    def const(self, array: np.ndarray, prefix: str = "w") -> str:
        from onnx import numpy_helper

        name = self.name(prefix)
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def weight(self, shape: tuple[int, ...]) -> str:
        data = np.asarray([self.rng.uniform(-1, 1) for _ in range(int(np.prod(shape)))],
                          dtype=np.float32).reshape(shape)
        return self.const(data)

    def node(self, op: str, ins: list[str], shape: tuple[int, ...], **attrs: Any) -> str:
        out = self.name("t")
        # PyTorch-export style names: /block/Op_k
        self.nodes.append(self.helper.make_node(op, ins, [out], name=f"/block{self.count}/{op}",
                                                **attrs))
        self.consumed.update(ins)
        self.tensors.append((out, shape))
        return out


def _broadcast_partner(g: _Graph, shape: tuple[int, ...]) -> str:
    """A second operand for an element-wise op: an earlier tensor of the same shape (diamond,
    residual), the tensor itself, or a constant broadcast over some dimensions."""
    same = [n for n, s in g.tensors if s == shape]
    r = g.rng.random()
    if same and r < 0.5:
        return g.rng.choice(same)
    bshape = tuple(d if g.rng.random() < 0.5 else 1 for d in shape)
    k = g.rng.randrange(0, len(bshape) + 1)
    return g.weight(bshape[k:] if g.rng.random() < 0.3 else bshape)


def _step(g: _Graph, x: str, shape: tuple[int, ...]) -> tuple[str, tuple[int, ...]]:
    rng = g.rng
    rank = len(shape)
    kinds = ["unary"] * 4 + ["binary"] * 4 + ["transpose", "reshape", "slice", "concat",
                                              "softmax", "reduce", "layernorm", "gather"]
    if rank >= 1:
        kinds += ["matmul"] * 2
    kind = rng.choice(kinds)
    if kind == "unary":
        op = rng.choice(["Relu", "Sigmoid", "Tanh", "Neg", "Abs", "Erf", "Exp", "Sqrt"])
        if op in ("Exp", "Sqrt"):  # keep values finite and real: Exp of Tanh, Sqrt of Abs
            pre = "Tanh" if op == "Exp" else "Abs"
            x = g.node(pre, [x], shape)
        return g.node(op, [x], shape), shape
    if kind == "binary":
        op = rng.choice(["Add", "Sub", "Mul", "Max", "Min", "Add", "Mul"])
        other = _broadcast_partner(g, shape)
        ins = [x, other] if rng.random() < 0.7 else [other, x]
        return g.node(op, ins, shape), shape
    if kind == "transpose" and rank >= 2:
        perm = list(range(rank))
        rng.shuffle(perm)
        return g.node("Transpose", [x], tuple(shape[p] for p in perm), perm=perm), \
            tuple(shape[p] for p in perm)
    if kind == "reshape" and rank >= 2:
        k = rng.randrange(rank - 1)
        new = shape[:k] + (shape[k] * shape[k + 1],) + shape[k + 2:]
        target = g.const(np.asarray(new, dtype=np.int64), "shape")
        return g.node("Reshape", [x, target], new), new
    if kind == "slice" and rank >= 1:
        axis = rng.randrange(rank)
        if shape[axis] >= 2:
            start = rng.randrange(shape[axis] - 1)
            end = rng.randrange(start + 1, shape[axis] + 1)
            new = shape[:axis] + (end - start,) + shape[axis + 1:]
            args = [g.const(np.asarray([v], dtype=np.int64), "s") for v in (start, end, axis)]
            return g.node("Slice", [x] + args, new), new
    if kind == "concat" and rank >= 1:
        axis = rng.randrange(rank)
        same = [n for n, s in g.tensors if s == shape]
        other = rng.choice(same) if same else x
        new = shape[:axis] + (2 * shape[axis],) + shape[axis + 1:]
        return g.node("Concat", [x, other], new, axis=axis), new
    if kind == "softmax" and rank >= 1:
        return g.node("Softmax", [x], shape, axis=rng.choice([-1, rank - 1])), shape
    if kind == "reduce" and rank >= 1:
        axis = rng.randrange(rank)
        new = shape[:axis] + (1,) + shape[axis + 1:]
        return g.node("ReduceMean", [x], new, axes=[axis], keepdims=1), new
    if kind == "layernorm" and rank >= 1:
        scale, bias = g.weight(shape[-1:]), g.weight(shape[-1:])
        return g.node("LayerNormalization", [x, scale, bias], shape, axis=-1), shape
    if kind == "gather" and rank >= 1:
        axis = rng.randrange(rank)
        n = rng.choice([1, 2, 3])
        idx = np.asarray([rng.randrange(-shape[axis], shape[axis]) for _ in range(n)],
                         dtype=np.int64)
        new = shape[:axis] + (n,) + shape[axis + 1:]
        return g.node("Gather", [x, g.const(idx, "idx")], new, axis=axis), new
    if kind == "matmul" and rank >= 1:
        k = shape[-1]
        n = rng.choice(DIMS[2:])
        new = shape[:-1] + (n,)
        out = g.node("MatMul", [x, g.weight((k, n))], new)
        if rng.random() < 0.5:  # bias, as exporters write it
            out = g.node("Add", [out, g.weight((n,))], new)
        return out, new
    return g.node("Relu", [x], shape), shape


def random_model(seed: int, *, max_nodes: int = 8) -> Any:
    """A random valid ONNX model (``ModelProto``), reproducible from ``seed``."""
    import onnx
    from onnx import helper

    rng = random.Random(seed)
    g = _Graph(rng)
    rank = rng.choice([1, 2, 2, 3, 3])
    g.input(tuple(rng.choice(DIMS) for _ in range(rank)))
    if rng.random() < 0.3:
        g.input(g.tensors[0][1])
    target = rng.randint(2, max_nodes)
    while len(g.nodes) < target:
        # mostly extend the newest tensor (chains), sometimes an older one (fan-out, diamonds)
        pool = g.tensors if rng.random() < 0.3 else g.tensors[-1:]
        x, shape = rng.choice(pool)
        if int(np.prod(shape)) > 4096:
            x, shape = min(g.tensors, key=lambda t: int(np.prod(t[1])))
        _step(g, x, shape)
    outs = [(n, s) for n, s in g.tensors
            if n not in g.consumed and not n.startswith("input")] or [g.tensors[-1]]
    graph = helper.make_graph(
        g.nodes, f"fuzz{seed}", g.inputs,
        [helper.make_tensor_value_info(n, g.float, list(s)) for n, s in outs],
        initializer=g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="polyfuse-fuzz")
    model.ir_version = min(model.ir_version, 8)
    onnx.checker.check_model(model)
    return model


# ----------------------------------------------------------------------------------------------
# Checking one case
# ----------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What happened to one case: ``ok``, ``refused`` (a clean error), ``mismatch``,
    ``internal`` (a traceback or internal error), ``unclean`` (error not on one line) or
    ``stall`` (time budget exceeded)."""

    case: str
    kind: str
    seconds: float
    detail: str = ""
    files: list[str] = field(default_factory=list)
    command: str = ""

    @property
    def failed(self) -> bool:
        return self.kind not in ("ok", "refused")


def _fuse_verify_job(path: str, out: str, progress: Optional[Callable] = None) -> dict:
    from polyfuse.apps.onnx_run import fuse_onnx
    from polyfuse.report import write_outputs

    result = fuse_onnx(path, verify=True, progress=progress)
    write_outputs(result, out)
    v = result.verified or {}
    return {"ok": bool(v.get("ok")), "max_abs_err": v.get("max_abs_err"),
            "before": result.plan.launches_before, "after": result.fused.launches_after,
            "references": {k: (r or {}).get("ok") for k, r in
                           (v.get("references") or {}).items()}}


#: a case that waits (uses no CPU) still counts as a stall after this many times its budget
WALL_FACTOR = 4.0


def check_model(path: str, *, timeout: float = 120.0) -> Outcome:
    """Fuse and verify one ONNX model in a worker process under ``timeout`` seconds of CPU
    time (``WALL_FACTOR`` times that of wall-clock time)."""
    from polyfuse.core.program import PolyfuseError
    from polyfuse.core.watchdog import BudgetExceeded, call_with_budget

    out = tempfile.mkdtemp(prefix="polyfuse-fuzz-out-")
    cmd = (f"{sys.executable} -m polyfuse fuse {path} --out {path}.out --verify "
           f"--no-timing --timeout {timeout:g}")
    start = time.monotonic()
    try:
        res = call_with_budget(_fuse_verify_job, (path, out), timeout=timeout * WALL_FACTOR,
                               cpu_timeout=timeout, label=path)
    except BudgetExceeded as err:
        return Outcome(path, "stall", time.monotonic() - start, err.message, [path], cmd)
    except PolyfuseError as err:
        kind = "internal" if "internal error" in err.message else "refused"
        return Outcome(path, kind, time.monotonic() - start, str(err), [path], cmd)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    kind = "ok" if res["ok"] else "mismatch"
    return Outcome(path, kind, time.monotonic() - start, json.dumps(res), [path], cmd)


def check_program(kernels: str, host: str, *, params: Optional[dict[str, int]] = None,
                  verify: bool = True, timeout: float = 120.0) -> Outcome:
    """Run ``polyfuse fuse KERNELS --host HOST [--verify]`` and judge its exit and stderr; a
    stall is more than ``timeout`` seconds of CPU time (``WALL_FACTOR`` times that of wall
    time), so a loaded machine does not count as polyfuse hanging."""
    out = tempfile.mkdtemp(prefix="polyfuse-fuzz-out-")
    args = [sys.executable, "-m", "polyfuse", "fuse", kernels, "--host", host, "--out", out]
    args += [f"--param={k}={v}" for k, v in (params or {}).items()]
    args += ["--verify"] if verify else []
    cmd = " ".join(args).replace(f"--out {out}", f"--out {kernels}.out")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(__file__).resolve().parent.parent.parent)]
        + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    start = time.monotonic()
    try:
        proc, over = _run_cpu_bounded(args, env, timeout)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if over:
        return Outcome(kernels, "stall", time.monotonic() - start, over, [kernels, host], cmd)
    secs = time.monotonic() - start
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error:" in ln]
    if "Traceback" in proc.stderr or any("internal error" in ln for ln in lines):
        return Outcome(kernels, "internal", secs, "\n".join(lines[-3:]), [kernels, host], cmd)
    if proc.returncode == 0:
        return Outcome(kernels, "ok", secs, "", [kernels, host], cmd)
    if proc.returncode == 1 and len(errors) == 1 and errors[0].startswith("polyfuse: error: "):
        kind = "mismatch" if "does not match" in errors[0] else "refused"
        return Outcome(kernels, kind, secs, errors[0], [kernels, host], cmd)
    return Outcome(kernels, "unclean", secs, f"exit {proc.returncode}: " + "\n".join(lines[-3:]),
                   [kernels, host], cmd)


def _run_cpu_bounded(args: list[str], env: dict[str, str], timeout: float
                     ) -> tuple[subprocess.CompletedProcess, str]:
    """Run a command; kill its process group past ``timeout`` CPU seconds (of the whole tree)
    or ``WALL_FACTOR * timeout`` wall seconds.  Returns the process and why it was stopped."""
    import signal

    from polyfuse.core.watchdog import tree_cpu_seconds

    start = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(args, stdout=out, stderr=err, env=env, start_new_session=True)
        over = ""
        while p.poll() is None:
            try:
                p.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                pass
            if tree_cpu_seconds(p.pid) > timeout:
                over = f"more than {timeout:g} s of CPU time"
            elif time.monotonic() - start > WALL_FACTOR * timeout:
                over = f"no answer in {WALL_FACTOR * timeout:g} s (wall clock)"
            if over:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess(args, p.returncode,
                                           out.read().decode("utf-8", "replace"),
                                           err.read().decode("utf-8", "replace"))
    return done, over


# ----------------------------------------------------------------------------------------------
# Mutating OpenCL programs
# ----------------------------------------------------------------------------------------------


def _example_programs() -> list[Path]:
    return sorted(p for p in EXAMPLES.iterdir()
                  if (p / "kernels.cl").is_file() and (p / "host.c").is_file())


def _mutate_text(rng: random.Random, kernels: bytes, host: bytes) -> tuple[bytes, bytes, str]:
    """One random mutation of the kernel or host source; returns both and a description."""
    import re

    which = rng.choice(["kernels", "host"])
    data = kernels if which == "kernels" else host
    text = data.decode("latin-1")
    kind = rng.choice(["define", "literal", "encoding", "truncate", "nesting", "delete-line",
                       "define", "literal"])
    desc = kind
    if kind == "define":
        defs = list(re.finditer(r"(#define\s+\w+\s+)(\d+)", text))
        if defs:
            m = rng.choice(defs)
            val = rng.choice(["0", "1", "3", "7", "1000000000", "-1", "(0)", "65", "4097"])
            text = text[:m.start(2)] + val + text[m.end(2):]
            desc = f"define {m.group(1).split()[1]} = {val}"
    elif kind == "literal":
        lits = list(re.finditer(r"(?<![\w.])(\d+)(?![\w.])", text))
        if lits:
            m = rng.choice(lits)
            val = rng.choice(["0", "1", "2", "3", "7", "13", "1000000000", "2147483647"])
            text = text[:m.start()] + val + text[m.end():]
            desc = f"literal {m.group()} -> {val} at offset {m.start()}"
    elif kind == "encoding":
        pos = text.find("*/")
        pos = pos if pos >= 0 else 0
        junk = rng.choice([b"\xe9", b"\xff\xfe", b"\xc3\x28", b"\x80"]).decode("latin-1")
        text = text[:pos] + junk + text[pos:]
        desc = f"non-UTF-8 bytes at offset {pos}"
    elif kind == "truncate":
        pos = rng.randrange(len(text) // 4, len(text))
        text = text[:pos]
        desc = f"truncated at {pos}"
    elif kind == "nesting" and which == "kernels":
        stmts = list(re.finditer(r"=\s*([^;=]+);", text))
        if stmts:
            m = rng.choice(stmts)
            depth = rng.choice([10, 60, 150, 2000])
            text = (text[:m.start(1)] + "(" * depth + m.group(1) + ")" * depth + text[m.end(1):])
            desc = f"nesting {depth} at offset {m.start(1)}"
    elif kind == "delete-line":
        lines = text.split("\n")
        k = rng.randrange(len(lines))
        desc = f"deleted line {k + 1}: {lines[k].strip()[:40]}"
        del lines[k]
        text = "\n".join(lines)
    data = text.encode("latin-1")
    if which == "kernels":
        return data, host, f"kernels.cl: {desc}"
    return kernels, data, f"host.c: {desc}"


def mutate_program(seed: int, out_dir: Path) -> tuple[Path, Path, str, dict[str, int]]:
    """A mutated copy of a bundled example, written under ``out_dir``:
    (kernels path, host path, description, ``--param`` values)."""
    rng = random.Random(seed)
    src = rng.choice(_example_programs())
    kernels, host = (src / "kernels.cl").read_bytes(), (src / "host.c").read_bytes()
    what = []
    for _ in range(rng.choice([1, 1, 2])):
        kernels, host, desc = _mutate_text(rng, kernels, host)
        what.append(desc)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "kernels.cl").write_bytes(kernels)
    (out_dir / "host.c").write_bytes(host)
    params: dict[str, int] = {}
    if b"argv" in host and rng.random() < 0.8:
        params["n"] = rng.choice([1, 7, 64, 100, 1000, 10**9])
    return out_dir / "kernels.cl", out_dir / "host.c", f"{src.name}: " + "; ".join(what), params


# ----------------------------------------------------------------------------------------------
# Campaigns
# ----------------------------------------------------------------------------------------------


@dataclass
class Campaign:
    """Counts of a fuzzing run and the failures (each with files and a command to rerun)."""

    directory: str
    models: int = 0
    programs: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    failures: list[dict] = field(default_factory=list)
    slowest: float = 0.0
    #: refusals that were a native crash (a signal) reported as one line
    native_crashes: int = 0

    def record(self, outcome: Outcome, what: str) -> None:
        self.counts[outcome.kind] = self.counts.get(outcome.kind, 0) + 1
        if outcome.kind == "refused" and "in native code" in outcome.detail:
            self.native_crashes += 1
        self.slowest = max(self.slowest, outcome.seconds)
        if outcome.failed:
            entry = {**asdict(outcome), "what": what}
            self.failures.append(entry)
            case_dir = Path(self.directory) / f"failure{len(self.failures):03d}"
            case_dir.mkdir(parents=True, exist_ok=True)
            files = []
            for f in outcome.files:
                dst = case_dir / Path(f).name
                shutil.copy(f, dst)
                files.append(str(dst))
            cmd = outcome.command
            for f, dst in zip(outcome.files, files):
                cmd = cmd.replace(f, dst)
            first = outcome.detail.splitlines()[0] if outcome.detail else ""
            (case_dir / "repro.sh").write_text(f"#!/bin/sh\n# {what}\n# {outcome.kind}: "
                                               f"{first}\n{cmd}\n")
            with open(Path(self.directory) / "failures.jsonl", "a", encoding="utf-8") as fh:
                fh.write(json.dumps({**entry, "files": files, "command": cmd}) + "\n")

    def summary(self) -> str:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        return (f"{self.models} models, {self.programs} programs: {kinds} ({self.native_crashes} "
                f"native crashes reported as one line); slowest case "
                f"{self.slowest:.1f} s; failures under {self.directory}")


def _run_case(k: int, seed: int, cases: Path, timeout: float, max_nodes: int,
              programs_every: int) -> tuple[Outcome, str, bool]:
    """Case ``k`` of the campaign with ``seed``: (outcome, description, whether a model)."""
    import onnx

    case_seed = seed * 1_000_003 + k
    if k % programs_every == programs_every - 1:
        kernels, host, what, params = mutate_program(case_seed, cases / f"p{case_seed}")
        return check_program(str(kernels), str(host), params=params, timeout=timeout), what, \
            False
    path = cases / f"m{case_seed}.onnx"
    onnx.save(random_model(case_seed, max_nodes=max_nodes), str(path))
    return check_model(str(path), timeout=timeout), \
        f"random_model({case_seed}, max_nodes={max_nodes})", True


def run_campaign(*, seconds: float, seed: int = 0, out_dir: Optional[str] = None,
                 timeout: float = 120.0, max_nodes: int = 8, programs_every: int = 3,
                 verbose: bool = True, limit: Optional[int] = None, jobs: int = 1) -> Campaign:
    """Alternate random ONNX models and mutated programs until ``seconds`` (or ``limit`` cases),
    ``jobs`` cases at a time.  Case ``k`` depends only on ``seed`` and ``k``, so a campaign
    split over runs with different seeds, or over more jobs, tests the same cases."""
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    out = Path(out_dir or tempfile.mkdtemp(prefix="polyfuse-fuzz-"))
    out.mkdir(parents=True, exist_ok=True)
    camp = Campaign(str(out))
    cases = out / "cases"
    cases.mkdir(exist_ok=True)
    deadline = time.monotonic() + seconds
    k = 0
    # each case runs in its own worker process or subprocess: threads only wait on them
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        running: dict[Any, int] = {}
        while True:
            while len(running) < max(1, jobs) and time.monotonic() < deadline and (
                    limit is None or k < limit):
                running[pool.submit(_run_case, k, seed, cases, timeout, max_nodes,
                                    programs_every)] = k
                k += 1
            if not running:
                break
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in sorted(done, key=running.__getitem__):
                index = running.pop(fut)
                outcome, what, is_model = fut.result()
                camp.models += is_model
                camp.programs += not is_model
                camp.record(outcome, what)
                if verbose:
                    shown = outcome.failed or "in native code" in outcome.detail
                    print(f"[{index}] {outcome.kind:8s} {outcome.seconds:6.1f}s  {what}"
                          + (f"\n      {outcome.detail.splitlines()[0][:200]}"
                             if shown and outcome.detail else ""), flush=True)
    (out / "summary.json").write_text(json.dumps(
        {"seed": seed, "models": camp.models, "programs": camp.programs,
         "counts": camp.counts, "native_crashes_reported": camp.native_crashes,
         "slowest_s": camp.slowest, "failures": len(camp.failures)}, indent=2))
    return camp


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m polyfuse.oracle.fuzz",
                                     description="Differential fuzzing campaign of polyfuse.")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="directory for failures (default: a new temp dir)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="CPU seconds per case before it counts as a stall (a case that "
                             "waits counts after 4x that of wall-clock time)")
    parser.add_argument("--max-nodes", type=int, default=8)
    parser.add_argument("--programs-every", type=int, default=3,
                        help="every k-th case is a mutated OpenCL program")
    parser.add_argument("--cases", type=int, default=None,
                        help="stop after this many cases (else when the minutes are up)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="cases run at a time (each in its own process)")
    args = parser.parse_args(argv)
    camp = run_campaign(seconds=args.minutes * 60, seed=args.seed, out_dir=args.out,
                        timeout=args.timeout, max_nodes=args.max_nodes,
                        programs_every=args.programs_every, limit=args.cases, jobs=args.jobs)
    print(camp.summary())
    return 1 if camp.failures else 0


if __name__ == "__main__":
    sys.exit(main())
