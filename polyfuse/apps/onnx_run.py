"""Run ONNX models through polyfuse (fused or not) and check them against onnxruntime.

Why a module of its own: the front-end (:mod:`polyfuse.frontend.onnx`) only builds a
:class:`~polyfuse.core.program.Program`; running it means
 mapping ONNX input/output names onto buffers,
starting from the model's weights (``Program.data``), and — for the fused program, which code
generation builds as a new record without that data — passing the weights explicitly.  The
verification of a fused ONNX model has two references (docs/ARCHITECTURE.md, "Correctness"): the
unfused program (fusion
changed nothing) and onnxruntime (the front-end and the operator kernels mean what ONNX means).

    >>> from polyfuse.apps.onnx_run import run_onnx, onnxruntime_reference       # doctest: +SKIP
    >>> out = run_onnx("examples/models/bert_qkv.onnx", {"X": x})            # doctest: +SKIP
    >>> ref = onnxruntime_reference("examples/models/bert_qkv.onnx", {"X": x})  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Optional, Union

import numpy as np

from polyfuse.core.program import PolyfuseError, Program, Target
from polyfuse.frontend.onnx import GraphIO, OnnxModel, load_onnx_model
from polyfuse.passes.compilation import (
    Compilation,
    Event,
    Options,
    Pass,
    Progress,
    Stage,
    verify,
)
from polyfuse.passes.pipeline import (
    PASSES,
    FuseResult,
    compile_program,
    device_name,
    result_of,
    target_of,
)

if TYPE_CHECKING:
    from polyfuse.runtime.device import DeviceSpec
    from polyfuse.runtime.execute import RunResult

PathLike = Union[str, os.PathLike]

#: Tolerances of the comparison with onnxruntime (as ``numpy.isclose``): float32 kernels that
#: sum in another order than onnxruntime's (tiled GEMM, tree reductions) differ in the last bits.
RTOL, ATOL = 1e-4, 1e-5
#: The same for float16 outputs: half storage rounds every stored value to 11 bits.
RTOL_FP16, ATOL_FP16 = 1e-2, 1e-3

_FUSED_CACHE: dict[tuple, Compilation] = {}


def _key(path: str, params: Optional[Mapping[str, int]], device: DeviceSpec) -> tuple:
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


def _execute(model: OnnxModel, program: Program, inputs: Mapping[str, Any], device: DeviceSpec,
             seed: int = 0, profile: bool = False) -> RunResult:
    from polyfuse.runtime.budget import check_run_budget
    from polyfuse.runtime.execute import run_program

    check_run_budget(program, runs=2, what=f"running {os.path.basename(model.path)}")
    return run_program(program, inputs=_feeds(model, inputs), device=device, seed=seed,
                       profile=profile)


def _run(model: OnnxModel, program: Program, inputs: Mapping[str, Any], device: DeviceSpec,
         seed: int = 0) -> dict[str, np.ndarray]:
    return _outputs(model, _execute(model, program, inputs, device, seed).buffers)


def form_target(path: str, params: Optional[Mapping[str, int]], device: DeviceSpec,
                form: str, progress: Optional[Progress] = None) -> Target:
    """The device's target generating ``path``'s kernels in ``form``; in the ``gpu`` form its
    matrix products get the register tiles measured fastest on the device
    (:mod:`polyfuse.runtime.product_tiles`, cached per device and shape)."""
    target = target_of(device).with_variant(form)
    if target.kernel.product_form != "register_tiled":
        return target
    from polyfuse.frontend.onnx import product_cases
    from polyfuse.runtime.product_tiles import tune_product_tiles

    def say(message: str) -> None:
        if progress is not None:
            progress(Event(Stage.LOAD, message))

    cases = product_cases(path, params=dict(params or {}), target=target)
    return target.with_tiles(tune_product_tiles(cases, target, device, say))


def compile_onnx(path: str, params: Optional[Mapping[str, int]], device: DeviceSpec,
                 tune: bool = False, progress: Optional[Progress] = None,
                 form: Optional[str] = None,
                 loaded: Optional[tuple[Target, OnnxModel]] = None) -> Compilation:
    """The model loaded and fused (:data:`ONNX_PASSES`, no verification), once per file
    version, parameters, device and kernel variant (:data:`polyfuse.core.program.KERNEL_VARIANTS`;
    fusion takes seconds).  ``loaded``: the file already loaded for a target (a session's
    prediction loads it), used instead of loading it again when that is the form's target."""
    form = form or "tiled"
    key = _key(path, params, device) + (tune, form)
    hit = _FUSED_CACHE.get(key)
    if hit is None:
        # sessions do not weigh each fused group (polyfuse.passes.group_weighing): counting a
        # real-size model's fused kernels costs seconds per layer of the cold start it is
        # meant to keep short; ``polyfuse fuse`` weighs and its report says what it kept
        options = Options(params=dict(params or {}), tune=tune, device=device, weigh=False)
        target = form_target(path, params, device, form, progress)
        model = loaded[1] if loaded is not None and loaded[0] == target else None
        hit = _FUSED_CACHE[key] = compile_program(Compilation(
            target=target, options=options, source=path,
            program=model.program if model is not None else None, model=model,
            progress=progress), ONNX_PASSES)
    return hit


