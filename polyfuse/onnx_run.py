"""Run ONNX models through polyfuse (fused or not) and check them against onnxruntime.

Why a module of its own: the front-end (:mod:`polyfuse.frontend.onnx`) only builds a
:class:`~polyfuse.program.Program`; running it means mapping ONNX input/output names onto buffers,
starting from the model's weights (``Program.data``), and — for the fused program, which code
generation builds as a new record without that data — passing the weights explicitly.  The
verification of a fused ONNX model has two references (docs/ARCHITECTURE.md, "Correctness"): the
unfused program (fusion
changed nothing) and onnxruntime (the front-end and the operator kernels mean what ONNX means).

    >>> from polyfuse.onnx_run import run_onnx, onnxruntime_reference       # doctest: +SKIP
    >>> out = run_onnx("examples/models/bert_qkv.onnx", {"X": x})            # doctest: +SKIP
    >>> ref = onnxruntime_reference("examples/models/bert_qkv.onnx", {"X": x})  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Optional, Union

import numpy as np

from polyfuse.frontend.onnx import GraphIO, OnnxModel, load_onnx_model
from polyfuse.pipeline import FuseResult, device_name, fuse_program
from polyfuse.program import PolyfuseError, Program

if TYPE_CHECKING:
    from polyfuse.runtime.execute import RunResult

PathLike = Union[str, os.PathLike]

#: Tolerances of the comparison with onnxruntime (as ``numpy.isclose``): float32 kernels that
#: sum in another order than onnxruntime's (tiled GEMM, tree reductions) differ in the last bits.
RTOL, ATOL = 1e-4, 1e-5
#: The same for float16 outputs: half storage rounds every stored value to 11 bits.
RTOL_FP16, ATOL_FP16 = 1e-2, 1e-3

_FUSED_CACHE: dict[tuple, tuple[OnnxModel, FuseResult]] = {}


def _key(path: str, params: Optional[Mapping[str, int]], device: Any) -> tuple:
    st = os.stat(path)
    return (os.path.abspath(path), st.st_mtime_ns, st.st_size,
            tuple(sorted((params or {}).items())), str(device))


def _feeds(model: OnnxModel, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Program inputs: the weights plus each graph input converted to its buffer's type."""
    known = {t.name for t in model.inputs}
    extra = sorted(set(inputs) - known)
    if extra:
        raise PolyfuseError(f"unknown input(s) {', '.join(extra)}; the model's inputs are "
                            f"{', '.join(sorted(known)) or 'none'}", model.path)
    feeds: dict[str, np.ndarray] = dict(model.program.data)
    for t in model.inputs:
        if t.name not in inputs:
            raise PolyfuseError(f"input '{t.name}' is missing (shape {t.shape}, {t.dtype})",
                                model.path)
        arr = np.asarray(inputs[t.name])
        if tuple(arr.shape) != tuple(t.shape):
            raise PolyfuseError(f"input '{t.name}' has shape {tuple(arr.shape)}, the model "
                                f"expects {t.shape}", model.path)
        if t.dtype.kind in "iu":
            if arr.size and (arr.max() > np.iinfo(np.int32).max
                             or arr.min() < np.iinfo(np.int32).min):
                raise PolyfuseError(f"input '{t.name}' does not fit in int32", model.path)
            size, where = model.index_bounds.get(t.name, (None, ""))
            if size is not None and arr.size and (arr.max() >= size or arr.min() < -size):
                bad = int(arr.max()) if arr.max() >= size else int(arr.min())
                raise PolyfuseError(f"input '{t.name}': index {bad} is out of range for "
                                    f"{where} (valid: {-size}..{size - 1})", model.path)
            arr = arr.astype(np.int32)
        elif t.dtype == np.bool_:
            arr = arr.astype(np.uint8)
        else:
            arr = arr.astype(np.float16 if t.dtype == np.float16 else np.float32)
        feeds[t.buffer] = np.ascontiguousarray(arr).reshape(-1)
    return feeds


