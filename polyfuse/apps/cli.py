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
from typing import Optional, Union

from polyfuse.core.program import KERNEL_VARIANTS, PolyfuseError, Program
from polyfuse.report.tables import format_uar_report
from polyfuse.report.tables import text_table as _table

EXAMPLES_DIR = Path(__file__).resolve().parent.parent.parent / "examples"


def _parse_params(items: Sequence[str]) -> dict[str, Union[int, float]]:
    params: dict[str, Union[int, float]] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier():
            raise _UsageError(f"--param expects NAME=VALUE, got {item!r}")
        try:
            params[name] = int(value, 0)
        except ValueError:
            try:
                params[name] = float(value)
            except ValueError:
                raise _UsageError(f"--param {name}: {value!r} is not a number") from None
    return params


def _defines(flags: list[str]) -> dict[str, Optional[str]]:
    """The ``-D NAME[=VALUE]`` flags as preprocessor definitions (None: defined without value)."""
    defines: dict[str, Optional[str]] = {}
    for d in flags:
        name, sep, value = d.partition("=")
        if not name.isidentifier():
            raise _UsageError(f"-D expects NAME[=VALUE], got {d!r}")
        defines[name] = value if sep else None
    return defines


def add_param_flag(p: argparse.ArgumentParser, help_: str) -> None:
    """The repeatable ``--param NAME=VALUE`` flag, one spelling for every command that has it."""
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help=help_)


def add_program_inputs(p: argparse.ArgumentParser,
                       param_help: str = "fix a value the host reads at run time (integer or "
                                         "float)") -> None:
    """The flags that say what OpenCL program to load (analyze, fuse, count, ...)."""
    p.add_argument("--host", action="append", default=[], metavar="HOST.c",
                   help="host program (C or C++); repeat for each file of a multi-file host")
    p.add_argument("-I", dest="include", action="append", default=[], metavar="DIR",
                   help="include directory (host and kernels)")
    p.add_argument("-D", dest="define", action="append", default=[], metavar="NAME[=VALUE]",
                   help="preprocessor definition (host and kernels)")
    p.add_argument("--args", dest="program_args", metavar='"ARGV..."',
                   help="the program's own command line (argc/argv, getopt, atoi...)")
    add_param_flag(p, param_help)
    p.add_argument("--allow-empty", action="store_true",
                   help="accept a host program that launches no kernel")
    p.add_argument("--kernel-source-override", action="store_true",
                   help="build the KERNELS.cl given here in place of the kernel source the "
                        "host reads (without it, a KERNELS.cl the host does not read is an "
                        "error)")


def _check_original_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--check-original", action="store_true",
                   help="compile the host (gcc/g++ -lOpenCL), run it with --args and check "
                        "polyfuse's unfused model against what it really computes")


def check_original(args: argparse.Namespace, program: Program,
                   progress: Optional[Callable[[str], None]] = None) -> str:
    """``--check-original``: the original program, run as written, against the unfused model
    (:mod:`polyfuse.runtime.original`); returns the one-line summary, raises on a mismatch."""
    import shlex

    from polyfuse.runtime.original import check_against_original

    if not args.host:
        raise _UsageError("--check-original needs the host program (--host)")
    if progress is not None:
        progress("checking the unfused model against the original program")
    defines = {n: (v if sep else None) for n, sep, v in (d.partition("=") for d in args.define)}
    params = {k: v for k, v in _parse_params(args.param).items() if isinstance(v, int)}
    res = check_against_original(program, args.host, argv=shlex.split(args.program_args or ""),
                                 params=params, include_dirs=args.include, defines=defines,
                                 device=args.device)
    return res.summary()


def load_program_inputs(args: argparse.Namespace, kernels: Sequence[str]) -> Program:
    """The :class:`Program` the flags of :func:`add_program_inputs` describe."""
    import shlex

    from polyfuse.frontend.host import load_opencl

    if not kernels and not args.host:
        raise _UsageError("give the kernel file(s) (KERNELS.cl) or the host program (--host)")
    defines = _defines(args.define)
    if getattr(args, "check_original", False) and args.program_args is None:
        args.program_args = ""  # the model must be the instance the original runs
    try:
        argv = shlex.split(args.program_args) if args.program_args is not None else None
    except ValueError as err:
        raise _UsageError(f"--args: {err}") from None
    queries = None
    if (getattr(args, "verify", False) or getattr(args, "measure", False)) and args.host:
        # the device that verifies the program answers the host's device queries
        from polyfuse.runtime.execute import device_queries

        queries = device_queries(args.device)
    return load_opencl(list(kernels) or None, host=list(args.host) or None,
                       params=_parse_params(args.param), include_dirs=args.include,
                       defines=defines, argv=argv, allow_empty=args.allow_empty,
                       check_params=bool(args.host),
                       kernel_source_override=args.kernel_source_override,
                       device_queries=queries)


class _UsageError(Exception):
    pass


def cmd_analyze(args: argparse.Namespace) -> int:
    from polyfuse.core.program import HostOp
    from polyfuse.uar import build_uar

    program = load_program_inputs(args, args.kernels)
    if args.check_original:
        _progress(args, check_original(args, program, lambda m: _progress(args, m)))
    _progress(args, f"analyzing {len(program.launches)} launches")
    data = build_uar(program).to_json()
    if args.json:
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sources = {op.id: f"{op.loc.file}:{op.loc.line}" if op.loc else "-"
                   for op in program.ops}
        host_ops = [(op.id, f"{op.kind}: {op.name or ''}".rstrip(": "), sources[op.id])
                    for op in program.ops if isinstance(op, HostOp)]
        print(format_uar_report(data, host_ops, sources))
    return 0


