"""The ``polyfuse`` command.

Machine-readable output (``--json``) goes to stdout alone; progress, logs and warnings go to
stderr.  Bad input is reported as one line ``file:line: message`` on stderr with exit status 1
(2 for usage errors, as argparse does); ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Optional

from polyfuse.program import PolyfuseError

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"


def _parse_params(items: Sequence[str]) -> dict[str, int]:
    params: dict[str, int] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier():
            raise _UsageError(f"--param expects NAME=VALUE, got {item!r}")
        try:
            params[name] = int(value, 0)
        except ValueError:
            raise _UsageError(f"--param {name}: {value!r} is not an integer") from None
    return params


class _UsageError(Exception):
    pass


def _fmt(value: object) -> str:
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(_fmt(v) for v in value) + ")"
    return "-" if value is None else str(value)


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_uar_report(data: dict) -> str:
    """The readable form of ``UAR.to_json()``: a launch table and an edge table."""
    out = [f"{len(data['launches'])} launches, {len(data['edges'])} dependence edges", ""]
    out.append(
        _table(
            ["id", "kernel", "global_size", "local_size", "host_loops"],
            [
                [
                    launch["id"],
                    launch["kernel"],
                    launch["global_size"],
                    launch["local_size"],
                    ", ".join(_fmt_loop(h) for h in launch["host_loops"]) or "-",
                ]
                for launch in data["launches"]
            ],
        )
    )
    out.append("")
    rows = []
    for e in data["edges"]:
        cond = "; ".join(f"{k} when {v}" for k, v in (e.get("conditions") or {}).items())
        rows.append(
            [
                f"{e['src']}->{e['dst']}",
                f"{e['src_kernel'] or 'host'}->{e['dst_kernel'] or 'host'}",
                e["array"],
                e["kind"],
                e["width"] + (" (host)" if e.get("host") else ""),
                "yes" if e.get("loop_carried") else "no",
                cond or "-",
            ]
        )
    out.append(
        _table(["edge", "kernels", "array", "kind", "width", "loop-carried", "conditions"], rows)
    )
    witnesses = [e for e in data["edges"] if e.get("witness")]
    if witnesses:
        out.append("")
        out.append("witnesses of global edges:")
        for e in witnesses:
            w = e["witness"]
            text = w.get("text") if isinstance(w, dict) else str(w)
            out.append(f"  {e['src']}->{e['dst']} {e['array']} {e['kind']}: {text}")
    return "\n".join(out)


def _fmt_loop(loop: object) -> str:
    if isinstance(loop, dict):
        return f"{loop.get('iterator')} in [{loop.get('lower')}, {loop.get('upper')})"
    return str(loop)


def cmd_analyze(args: argparse.Namespace) -> int:
    from polyfuse.frontend.host import load_opencl
    from polyfuse.uar import build_uar

    program = load_opencl(args.kernels, host=args.host, params=_parse_params(args.param))
    _progress(args, f"analyzing {len(program.launches)} launches")
    data = build_uar(program).to_json()
    if args.json:
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(format_uar_report(data))
    return 0


def cmd_devices(args: argparse.Namespace) -> int:
    import pyopencl as cl

    rows = []
    for pi, platform in enumerate(cl.get_platforms()):
        for di, dev in enumerate(platform.get_devices()):
            rows.append(
                [
                    f"{pi}:{di}",
                    platform.name,
                    dev.name.strip(),
                    cl.device_type.to_string(dev.type),
                    dev.max_compute_units,
                    dev.max_work_group_size,
                    f"{dev.local_mem_size // 1024} KiB",
                    f"{dev.global_mem_size // 2**20} MiB",
                ]
            )
    if args.json:
        keys = ["id", "platform", "device", "type", "compute_units", "max_work_group_size",
                "local_mem", "global_mem"]
        json.dump([dict(zip(keys, r)) for r in rows], sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif not rows:
        raise PolyfuseError("no OpenCL device found (install pocl-binary-distribution)")
    else:
        print(_table(["id", "platform", "device", "type", "CUs", "max WG", "local", "global"],
                     rows))
        ctx = os.environ.get("PYOPENCL_CTX")
        print(f"\ndefault: {ctx if ctx else '0:0'} (set PYOPENCL_CTX or --device to choose)")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Fuse the bundled BERT QKV graph (SIRIUS' motivating example), verify, print the plan."""
    from polyfuse.onnx_run import fuse_onnx
    from polyfuse.pipeline import write_outputs

    model = EXAMPLES_DIR / "models" / "bert_qkv.onnx"
    if not model.is_file():
        raise PolyfuseError(f"bundled model not found: {model}")
    _progress(args, f"demo: fusing {model.name} (BERT QKV: 3 x (MatMul + Add + Reshape + "
                    "Transpose)) and verifying it against onnxruntime and the unfused program")
    result = fuse_onnx(str(model), verify=True,
                       progress=None if args.quiet else (lambda m: _progress(args, m)))
    paths = write_outputs(result, args.out)
    plan = result.plan
    v = plan.verified or {}
    print(_table(["model", "ONNX ops", "launches before", "launches after", "max abs err",
                  "verified against"],
                 [[model.stem, 12, plan.launches_before, plan.launches_after,
                   f"{v.get('max_abs_err', 0):.2e}",
                   f"{v.get('reference', '-')}: {'ok' if v.get('ok') else 'MISMATCH'}"]]))
    print()
    print(paths["report"].read_text())
    print(f"plan: {paths['plan']}\nfused kernel: {paths['source']}")
    return 0 if result.ok else 1