def _outputs(model: OnnxModel, buffers: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    out = {}
    for t in model.outputs:
        n = int(np.prod(t.shape, dtype=np.int64))
        raw = np.asarray(buffers[model.program.root(t.buffer)[0]]).reshape(-1)[:n]
        out[t.name] = raw.reshape(t.shape).astype(t.dtype, copy=True)
    return out


def _execute(model: OnnxModel, program: Program, inputs: Mapping[str, Any], device: Any,
             seed: int = 0, profile: bool = False) -> RunResult:
    from polyfuse.runtime.budget import check_run_budget
    from polyfuse.runtime.execute import run_program

    check_run_budget(program, runs=2, what=f"running {os.path.basename(model.path)}")
    return run_program(program, inputs=_feeds(model, inputs), device=device, seed=seed,
                       profile=profile)


def _run(model: OnnxModel, program: Program, inputs: Mapping[str, Any], device: Any,
         seed: int = 0) -> dict[str, np.ndarray]:
    return _outputs(model, _execute(model, program, inputs, device, seed).buffers)


def load_and_fuse(path: str, params: Optional[Mapping[str, int]], device: Any,
                  tune: bool = False, progress: Any = None, form: Optional[str] = None
                  ) -> tuple[OnnxModel, FuseResult]:
    """Load and fuse once per file version, parameters, device and kernel variant
    (:func:`polyfuse.oplib.kernel_variant`; fusion takes seconds)."""
    from polyfuse.oplib import kernel_variant
    from polyfuse.runtime.device import device_target

    form = form or "tiled"
    key = _key(path, params, device) + (tune, form)
    hit = _FUSED_CACHE.get(key)
    if hit is None:
        with kernel_variant(form):
            model = load_onnx_model(path, params=params, target=device_target(device))
        result = fuse_program(model.program, verify=False, device=device, tune=tune,
                              progress=progress, coarsen=False)
        result = dataclasses.replace(result, source_nodes=dict(model.outcomes))
        hit = _FUSED_CACHE[key] = (model, result)
    return hit


@dataclasses.dataclass(frozen=True)
class OnnxRun:
    """One execution of a model: its outputs by ONNX name, and what the run took (so that
    ``polyfuse run`` can say how long the model itself ran, apart from fusing and building)."""

    outputs: dict[str, np.ndarray]
    #: seconds from the first upload to the last launch's completion
    wall_time: float
    #: profiled kernel seconds, summed over the launches
    kernel_time: float
    launches: int


def execute_onnx(path: PathLike, inputs: Mapping[str, Any], *, fused: bool = True,
                 params: Optional[Mapping[str, int]] = None, device: Any = None) -> OnnxRun:
    """Execute a model once on the OpenCL device (``fused``: the program fusion produced, else
    the one-launch-per-node program): outputs and times."""
    path = os.fspath(path)
    if fused:
        model, result = load_and_fuse(path, params, device)
        program = result.fused.program
    else:
        from polyfuse.runtime.device import device_target

        model = load_onnx_model(path, params=params, target=device_target(device))
        program = model.program
    res = _execute(model, program, inputs, device, profile=True)
    return OnnxRun(_outputs(model, res.buffers), res.wall_time, res.kernel_time, res.launches)


def run_onnx(path: PathLike, inputs: Mapping[str, Any], *, fused: bool = True,
             params: Optional[Mapping[str, int]] = None, device: Any = None
             ) -> dict[str, np.ndarray]:
    """Execute a model on the OpenCL device; outputs by their ONNX names.

    ``fused`` runs the program fusion produced, otherwise the one-launch-per-node program.
    """
    return execute_onnx(path, inputs, fused=fused, params=params, device=device).outputs


def onnxruntime_reference(path: PathLike, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The outputs onnxruntime computes (CPU provider), by ONNX output name."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise PolyfuseError("onnxruntime is not installed (pip install 'polyfuse[onnx]')"
                            ) from None
    path = os.fspath(path)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    try:
        sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    except Exception as err:  # onnxruntime raises its own exception types
        raise PolyfuseError(f"onnxruntime cannot load the model: {str(err).splitlines()[0]}",
                            path) from None
    names = [o.name for o in sess.get_outputs()]
    feeds = {i.name: np.asarray(inputs[i.name]) for i in sess.get_inputs() if i.name in inputs}
    return dict(zip(names, sess.run(names, feeds)))


def random_inputs(model: Union[OnnxModel, GraphIO], seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs: floats uniform in [-1, 1), Gather indices anywhere in their range
    (negative ones too), other integers 0 or 1, booleans at random."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for t in model.inputs:
        if t.dtype.kind == "f":
            out[t.name] = (rng.random(t.shape) * 2 - 1).astype(t.dtype)
        elif t.dtype == np.bool_:
            out[t.name] = rng.random(t.shape) < 0.5
        elif t.name in model.index_bounds:  # Gather indices: anywhere in range, negative too
            size = model.index_bounds[t.name][0]
            out[t.name] = rng.integers(-size, size, size=t.shape).astype(t.dtype)
        else:
            out[t.name] = rng.integers(0, 2, size=t.shape).astype(t.dtype)
    return out


def _compare(outputs: Mapping[str, np.ndarray], ref: Mapping[str, np.ndarray], label: str
             ) -> Any:
    from polyfuse.runtime.verify import Verification, compare_arrays

    half = any(ref[name].dtype == np.float16 for name in ref)
    rtol, atol = (RTOL_FP16, ATOL_FP16) if half else (RTOL, ATOL)
    checks = tuple(compare_arrays(name, ref[name], outputs[name], rtol=rtol, atol=atol)
                   for name in ref if name in outputs)
    return Verification(
        ok=all(c.ok for c in checks) and len(checks) == len(ref),
        reference=label,
        max_abs_err=max((c.max_abs_err for c in checks), default=0.0),
        max_rel_err=max((c.max_rel_err for c in checks), default=0.0),
        buffers=checks,
        tolerance_reason=f"float32 kernels against {label}: summation order differs"
        + ("; float16 outputs are rounded to half" if half else ""),
        rtol=rtol, atol=atol,
        skipped=tuple(sorted(set(ref) - set(outputs))))


def fuse_onnx(path: PathLike, *, verify: bool = False, params: Optional[Mapping[str, int]] = None,
              device: Any = None, seed: int = 0, tune: bool = False,
              progress: Any = None) -> FuseResult:
    """Load, plan, generate and (``verify``) check the fused program twice: its graph outputs
    against onnxruntime on seeded random inputs, and every compared buffer against the unfused
    program.  The result's ``verified`` holds both (``references``) and their combined verdict."""
    path = os.fspath(path)
    model, result = load_and_fuse(path, params, device, tune, progress)
    if not verify:
        return result
    from polyfuse.runtime import verify_programs

    if progress is not None:
        progress("verifying against onnxruntime and the unfused program")
    inputs = random_inputs(model, seed)
    fused_out = _run(model, result.fused.program, inputs, device, seed)
    checks = []
    try:
        ref = onnxruntime_reference(path, inputs)
    except PolyfuseError as err:
        ort_check: Optional[dict[str, Any]] = {"ok": None, "reason": err.message}
    else:
        ort = _compare(fused_out, ref, "onnxruntime")
        checks.append(ort)
        ort_check = ort.to_dict()
    unfused = verify_programs(model.program, result.fused.program,
                              buffers=list(result.fused.compared_buffers), device=device,
                              seed=seed)
    checks.append(unfused)
    verified = {
        "ok": all(c.ok for c in checks),
        "reference": " + ".join(c.reference for c in checks),
        "max_abs_err": max(c.max_abs_err for c in checks),
        "max_rel_err": max(c.max_rel_err for c in checks),
        "rtol": RTOL,
        "atol": ATOL,
        "references": {"onnxruntime": ort_check, "unfused": unfused.to_dict()},
        "device": device_name(device),
    }
    # FuseResult.ok reads ``verification``: keep the failing check when there is one
    worst = next((c for c in checks if not c.ok), unfused)
    return dataclasses.replace(result, verified=verified, verification=worst)


__all__ = ["ATOL", "RTOL", "OnnxRun", "execute_onnx", "fuse_onnx", "load_and_fuse",
           "onnxruntime_reference", "random_inputs", "run_onnx"]