def cmd_devices(args: argparse.Namespace) -> int:
    """Every OpenCL device, probed: one that cannot build and run a kernel says why."""
    import pyopencl as cl

    from polyfuse.runtime.device import (
        DEFAULT_RULE,
        device_speeds,
        get_device,
        icd_library,
        list_devices,
        platform_version,
        probe,
        probe_device,
    )

    rows = []
    usable: dict[str, bool] = {}
    caps: dict[str, dict[str, str]] = {}
    for dev_id, platform, dev in list_devices():
        why = probe_device(dev)
        usable[dev_id] = why is None
        caps[dev_id] = probe(dev).capabilities if why is None else {}
        rows.append(
            [
                dev_id,
                platform.name,
                platform_version(platform),
                icd_library(platform) or "?",
                dev.name.strip(),
                cl.device_type.to_string(dev.type),
                dev.max_compute_units,
                dev.max_work_group_size,
                f"{dev.local_mem_size // 1024} KiB",
                f"{dev.global_mem_size // 2**20} MiB",
                "yes" if why is None else f"no: {why}",
            ]
        )
    measured = [(dev_id, dev) for dev_id, _, dev in list_devices() if usable[dev_id]]
    speeds = dict(zip([i for i, _ in measured], device_speeds([d for _, d in measured])))
    notes = _driver_notes()
    default = None
    if any(usable.values()):
        try:
            chosen = get_device(args.device)
            default = next((i for i, _, d in list_devices() if d == chosen), None)
        except PolyfuseError:
            default = None
    if args.json:
        keys = ["id", "platform", "platform_version", "icd_library", "device", "type",
                "compute_units", "max_work_group_size", "local_mem", "global_mem"]
        out = []
        for r in rows:
            d = dict(zip(keys, r))
            d["usable"] = usable[r[0]]
            if not usable[r[0]]:
                d["reason"] = r[-1].removeprefix("no: ")
            d["default"] = r[0] == default
            d["capabilities"] = caps[r[0]]
            speed = speeds.get(r[0])
            if speed is not None:
                d["speed"] = {"product_s": speed.product, "chain_s": speed.chain,
                              "score_s": speed.score}
            out.append(d)
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
        for note in notes:
            print(f"polyfuse: {note}", file=sys.stderr)
    elif not rows:
        raise PolyfuseError("no OpenCL device found (install pocl-binary-distribution)"
                            + "".join(f"; {note}" for note in notes))
    else:
        print(_table(["id", "platform", "version", "library", "device", "type", "CUs", "max WG",
                      "local", "global", "usable"], rows))
        from polyfuse.runtime.device import default_device_reason

        if args.device:
            how = "from --device"
        elif os.environ.get("PYOPENCL_CTX"):
            how = "from PYOPENCL_CTX; --device overrides it"
        elif default:
            how = f"{default_device_reason()}; --device or PYOPENCL_CTX chooses another"
        else:
            how = "no usable device"
        name = next((f" {r[4]}, {r[2]}" for r in rows if r[0] == default), "")
        print(f"\ndefault: {default or 'none usable'}{name} ({how})")
        print(f"rule: {DEFAULT_RULE}")
        for dev_id, speed in speeds.items():
            print(f"{dev_id} speed: {speed.text() if speed else 'probe failed'}")
        for dev_id, found in caps.items():
            odd = [f"{c}: {v}" for c, v in found.items() if v != "ok"]
            if odd:
                print(f"{dev_id}: {'; '.join(odd)}")
        for note in notes:
            print(note)
    return 0


def _driver_notes() -> list[str]:
    """What ``polyfuse devices`` says about drivers: those registered for polyfuse, those found
    but not registered with the one command that makes each usable."""
    from polyfuse.core import drivers

    notes = []
    for drv in drivers.REGISTERED:
        why = (f"{drivers.ENV_SWITCH}={os.environ[drivers.ENV_SWITCH]}"
               if os.environ.get(drivers.ENV_SWITCH) else
               f"setting {drivers.setting_path()}; `polyfuse devices --unregister` removes it")
        notes.append(f"registered for polyfuse: OpenCL driver {drv} (OCL_ICD_VENDORS="
                     f"{os.environ.get('OCL_ICD_VENDORS')}; {why})")
    for drv in drivers.find_unregistered():
        notes.append(f"found unregistered OpenCL driver: {drv} — run `polyfuse devices "
                     f"--register` (or set {drivers.ENV_SWITCH}=1) to use it with polyfuse, or "
                     f"`{drivers.system_command(drv)}` for every program")
    return notes