def cmd_fuse(args: argparse.Namespace) -> int:
    onnx_models = [m for m in args.inputs if m.endswith(".onnx")]
    if onnx_models:
        if len(onnx_models) != len(args.inputs) or args.host:
            raise _UsageError("fuse takes either ONNX models or one KERNELS.cl with --host")
        return _fuse_onnx_batch(args, onnx_models)
    if len(args.inputs) != 1:
        raise _UsageError("fuse takes one KERNELS.cl (with --host HOST.c)")
    params = _parse_params(args.param)
    job_args = (args.inputs[0], args.host, params, args.out, args.orchestration, args.verify,
                args.tune)
    if args.timeout is not None or args.stage_timeout is not None:
        from polyfuse.watchdog import call_with_budget

        row, ok, paths = call_with_budget(
            _fuse_opencl_job, job_args, {"announce_loading": True}, timeout=args.timeout,
            stage_timeout=args.stage_timeout,
            label=args.inputs[0], on_stage=None if args.quiet else (lambda m: _progress(args, m)))
    else:
        row, ok, paths = _fuse_opencl_job(
            *job_args, progress=None if args.quiet else (lambda m: _progress(args, m)))
    print(_table(["program", "launches before", "launches after", "max abs err", "verified"],
                 [row]))
    _progress(args, f"wrote {paths['plan']}, {paths['source']}, {paths['report']}")
    if not ok:
        raise PolyfuseError(f"{args.inputs[0]}: the fused program does not match the original "
                            f"(see {paths['report']})")
    return 0


def _fuse_opencl_job(kernels: str, host: Optional[str], params: dict[str, int], out: str,
                     orchestration: str, verify: bool, tune: bool,
                     progress: Optional[Callable[[str], None]] = None,
                     announce_loading: bool = False) -> tuple[list[str], bool, dict[str, Path]]:
    """Load, fuse and write one OpenCL program: (summary row, verified ok, written paths).
    Module level so that a time-budgeted worker process can run it (and name its stages,
    ``loading the program`` included)."""
    from polyfuse.frontend.host import load_opencl
    from polyfuse.pipeline import fuse_program, summary_row, write_outputs

    if progress is not None and announce_loading:
        progress("loading the program")
    program = load_opencl(kernels, host=host, params=params)
    result = fuse_program(program, params=params, orchestration=orchestration, verify=verify,
                          tune=tune, progress=progress)
    paths = write_outputs(result, out)
    return summary_row(Path(kernels).parent.name or program.name, result), result.ok, paths


def _fuse_onnx_batch(args: argparse.Namespace, models: list[str]) -> int:
    from polyfuse.batch import SUMMARY_HEADERS, fuse_models

    missing = [m for m in models if not Path(m).is_file()]
    for m in missing:
        print(f"polyfuse: error: {m}: no such file", file=sys.stderr)
    present = [m for m in models if m not in missing]
    summaries = fuse_models(present, args.out, jobs=max(1, args.jobs), verify=args.verify,
                            tune=args.tune, params=_parse_params(args.param),
                            timing=not args.no_timing, timeout=args.timeout,
                            stage_timeout=args.stage_timeout)
    print(_table(SUMMARY_HEADERS, [s.row() for s in summaries]
                 + [[Path(m).stem, "-", "-", "-", "-", "-", "-", "-", "FAILED: no such file"]
                    for m in missing]))
    failed = [s for s in summaries if not s.ok]
    for s in failed:
        reason = s.error or "the fused model does not match its reference"
        print(f"polyfuse: error: {s.model}: {reason}", file=sys.stderr)
    return 1 if failed or missing else 0