def load_and_fuse(path: str, params: Optional[Mapping[str, int]], device: DeviceSpec,
                  tune: bool = False, progress: Optional[Progress] = None,
                  form: Optional[str] = None,
                  loaded: Optional[tuple[Target, OnnxModel]] = None
                  ) -> tuple[OnnxModel, FuseResult]:
    """:func:`compile_onnx`'s model and fusion result."""
    c = compile_onnx(path, params, device, tune, progress, form, loaded)
    assert c.model is not None
    return c.model, result_of(c)


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
                 params: Optional[Mapping[str, int]] = None, device: DeviceSpec = None) -> OnnxRun:
    """Execute a model once on the OpenCL device (``fused``: the program fusion produced, else
    the one-launch-per-node program): outputs and times."""
    path = os.fspath(path)
    if fused:
        model, result = load_and_fuse(path, params, device)
        program = result.fused.program
    else:
        model = load_onnx_model(path, params=params, target=target_of(device))
        program = model.program
    res = _execute(model, program, inputs, device, profile=True)
    return OnnxRun(_outputs(model, res.buffers), res.wall_time, res.kernel_time, res.launches)


def run_onnx(path: PathLike, inputs: Mapping[str, Any], *, fused: bool = True,
             params: Optional[Mapping[str, int]] = None, device: DeviceSpec = None
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


def verify_onnx(c: Compilation) -> Compilation:
    """The verification pass of an ONNX model: the fused program checked twice, its graph
    outputs against onnxruntime on seeded random inputs, and every compared buffer against the
    unfused program.  ``verified`` holds both (``references``) and their combined verdict;
    ``verification`` the failing check when there is one (what ``FuseResult.ok`` reads)."""
    if not c.options.verify or c.verified is not None:
        return c
    from polyfuse.runtime import verify_programs

    assert c.model is not None and c.fused is not None and c.source is not None
    model, device, seed = c.model, c.options.device, c.options.seed
    c.say(Stage.VERIFY, "verifying against onnxruntime and the unfused program")
    inputs = random_inputs(model, seed)
    fused_out = _run(model, c.fused.program, inputs, device, seed)
    checks = []
    try:
        ref = onnxruntime_reference(c.source, inputs)
    except PolyfuseError as err:
        ort_check: Optional[dict[str, Any]] = {"ok": None, "reason": err.message}
    else:
        ort = _compare(fused_out, ref, "onnxruntime")
        checks.append(ort)
        ort_check = ort.to_dict()
    unfused = verify_programs(model.program, c.fused.program,
                              buffers=list(c.fused.compared_buffers), device=device, seed=seed)
    checks.append(unfused)
    verified = {
        "ok": all(ch.ok for ch in checks),
        "reference": " + ".join(ch.reference for ch in checks),
        "max_abs_err": max(ch.max_abs_err for ch in checks),
        "max_rel_err": max(ch.max_rel_err for ch in checks),
        "rtol": RTOL,
        "atol": ATOL,
        "references": {"onnxruntime": ort_check, "unfused": unfused.to_dict()},
        "device": device_name(device),
    }
    worst = next((ch for ch in checks if not ch.ok), unfused)
    return c.replace(verified=verified, verification=worst)


#: :data:`polyfuse.passes.pipeline.PASSES` with the ONNX model's verification
ONNX_PASSES: tuple[Pass, ...] = tuple(verify_onnx if p is verify else p for p in PASSES)


def fuse_onnx(path: PathLike, *, verify: bool = False, params: Optional[Mapping[str, int]] = None,
              device: DeviceSpec = None, seed: int = 0, tune: bool = False,
              progress: Optional[Progress] = None) -> FuseResult:
    """Load, plan, generate and (``verify``) check the fused program (:func:`verify_onnx`)."""
    c = compile_onnx(os.fspath(path), params, device, tune, progress)
    if verify:
        c = verify_onnx(c.replace(options=dataclasses.replace(c.options, verify=True, seed=seed),
                                  progress=progress))
    return result_of(c)


__all__ = ["ATOL", "ONNX_PASSES", "RTOL", "OnnxRun", "compile_onnx", "execute_onnx", "fuse_onnx",
           "load_and_fuse", "verify_onnx",
           "onnxruntime_reference", "random_inputs", "run_onnx"]