def cmd_demo(args: argparse.Namespace) -> int:
    """Fuse the bundled BERT QKV graph (SIRIUS' motivating example), verify, print the plan."""
    from polyfuse.apps.onnx_run import fuse_onnx
    from polyfuse.core.mathtext import readable
    from polyfuse.report import write_outputs

    model = EXAMPLES_DIR / "models" / "bert_qkv.onnx"
    if not model.is_file():
        raise PolyfuseError(f"bundled model not found: {model}")
    _progress(args, f"demo: fusing {model.name} (BERT QKV: 3 x (MatMul + Add + Reshape + "
                    "Transpose)) and verifying it against onnxruntime and the unfused program")
    result = fuse_onnx(str(model), verify=True, device=args.device,
                       progress=None if args.quiet else (lambda m: _progress(args, m)))
    paths = write_outputs(result, args.out)
    v = result.verified or {}
    import onnx

    op_count = len(onnx.load(str(model), load_external_data=False).graph.node)
    print(_table(["model", "ONNX ops", "launches before", "launches after", "max abs err",
                  "verified against"],
                 [[model.stem, op_count, readable(result.plan.launches_before),
                   readable(result.fused.launches_after),
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
    from polyfuse.core.watchdog import call_with_budget

    # in a worker process (about 0.7 s of imports): a time budget can stop it, and a native
    # crash while building or running kernels on the device (PoCL, isl) becomes one line
    budget = args.timeout is not None or args.stage_timeout is not None
    row, ok, paths, first = call_with_budget(
        _fuse_opencl_job, (args,), {"announce_loading": True}, timeout=args.timeout,
        stage_timeout=args.stage_timeout, label=(args.inputs or args.host)[0],
        on_stage=None if args.quiet else (
            lambda m: _progress(args, m) if budget or m != _LOADING else None))
    if "host_error" in paths:
        _progress(args, f"note: {paths['host_error']}")
    print(_table(["program", "launches before", "launches after", "max abs err", "verified"],
                 [row]))
    _progress(args, f"wrote {paths['plan']}, {paths['source']}, {paths['report']}"
              + "".join(f", {v}" for k, v in paths.items() if k.startswith("host")
                        and k != "host_error"))
    if not ok and ": cannot verify: " in first:
        raise PolyfuseError(f"{first} differs from it there (see {paths['report']})")
    if not ok:
        raise PolyfuseError(f"{first}: the fused program does not match the original "
                            f"(see {paths['report']})")
    return 0


#: the stage the worker reports first (printed only under a time budget, which names it)
_LOADING = "loading the program"


def _fuse_opencl_job(args: argparse.Namespace, progress: Optional[Callable[[str], None]] = None,
                     announce_loading: bool = False
                     ) -> tuple[list[str], bool, dict[str, Path], str]:
    """Load, fuse and write one OpenCL program: (summary row, verified ok, written paths, the
    program's first file, with why verification cannot decide when the original races).
    Module level so that the worker process can run it (and name its stages, ``loading the
    program`` included)."""
    from polyfuse.c.preprocessor import RECURSION_LIMIT, recursion_limit
    from polyfuse.passes.compilation import Compilation, Options
    from polyfuse.passes.pipeline import compile_program, result_of, size_buffers, target_of
    from polyfuse.report import summary_row

    if progress is not None and announce_loading:
        progress(_LOADING)
    with recursion_limit(RECURSION_LIMIT):  # deeply nested (but accepted) kernels, in a worker
        program = load_program_inputs(args, args.inputs)
        # float values are host values the front-end has substituted; sizes stay integers
        params = {k: v for k, v in _parse_params(args.param).items() if isinstance(v, int)}
        if args.check_original and progress is not None:
            progress(check_original(args, program, progress))
        elif args.check_original:
            check_original(args, program)
        if args.verify and args.host and params:
            program = _symbolic_if_too_big(args, program, params, progress)
        if args.verify:
            program = size_buffers(program, params)
        options = Options(params=params, orchestration=args.orchestration, verify=args.verify,
                          tune=args.tune, coarsen=args.tune, device=args.device, out=args.out,
                          weigh=not args.no_weigh,
                          host_include_dirs=tuple(args.include),
                          host_defines={n: (v if sep else None) for n, sep, v in
                                        (d.partition("=") for d in args.define)})
        c = compile_program(Compilation(
            target=target_of(args.device), options=options, program=program,
            progress=None if progress is None else (lambda event: progress(event.message))))
        result, paths = result_of(c), dict(c.written or {})
        row = summary_row(Path(program.files[0]).parent.name or program.name, result)
        first = program.files[0]
        if not result.ok and result.undetermined:
            first += f": cannot verify: {result.undetermined}; the fused program"
        return row, result.ok, paths, first


def _symbolic_if_too_big(args: argparse.Namespace, program: Program, params: dict[str, int],
                         progress: Optional[Callable[[str], None]]) -> Program:
    """``--param`` sizes beyond the run budget: the program loaded with them left symbolic, so
    the plan and fused code hold for every value and ``--verify`` checks a small instance."""
    import copy

    from polyfuse.runtime.budget import check_run_budget

    try:
        check_run_budget(program, params, runs=2, what="verification")
        return program
    except PolyfuseError:
        pass
    sym_args = copy.copy(args)
    sym_args.param = [p for p in args.param if p.partition("=")[0] not in params]
    symbolic = load_program_inputs(sym_args, args.inputs)
    if not set(params) & set(symbolic.params):
        return program
    if progress is not None:
        progress(f"note: the sizes {', '.join(f'{k}={v}' for k, v in params.items())} exceed "
                 "the run budget: planning for symbolic sizes and verifying a small instance")
    return symbolic


def _fuse_onnx_batch(args: argparse.Namespace, models: list[str]) -> int:
    from polyfuse.apps.batch import SUMMARY_HEADERS, TIMED, fuse_models

    missing = [m for m in models if not Path(m).is_file()]
    for m in missing:
        print(f"polyfuse: error: {m}: no such file", file=sys.stderr)
    present = [m for m in models if m not in missing]
    scheduler = args.scheduler or ("local" if args.dask else None)
    summaries = fuse_models(present, args.out, jobs=max(1, args.jobs), verify=args.verify,
                            tune=args.tune, params=_parse_params(args.param),
                            timing=not args.no_timing, cache=not args.no_cache,
                            scheduler=scheduler, quiet=args.quiet, timeout=args.timeout,
                            stage_timeout=args.stage_timeout,
                            isolate=args.verify and not scheduler, device=args.device,
                            weigh=not args.no_weigh)
    print(_table(SUMMARY_HEADERS, [s.row() for s in summaries]
                 + [[Path(m).stem, *["-"] * (len(SUMMARY_HEADERS) - 2),
                     "FAILED: no such file"] for m in missing]))
    if any(s.timed for s in summaries):
        print(TIMED)
    if args.profile:
        from polyfuse.apps.batch import STAGES
        from polyfuse.report.tables import profile_table

        print("seconds per stage:", file=sys.stderr)
        print(_table(["model", *STAGES, "total"], profile_table(summaries, STAGES)),
              file=sys.stderr)
    if args.jobs > 1 and not args.no_timing and len(present) > 1:
        _progress(args, f"times were measured with {args.jobs} models fusing at once: "
                        "indicative only (--jobs 1, or analysis/onnx_models.py, to compare)")
    failed = [s for s in summaries if not s.ok]
    for s in failed:
        reason = s.error or "the fused model does not match its reference"
        print(f"polyfuse: error: {s.model}: {reason}", file=sys.stderr)
    return 1 if failed or missing else 0


def cmd_cache(args: argparse.Namespace) -> int:
    from polyfuse.core import cache

    if args.action == "dir":
        print(cache.cache_root())
        return 0
    root, n = cache.clear()
    print(f"polyfuse: removed {n} cached file(s) from {root}", file=sys.stderr)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    import numpy as np

    from polyfuse.apps.onnx_run import random_inputs
    from polyfuse.apps.session import InferenceSession
    from polyfuse.core import cache

    if not args.model.endswith(".onnx"):
        raise _UsageError("run takes an ONNX model (MODEL.onnx)")
    if not Path(args.model).is_file():
        raise PolyfuseError(f"{args.model}: no such file")
    inputs: dict[str, np.ndarray] = {}
    if not args.random:
        try:
            with np.load(args.inputs) as npz:
                inputs = {k: npz[k] for k in npz.files}
        except FileNotFoundError:
            raise PolyfuseError(f"{args.inputs}: no such file") from None
        except (OSError, ValueError) as err:
            raise PolyfuseError(f"{args.inputs}: not a readable .npz file ({err})") from None
    kind = "unfused" if args.unfused else "fused"
    _progress(args, f"running {kind} {args.model}")
    sess = InferenceSession(args.model, params=_parse_params(args.param), fused=not args.unfused,
                            cache=not args.no_cache, device=args.device)
    if sess.cached:
        _progress(args, f"the {kind} program, its kernel variant and device binary come from "
                        f"the cache ({cache.cache_root()}; --no-cache to redo them)")
    if sess.device_choice:
        _progress(args, f"on {sess.device.name.strip()}: {sess.device_choice}")
    assert sess.io is not None
    if args.random:
        inputs = random_inputs(sess.io, args.seed)
    # the feeds in the dtypes the graph declares (an .npz written elsewhere may hold float64)
    feeds = {k: np.asarray(v) for k, v in inputs.items()}
    for t in sess.io.inputs:
        if t.name in feeds and feeds[t.name].dtype != t.dtype:
            feeds[t.name] = feeds[t.name].astype(t.dtype)
    outs, kernel_time, wall_time = sess.run_profiled(feeds)
    outputs = dict(zip((o.name for o in sess.get_outputs()), outs))
    print(_table(["output", "shape", "dtype", "min", "mean", "max"],
                 [[name, "x".join(str(d) for d in a.shape) or "scalar", str(a.dtype),
                   *_value_summary(a)] for name, a in outputs.items()]))
    print(f"time: {wall_time * 1e3:.3f} ms for one run ({sess.launches} kernel launch(es), "
          f"{kernel_time * 1e3:.3f} ms of it in kernels; fusing and building not counted)")
    if args.save:
        Path(args.save).parent.mkdir(parents=True, exist_ok=True)
        np.savez(args.save, **outputs)
        _progress(args, f"wrote {', '.join(outputs)} to {args.save}")
    return 0


def _value_summary(a: object) -> list[str]:
    """min, mean and max of an output over its finite values (``-`` when it has none), so a run
    says at a glance whether its outputs are plausible."""
    import numpy as np

    values = np.asarray(a, dtype=np.float64).ravel()
    finite = values[np.isfinite(values)]
    if not finite.size:
        return ["-", "-", "-"]
    return [f"{finite.min():.4g}", f"{finite.mean():.4g}", f"{finite.max():.4g}"]


def cmd_inputs(args: argparse.Namespace) -> int:
    """The graph inputs (name, shape, dtype); with ``--random --save`` an ``.npz`` of them."""
    import numpy as np

    from polyfuse.apps.onnx_run import random_inputs
    from polyfuse.frontend.onnx import load_onnx_model

    if not args.model.endswith(".onnx"):
        raise _UsageError("inputs takes an ONNX model (MODEL.onnx)")
    if args.save and not args.random:
        raise _UsageError("--save writes generated inputs: give --random too")
    if not Path(args.model).is_file():
        raise PolyfuseError(f"{args.model}: no such file")
    model = load_onnx_model(args.model, params=_parse_params(args.param))
    rows = [[t.name, "x".join(str(d) for d in t.shape) or "scalar", str(t.dtype)]
            for t in model.inputs]
    if args.json:
        json.dump([dict(zip(["name", "shape", "dtype"],
                            [t.name, list(t.shape), str(t.dtype)])) for t in model.inputs],
                  sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(_table(["input", "shape", "dtype"], rows))
    if args.random:
        arrays = random_inputs(model, args.seed)
        if args.save:
            Path(args.save).parent.mkdir(parents=True, exist_ok=True)
            np.savez(args.save, **arrays)
            _progress(args, f"wrote {len(arrays)} random input(s) (seed {args.seed}) to "
                            f"{args.save}; run it with `polyfuse run {args.model} --inputs "
                            f"{args.save} --save OUT.npz`")
        else:
            _progress(args, "generated random inputs; give --save IN.npz to keep them")
    return 0


def cmd_parallelize(args: argparse.Namespace) -> int:
    from polyfuse.autopar import parallelize_file, summary_text

    defines = _defines(args.define)
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
    program = load_program_inputs(args, args.kernels) if args.host else None
    if not args.host and len(args.kernels) != 1:
        raise _UsageError("count takes one KERNELS.cl without --host")
    subgroup_size = args.subgroup_size
    if subgroup_size is None and args.device:  # else the default device's, when it has one
        from polyfuse.runtime.device import device_limits

        lim = device_limits(args.device)
        subgroup_size = lim.sub_group_size or lim.preferred_work_group_size_multiple
    report = count_report(args.kernels[0] if args.kernels else program.files[0],
                          host=args.host[0] if args.host else None, kernel=args.kernel,
                          program=program,
                          params=_parse_params(args.param), subgroup_size=subgroup_size,
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
        from polyfuse.runtime.device import device_target

        program = load_onnx(args.model, params=params, target=device_target(args.device))
    else:
        from polyfuse.frontend.host import load_opencl

        program = load_opencl(args.program, host=args.host, params=params)
    _progress(args, f"placing the {len(program.launches)} launches of {program.name}")
    from polyfuse.runtime.device import get_context

    _, queue = get_context(args.device)
    points = kernel_points(program, params=params, queue=queue)
    if args.fused:
        from polyfuse.passes.pipeline import fuse_program

        fused = fuse_program(program, params=params, device=args.device).fused.program
        points += kernel_points(fused, params=params, label="fused:", queue=queue)
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
        if points:
            from polyfuse.perf.roofline import kernel_table

            print("\nkernels (numbered as in the plot):")
            print("\n".join(kernel_table(points)))
        print(f"wrote {info['json']} and {info['png']}")
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    from polyfuse.apps.prediction import check_opencl_sources, predict

    if args.repeat < 1:
        raise _UsageError("--repeat must be at least 1")
    sources: list[str] = list(args.source)
    source: Union[str, Program]
    if len(sources) == 1 and sources[0].lower().endswith(".onnx"):
        if args.include or args.define or args.program_args is not None or args.host:
            raise _UsageError("an ONNX model takes no --host, -I, -D nor --args")
        source = sources[0]
    else:
        if any(s.lower().endswith(".onnx") for s in sources):
            raise _UsageError("an ONNX model is predicted on its own")
        if args.form:
            raise _UsageError("--form applies to an ONNX model only")
        check_opencl_sources(sources, args.host)
        source = load_program_inputs(args, sources)
    pred = predict(source, device=args.device,
                   params=_parse_params(args.param), fused=args.fused, measure=args.measure,
                   repeat=args.repeat, recalibrate=args.recalibrate, form=args.form,
                   progress=None if args.quiet else (lambda m: _progress(args, m)))
    if args.json:
        json.dump(pred.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(pred.table())
    return 0


def _coarsen_specs(items: Sequence[str]) -> list:
    """``--factors`` specs: ``t2``, ``b3``, ``t2x1,b1x4`` (per dimension), ``total=4`` (thread
    factor spread over the non-unit dimensions) or ``btotal=4`` (block factor, likewise)."""
    specs = []
    for item in items:
        thread: tuple = ()
        block: tuple = ()
        total = btotal = None
        for part in item.replace("_", ",").split(","):
            part = part.strip()
            try:
                if part.startswith("total="):
                    total = int(part[6:])
                elif part.startswith("btotal="):
                    btotal = int(part[7:])
                elif part[:1] in ("t", "b") and part[1:]:
                    vals = tuple(int(x) for x in part[1:].split("x"))
                    if part[0] == "t":
                        thread = vals
                    else:
                        block = vals
                else:
                    raise ValueError
            except ValueError:
                raise _UsageError(f"--factors: cannot read {part!r} (e.g. t2, b3, t2x1,b1x4, "
                                  "total=4)") from None
        specs.append((thread, block, total, btotal))
    return specs


def cmd_coarsen(args: argparse.Namespace) -> int:
    from polyfuse.codegen.coarsen import Factors, spread_factors
    from polyfuse.passes.coarsening_tuning import tune_coarsening
    from polyfuse.runtime.execute import program_source

    params = {k: v for k, v in _parse_params(args.param).items() if isinstance(v, int)}
    specs = _coarsen_specs(args.factors)
    if len(specs) > 1 and not args.tune:
        raise _UsageError("several --factors are alternatives: add --tune to choose by timing")
    program = load_program_inputs(args, args.kernels)

    def factors_for(geom):  # the specs resolved for one launch's geometry
        out = []
        wd = geom.work_dim
        for thread, block, total, btotal in specs:
            t = spread_factors(total, geom.local_size[:wd]) if total else thread
            b = spread_factors(btotal, geom.groups[:wd]) if btotal else block
            out.append(Factors.of(t, b))
        return out

    rep = tune_coarsening(program, params=params, kernel=args.kernel,
                          factors=factors_for if specs else None, tune=args.tune,
                          verify=args.verify or args.tune, use_cache=not args.no_cache,
                          device=args.device,
                          progress=None if args.quiet else (lambda m: _progress(args, m)))
    if specs and not args.tune:  # one requested variant: refusing it is an error
        for lt in rep.launches:
            bad = [v for v in lt.variants if not v.factors.identity and
                   v.status in ("illegal", "failed", "pruned")]
            if bad:
                raise PolyfuseError(bad[0].reason if bad[0].status == "illegal" else
                                    f"launch {lt.launch} ({lt.kernel}): variant "
                                    f"{bad[0].factors.label(lt.work_dim)} {bad[0].status}: "
                                    f"{bad[0].reason}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "coarsened.cl").write_text(program_source(rep.result.program))
    (out / "report.json").write_text(json.dumps(rep.to_dict(), indent=2) + "\n")
    (out / "report.md").write_text(rep.markdown())
    rows = []
    for lt in rep.launches:
        wd = lt.work_dim
        rows.append([lt.launch, lt.kernel, list(lt.chosen.thread[:wd]),
                     list(lt.chosen.block[:wd]), len(lt.variants), lt.pruned,
                     f"{lt.speedup:.2f}" if lt.speedup else None])
    print(_table(["launch", "kernel", "thread", "block", "variants", "pruned", "speedup"], rows))
    print(f"wrote {out / 'coarsened.cl'}, {out / 'report.json'}, {out / 'report.md'}")
    return 0


def _progress(args: argparse.Namespace, message: str) -> None:
    if not getattr(args, "quiet", False):
        print(f"polyfuse: {message}", file=sys.stderr)


# -- global options ------------------------------------------------------------------------------
# ``--device``, ``-q`` and ``--debug`` are accepted before or after the subcommand: the top-level
# parser defines them with real defaults, every subparser again (through the parent parser below)
# with SUPPRESS defaults, so a value given after the subcommand wins and one given before it is
# not overwritten.  Add new subcommands with ``_subcommand`` so they get the same options.


def _global_options(top: bool) -> argparse.ArgumentParser:
    """The options every subcommand accepts, as a parent parser."""
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("global options (before or after the subcommand)")

    def default(value: object) -> object:
        return value if top else argparse.SUPPRESS

    g.add_argument("--device", default=default(None), metavar="PLATFORM:DEVICE",
                   help="OpenCL device, as listed by `polyfuse devices` (default: "
                        "$PYOPENCL_CTX, else the default rule `polyfuse devices` prints)")
    g.add_argument("-q", "--quiet", action="store_true", default=default(False),
                   help="no progress on stderr")
    g.add_argument("--debug", action="store_true", default=default(False),
                   help="show the traceback with an error")
    return p


_SUB_OPTIONS = _global_options(top=False)


def _subcommand(sub: argparse._SubParsersAction, name: str, summary: str,
                **kwargs: object) -> argparse.ArgumentParser:
    """A subparser with the global options and its one-line help as its description."""
    return sub.add_parser(name, help=summary, description=kwargs.pop("description", summary),
                          parents=[_SUB_OPTIONS], **kwargs)


def _version() -> str:
    from polyfuse import __version__

    return f"polyfuse {__version__} ({Path(__file__).resolve().parent.parent})"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="polyfuse",
        description="Whole-program polyhedral analysis and kernel fusion of OpenCL programs.",
        parents=[_global_options(top=True)],
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = _subcommand(sub, "analyze", "the UAR (dependences with widths) of an OpenCL program")
    p.add_argument("kernels", nargs="*", metavar="KERNELS.cl",
                   help="OpenCL C file(s); optional when the host names its kernel files "
                        "(without --host: each kernel launched once)")
    add_program_inputs(p)
    _check_original_flag(p)
    p.add_argument("--json", action="store_true", help="JSON on stdout")
    p.set_defaults(func=cmd_analyze)

    p = _subcommand(sub, "devices", "list OpenCL devices")
    p.add_argument("--json", action="store_true")
    reg = p.add_mutually_exclusive_group()
    reg.add_argument("--register", dest="register", action="store_const", const=True,
                     help="register OpenCL drivers that are installed but not registered (no "
                          ".icd file), for polyfuse's processes only, now and later (a setting "
                          "under the cache directory; never writes to /etc)")
    reg.add_argument("--unregister", dest="register", action="store_const", const=False,
                     help="remove that setting")
    p.set_defaults(func=cmd_devices)

    p = _subcommand(sub, "fuse", "fuse kernel launches; write plan.json, fused.cl, report.md")
    p.add_argument("inputs", nargs="*", metavar="INPUT",
                   help="ONNX models (MODEL.onnx ...), or the OpenCL C file(s) with --host "
                        "(optional when the host names its kernel files)")
    add_program_inputs(p)
    _check_original_flag(p)
    p.add_argument("--out", required=True,
                   help="output directory (ONNX: one subdirectory per model)")
    p.add_argument("--verify", action="store_true",
                   help="run fused and unfused on the same random inputs and compare every "
                        "buffer (ONNX: also against onnxruntime); without --host, give the "
                        "sizes with --param and buffers are sized to what the kernels touch")
    p.add_argument("--tune", action="store_true",
                   help="time the orchestration variants and keep the fastest")
    p.add_argument("--no-weigh", action="store_true",
                   help="keep every group the planner fused, without weighing each against "
                        "its launches apart (performance model, timing when close)")
    p.add_argument("--jobs", type=int, default=1,
                   help="ONNX batches: fuse this many models in parallel processes (their "
                        "timings then share the cores: indicative only)")
    p.add_argument("--no-timing", action="store_true",
                   help="ONNX batches: skip timing unfused vs fused")
    p.add_argument("--no-cache", action="store_true",
                   help="ONNX batches: neither read nor write the disk cache (polyfuse cache)")
    p.add_argument("--profile", action="store_true",
                   help="ONNX batches: print the seconds each stage took, per model")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="ONNX batches: one task per model on this Dask scheduler")
    p.add_argument("--dask", action="store_true",
                   help="ONNX batches: start a local Dask cluster of --jobs workers")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="time budget per model (or program): stop it and name the stage")
    p.add_argument("--stage-timeout", type=float, metavar="SECONDS",
                   help="time budget per pipeline stage (loading, planning, verifying, ...)")
    p.add_argument("--orchestration", default="auto",
                   choices=["auto", "vertical", "horizontal", "hetero"],
                   help="how independent fragments are combined (default: auto; hetero: also "
                        "fuse independent launches with different code side by side)")
    p.set_defaults(func=cmd_fuse)

    p = _subcommand(sub, "coarsen", "thread/block coarsening of the launches, chosen by "
                    "timing; write coarsened.cl, report.json, report.md")
    p.add_argument("kernels", nargs="*", metavar="KERNELS.cl",
                   help="OpenCL C file(s); optional when the host names its kernel files")
    add_program_inputs(p)
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--kernel", help="only the launches of this kernel")
    p.add_argument("--factors", action="append", default=[], metavar="SPEC",
                   help="a variant: t2, b3, t2x1,b1x4, total=4, btotal=2 (repeatable; "
                        "default: the generated set)")
    p.add_argument("--verify", action="store_true",
                   help="check every variant against the original on random inputs")
    p.add_argument("--tune", action="store_true",
                   help="time the variants against the original and keep the fastest")
    p.add_argument("--no-cache", action="store_true", help="do not use the tuning cache")
    p.set_defaults(func=cmd_coarsen)

    p = _subcommand(sub, "run", "run an ONNX model (fused or not) on the OpenCL device",
                    epilog="Make an IN.npz with `polyfuse inputs MODEL.onnx --random --save "
                           "IN.npz` or numpy.savez(path, **{input_name: array}).")
    p.add_argument("model", metavar="MODEL.onnx")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--inputs", metavar="IN.npz",
                     help="graph inputs by name (see `polyfuse inputs`)")
    src.add_argument("--random", action="store_true",
                     help="seeded random inputs (as `polyfuse inputs --random`)")
    p.add_argument("--seed", type=int, default=0, help="seed of --random (default: 0)")
    p.add_argument("--save", metavar="OUT.npz",
                   help="also write the graph outputs by name to this .npz file")
    p.add_argument("--unfused", action="store_true", help="one launch per node, no fusion")
    p.add_argument("--no-cache", action="store_true",
                   help="neither read nor write the disk cache (polyfuse cache): fuse, choose "
                        "the kernel variant and build again")
    add_param_flag(p, "value of a dynamic dimension")
    p.set_defaults(func=cmd_run)

    p = _subcommand(sub, "inputs", "list an ONNX model's inputs; write random ones to an .npz")
    p.add_argument("model", metavar="MODEL.onnx")
    p.add_argument("--random", action="store_true",
                   help="generate seeded random inputs (floats in [-1, 1), small integers)")
    p.add_argument("--seed", type=int, default=0, help="seed of --random (default: 0)")
    p.add_argument("--save", metavar="IN.npz", help="write the --random inputs here")
    add_param_flag(p, "value of a dynamic dimension")
    p.add_argument("--json", action="store_true", help="the input list as JSON on stdout")
    p.set_defaults(func=cmd_inputs)

    p = _subcommand(sub, "parallelize", "C loop nests -> host C + OpenCL kernels (PPCG-style)")
    p.add_argument("file", metavar="FILE.c")
    p.add_argument("-I", dest="include", action="append", default=[], metavar="DIR",
                   help="include directory for the preprocessor")
    p.add_argument("-D", dest="define", action="append", default=[], metavar="NAME[=V]",
                   help="preprocessor definition")
    p.add_argument("--function", help="only this function")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--report", action="store_true",
                   help="print the per-loop report (parallel / sequential / reduction)")
    p.set_defaults(func=cmd_parallelize)

    from polyfuse.perf.counts import COLUMNS_HELP

    p = _subcommand(sub, "count", "exact symbolic counts of ops, memory accesses, barriers",
                    epilog=COLUMNS_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kernels", nargs="*", metavar="KERNELS.cl",
                   help="OpenCL C file(s) (with --host: counts per launch at the host's sizes)")
    add_program_inputs(p)
    p.add_argument("--kernel", help="only this kernel")
    p.add_argument("--subgroup-size", type=int, help="sub-group size (default: the device's)")
    p.add_argument("--granularity", choices=["work-item", "sub-group", "work-group"],
                   help="one granularity for every count (default: ops and __local accesses "
                        "per sub-group, global accesses per work-item unless uniform across "
                        "a sub-group, barriers per work-item)")
    p.add_argument("--json", action="store_true", help="JSON on stdout")
    p.set_defaults(func=cmd_count)

    p = _subcommand(sub, "roofline", "measure the empirical roofline of the OpenCL device")
    p.add_argument("--out", required=True, help="directory for roofline.json and roofline.png")
    p.add_argument("--quick", action="store_true", help="fewer, smaller measurements")
    p.add_argument("--max-mib", type=int, help="largest working set to measure, in MiB")
    p.add_argument("--program", metavar="KERNELS.cl",
                   help="place this program's kernels on the roofline (with --host)")
    p.add_argument("--host", help="C host program of --program")
    p.add_argument("--model", metavar="MODEL.onnx", help="place an ONNX model's kernels")
    p.add_argument("--fused", action="store_true", help="also place the fused kernels")
    add_param_flag(p, "fix a symbolic host value")
    p.add_argument("--json", action="store_true", help="summary as JSON on stdout")
    p.set_defaults(func=cmd_roofline)

    p = _subcommand(sub, "predict", "the performance model's time of every launch (and with "
                    "--measure the measured time and the error)",
                    epilog="The device's calibration (micro-benchmarks fitted by least "
                           "squares) is measured once and cached; its path is printed.")
    p.add_argument("source", nargs="*", metavar="KERNELS.cl|MODEL.onnx",
                   help="OpenCL C file(s) of a program (with --host; none: the host builds "
                        "its kernels from its own strings) or an ONNX model")
    add_program_inputs(p, "fix a value the host reads at run time, or an ONNX dynamic "
                          "dimension")
    p.add_argument("--fused", action="store_true", help="predict the fused program instead")
    p.add_argument("--form", choices=sorted(KERNEL_VARIANTS),
                   help="an ONNX model's kernel form (default: the one a session of it runs)")
    p.add_argument("--measure", action="store_true",
                   help="also run it: median profiled time per launch over --repeat runs "
                        "or more (a short program runs for at least 0.2 s)")
    p.add_argument("--repeat", type=int, default=7, help="runs measured at least (default: 7)")
    p.add_argument("--recalibrate", action="store_true",
                   help="measure the device's calibration again (and cache it)")
    p.add_argument("--json", action="store_true", help="JSON on stdout")
    p.set_defaults(func=cmd_predict)

    p = _subcommand(sub, "cache", "the disk cache of fusion results")
    p.add_argument("action", choices=["clear", "dir"],
                   help="clear: remove every entry; dir: print the cache directory")
    p.set_defaults(func=cmd_cache)

    p = _subcommand(sub, "demo", "fuse the bundled BERT QKV graph, verify, print the report")
    p.add_argument("--out", default="out/demo", help="output directory (default: out/demo)")
    p.set_defaults(func=cmd_demo)
    return parser


#: commands that build or run kernels on the device in this process (``fuse`` has its own
#: worker): they run in a worker process, so a native crash of the device compiler or driver is
#: one line naming the stage (the kernel being built) and the signal
_BUILDS_KERNELS = (cmd_roofline, cmd_run, cmd_coarsen, cmd_demo, cmd_predict)


def _command_job(args: argparse.Namespace, progress: Optional[Callable[[str], None]] = None
                 ) -> int:
    """One command in the worker process (module level, so it can be pickled)."""
    from polyfuse.c.preprocessor import RECURSION_LIMIT, recursion_limit

    with recursion_limit(RECURSION_LIMIT):
        try:
            return args.func(args)
        except _UsageError as err:
            raise PolyfuseError(str(err)) from None
        finally:
            sys.stdout.flush()


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from polyfuse.core import drivers

    # before anything enumerates OpenCL platforms: the ICD loader reads its vendors folder once
    if getattr(args, "register", None) is not None:
        drivers.remember(args.register)
    drivers.apply()
    from polyfuse.c.preprocessor import RECURSION_LIMIT, recursion_limit

    try:
        if args.device:  # a bad --device fails now, not after minutes of analysis and planning
            from polyfuse.runtime.device import get_device

            get_device(args.device)
        with recursion_limit(RECURSION_LIMIT):  # deeply nested (but accepted) source code
            if args.func in _BUILDS_KERNELS:
                from polyfuse.core.watchdog import call_with_budget

                return call_with_budget(_command_job, (args,))
            return args.func(args)
    except _UsageError as err:
        parser.error(str(err))
        return 2
    except PolyfuseError as err:
        if args.debug:
            traceback.print_exc()
            if getattr(err, "traceback", None):  # from a worker process
                print(err.traceback, file=sys.stderr)
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