def cmd_run(args: argparse.Namespace) -> int:
    import numpy as np

    from polyfuse.onnx_run import run_onnx

    if not args.model.endswith(".onnx"):
        raise _UsageError("run takes an ONNX model (MODEL.onnx)")
    if not Path(args.model).is_file():
        raise PolyfuseError(f"{args.model}: no such file")
    try:
        with np.load(args.inputs) as npz:
            inputs = {k: npz[k] for k in npz.files}
    except FileNotFoundError:
        raise PolyfuseError(f"{args.inputs}: no such file") from None
    except (OSError, ValueError) as err:
        raise PolyfuseError(f"{args.inputs}: not a readable .npz file ({err})") from None
    _progress(args, f"running {'unfused' if args.unfused else 'fused'} {args.model}")
    outputs = run_onnx(args.model, inputs, fused=not args.unfused,
                       params=_parse_params(args.param))
    np.savez(args.save, **outputs)
    _progress(args, f"wrote {', '.join(outputs)} to {args.save}")
    return 0


def cmd_parallelize(args: argparse.Namespace) -> int:
    from polyfuse.autopar import parallelize_file, summary_text

    defines: dict[str, Optional[str]] = {}
    for d in args.define:
        name, sep, value = d.partition("=")
        if not name.isidentifier():
            raise _UsageError(f"-D expects NAME[=VALUE], got {d!r}")
        defines[name] = value if sep else None
    _progress(args, f"parallelizing {args.file}")
    result = parallelize_file(args.file, include_dirs=args.include, defines=defines,
                              function=args.function, out_dir=args.out, report=True)
    if args.report:
        print(summary_text(result))
    _progress(args, f"wrote host C, kernels and report.json to {args.out}")
    return 0


def cmd_count(args: argparse.Namespace) -> int:
    from polyfuse.perf.counts import count_report, format_count_table

    _progress(args, "counting with barvinok")
    report = count_report(args.kernels, host=args.host, kernel=args.kernel,
                          params=_parse_params(args.param), subgroup_size=args.subgroup_size,
                          granularity=args.granularity)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(format_count_table(report))
    return 0


def _roofline_points(args: argparse.Namespace) -> list:
    """Launches of the given program (and of its fused version with --fused) as points."""
    from polyfuse.perf.roofline import kernel_points

    params = _parse_params(args.param)
    if args.model:
        from polyfuse.frontend.onnx import load_onnx

        program = load_onnx(args.model, params=params)
    else:
        from polyfuse.frontend.host import load_opencl

        program = load_opencl(args.program, host=args.host, params=params)
    _progress(args, f"placing the {len(program.launches)} launches of {program.name}")
    points = kernel_points(program, params=params)
    if args.fused:
        from polyfuse.pipeline import fuse_program

        fused = fuse_program(program, params=params).fused.program
        points += kernel_points(fused, params=params, label="fused:")
    return points


def cmd_roofline(args: argparse.Namespace) -> int:
    from polyfuse.perf.roofline import run_roofline

    progress = None if args.quiet else (lambda msg: print(f"polyfuse: {msg}", file=sys.stderr))
    points = _roofline_points(args) if (args.program or args.model) else []
    info = run_roofline(args.out, device=args.device, quick=args.quick,
                        max_bytes=args.max_mib * 2**20 if args.max_mib else None,
                        progress=progress, kernels=points)
    if args.json:
        json.dump(info, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(info["summary"])
        print(f"wrote {info['json']} and {info['png']}")
    return 0


def _progress(args: argparse.Namespace, message: str) -> None:
    if not getattr(args, "quiet", False):
        print(f"polyfuse: {message}", file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="polyfuse",
        description="Whole-program polyhedral analysis and kernel fusion of OpenCL programs.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument("--device", help="OpenCL device as PLATFORM:DEVICE (or PYOPENCL_CTX)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("analyze", help="the UAR (dependences with widths) of an OpenCL program")
    p.add_argument("kernels", help="OpenCL C file with the __kernel functions")
    p.add_argument("--host", help="C host program (without it: each kernel launched once)")
    p.add_argument("--json", action="store_true", help="JSON on stdout")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="fix a symbolic host value (e.g. one read from argv)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_analyze)

    p = sub.add_parser("devices", help="list OpenCL devices")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_devices)

    p = sub.add_parser("fuse", help="fuse kernel launches; write plan.json, fused.cl, report.md")
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="ONNX models (MODEL.onnx ...), or one OpenCL C file with --host")
    p.add_argument("--host", help="C host program launching the kernels")
    p.add_argument("--out", required=True,
                   help="output directory (ONNX: one subdirectory per model)")
    p.add_argument("--verify", action="store_true",
                   help="run fused and unfused on random inputs and compare")
    p.add_argument("--tune", action="store_true",
                   help="time the orchestration variants and keep the fastest")
    p.add_argument("--jobs", type=int, default=1,
                   help="ONNX batches: fuse this many models in parallel processes")
    p.add_argument("--no-timing", action="store_true",
                   help="ONNX batches: skip timing unfused vs fused")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="time budget per model (or program): stop it and name the stage")
    p.add_argument("--stage-timeout", type=float, metavar="SECONDS",
                   help="time budget per pipeline stage (loading, planning, verifying, ...)")
    p.add_argument("--orchestration", default="auto",
                   choices=["auto", "vertical", "horizontal"],
                   help="how independent fragments are combined (default: auto)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="fix a symbolic host value (e.g. one read from argv)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_fuse)

    p = sub.add_parser("run", help="run an ONNX model (fused or not) on the OpenCL device")
    p.add_argument("model", metavar="MODEL.onnx")
    p.add_argument("--inputs", required=True, metavar="IN.npz", help="graph inputs by name")
    p.add_argument("--save", required=True, metavar="OUT.npz", help="graph outputs by name")
    p.add_argument("--unfused", action="store_true", help="one launch per node, no fusion")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="value of a dynamic dimension")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("parallelize",
                       help="C loop nests -> host C + OpenCL kernels (PPCG-style)")
    p.add_argument("file", metavar="FILE.c")
    p.add_argument("-I", dest="include", action="append", default=[], metavar="DIR",
                   help="include directory for the preprocessor")
    p.add_argument("-D", dest="define", action="append", default=[], metavar="NAME[=V]",
                   help="preprocessor definition")
    p.add_argument("--function", help="only this function")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--report", action="store_true",
                   help="print the per-loop report (parallel / sequential / reduction)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_parallelize)

    p = sub.add_parser("count", help="exact symbolic counts of ops, memory accesses, barriers")
    p.add_argument("kernels", help="OpenCL C file")
    p.add_argument("--host", help="C host program: counts per launch at the host's sizes")
    p.add_argument("--kernel", help="only this kernel")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="fix a symbolic value (kernel scalar or host value)")
    p.add_argument("--subgroup-size", type=int, help="sub-group size (default: the device's)")
    p.add_argument("--granularity", choices=["work-item", "sub-group", "work-group"],
                   help="one granularity for every count (default: per seed 004)")
    p.add_argument("--json", action="store_true", help="JSON on stdout")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_count)

    p = sub.add_parser("roofline", help="measure the empirical roofline of the OpenCL device")
    p.add_argument("--out", required=True, help="directory for roofline.json and roofline.png")
    p.add_argument("--quick", action="store_true", help="fewer, smaller measurements")
    p.add_argument("--max-mib", type=int, help="largest working set to measure, in MiB")
    p.add_argument("--program", metavar="KERNELS.cl",
                   help="place this program's kernels on the roofline (with --host)")
    p.add_argument("--host", help="C host program of --program")
    p.add_argument("--model", metavar="MODEL.onnx", help="place an ONNX model's kernels")
    p.add_argument("--fused", action="store_true", help="also place the fused kernels")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="fix a symbolic host value")
    p.add_argument("--json", action="store_true", help="summary as JSON on stdout")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_roofline)

    p = sub.add_parser("demo", help="fuse the bundled BERT QKV graph, verify, print the report")
    p.add_argument("--out", default="out/demo", help="output directory (default: out/demo)")
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.device:
        os.environ["PYOPENCL_CTX"] = args.device
    from polyfuse.frontend.cpp import RECURSION_LIMIT, recursion_limit

    try:
        with recursion_limit(RECURSION_LIMIT):  # deeply nested (but accepted) source code
            return args.func(args)
    except _UsageError as err:
        parser.error(str(err))
        return 2
    except PolyfuseError as err:
        if args.debug:
            traceback.print_exc()
        print(f"polyfuse: error: {err}", file=sys.stderr)
        return 1
    except FileNotFoundError as err:
        if args.debug:
            traceback.print_exc()
        print(f"polyfuse: error: {err.filename}: no such file", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("polyfuse: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of stdout went away (e.g. `polyfuse analyze --json | head`): not an error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except MemoryError:
        if args.debug:
            traceback.print_exc()
        print("polyfuse: error: out of memory (the sizes are too large for this machine; fix "
              "them with --param or use smaller inputs)", file=sys.stderr)
        return 1
    except RecursionError:
        if args.debug:
            traceback.print_exc()
        print("polyfuse: error: the input nests too deeply for polyfuse's parser and analyses",
              file=sys.stderr)
        return 1
    except Exception as err:  # a bug in polyfuse, not bad input: still one line, no traceback
        if args.debug:
            traceback.print_exc()
        first = (str(err).strip().splitlines() or [""])[0]
        print(f"polyfuse: internal error: {type(err).__name__}: {first} "
              "(rerun with --debug for the traceback and report it)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
