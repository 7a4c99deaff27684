"""``polyfuse.InferenceSession``: run a fused model the way onnxruntime runs one.

Why a session: fusion, code generation, building, buffer allocation, argument binding and the
evaluation of every size and host expression take milliseconds to seconds, while one inference
of a small graph takes microseconds.  The session does all of that once, at construction
(:class:`~polyfuse.runtime.execute.CompiledProgram`); :meth:`InferenceSession.run` only checks
and uploads the feeds, enqueues the compiled launches (their arguments already set), reads the
outputs and finishes the queue once.  No sympy and no isl on that path.

The calling convention is onnxruntime's, so a session can replace ``onnxruntime.InferenceSession``
in user code::

    >>> import polyfuse, numpy as np                                        # doctest: +SKIP
    >>> sess = polyfuse.InferenceSession("examples/models/bert_qkv.onnx")    # doctest: +SKIP
    >>> q, k, v = sess.run(None, {"X": np.zeros((1, 32, 64), np.float32)})  # doctest: +SKIP

A :class:`~polyfuse.core.program.Program` (e.g. from :func:`polyfuse.load_opencl`) runs the
same way:
its inputs are the buffers the host program writes, its outputs the buffers it reads, each a
flat array of the buffer's element type.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Union

import numpy as np
import pyopencl as cl

from polyfuse.core import cache as disk
from polyfuse.core.program import PolyfuseError, Program, Target
from polyfuse.frontend.onnx import GraphIO, OnnxModel
from polyfuse.runtime.device import (
    DeviceSpec,
    device_for_work,
    device_target,
    get_context,
    get_device,
    stable_device_key,
)
from polyfuse.runtime.execute import CannotRun, CompiledProgram, ProgramImage

if TYPE_CHECKING:
    from polyfuse.fusion.plan import FusionPlan

_ONNX_TYPES = {"float32": "float", "float64": "double", "float16": "float16", "int64": "int64",
               "int32": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8",
               "uint32": "uint32", "uint64": "uint64", "bool": "bool"}


@dataclass(frozen=True)
class NodeArg:
    """A graph input or output as onnxruntime describes it: name, shape, ``tensor(<type>)``."""

    name: str
    shape: list[int]
    type: str


@dataclass(frozen=True)
class _Tensor:
    """A graph input or output bound to bytes ``[start, start + nbytes)`` of a root buffer."""

    name: str
    root: str
    start: int
    shape: tuple[int, ...]
    #: the dtype users see (ONNX's) and the dtype the buffer holds (int64 is run as int32)
    dtype: np.dtype
    buffer_dtype: np.dtype
    nbytes: int

    def arg(self) -> NodeArg:
        return NodeArg(self.name, list(self.shape),
                       f"tensor({_ONNX_TYPES.get(self.dtype.name, self.dtype.name)})")


class InferenceSession:
    """A model or program fused, built and bound once on one device, then run many times.

    ``path_or_program``: an ONNX file, an :class:`~polyfuse.frontend.onnx.OnnxModel` or a
    :class:`~polyfuse.core.program.Program`.  ``params`` fixes symbolic sizes; ``fused=False`` runs
    the one-launch-per-node program (the baseline fusion is measured against); ``tune`` picks
    the fused variant by measurement (:mod:`polyfuse.passes.orchestration_tuning`); ``device`` as
    everywhere (``--device`` syntax, else ``PYOPENCL_CTX``, else the default device).

    An ONNX file's session is kept in the disk cache (:mod:`polyfuse.core.cache`): the evaluated
    program, its device binary and the kernel variant chosen, keyed by the file's bytes, the
    options, the device and polyfuse's source; a later session of the same file, in any
    process, starts from there and :attr:`cached` says so.  ``cache=False`` neither reads nor
    writes it.
    """

    def __init__(self, path_or_program: Union[str, os.PathLike, Program, OnnxModel], *,
                 params: Optional[Mapping[str, int]] = None, fused: bool = True,
                 device: DeviceSpec = None, tune: bool = False, cache: bool = True,
                 _form: Optional[str] = None, _keep: bool = True,
                 _loaded: Optional[tuple[Target, OnnxModel]] = None):
        params = dict(params or {})
        model: Optional[OnnxModel] = None
        #: how the matrix-product kernel form was chosen (ONNX models with MatMul/Gemm)
        self.form_choice: Optional[dict[str, Any]] = None
        #: True when the session was set up from the disk cache (nothing fused or evaluated)
        self.cached = False
        self._cache_key: Optional[str] = None
        self._origin: Optional[tuple[str, dict[str, int], bool, DeviceSpec, bool, str]] = None
        #: why the session runs on its device, when it chose one for this model
        self.device_choice = ""
        if device is None and isinstance(path_or_program, (str, os.PathLike)):
            chosen = session_device(os.fspath(path_or_program), params, cache=cache)
            if chosen is not None:
                device, self.device_choice = chosen
        ctx, queue = get_context(device)
        if isinstance(path_or_program, (str, os.PathLike)):
            path = os.fspath(path_or_program)
            if not os.path.isfile(path):
                raise PolyfuseError(f"no such model file: {path}")
            if _form is None:
                _form = _cached_form(path, params, fused, tune, queue.device) if cache else None
            if _form is not None and cache:
                self._cache_key = _session_key(path, params, fused, tune, _form, queue.device)
                hit = disk.load_record("session", self._cache_key)
                if hit is not None:
                    self._open_cached(*hit, ctx=ctx, queue=queue)
                    self._origin = (path, params, fused, device, tune, _form)
                    return
            if _form is None:
                chosen = _choose_form(path, params, fused, device, tune, cache)
                self.__dict__.update({k: v for k, v in chosen.__dict__.items()
                                      if k != "device_choice"})  # this session chose it
                return
            from polyfuse.apps.onnx_run import form_target, load_and_fuse
            from polyfuse.frontend.onnx import load_onnx_model

            if fused:
                model, result = load_and_fuse(path, params, device, tune, form=_form,
                                              loaded=_loaded)
            else:
                target = form_target(path, params, device, _form)
                model, result = _loaded[1] if _loaded is not None and _loaded[0] == target \
                    else load_onnx_model(path, params=params, target=target), None
            program = model.program
        else:
            if isinstance(path_or_program, OnnxModel):
                model = path_or_program
                program = model.program
            elif isinstance(path_or_program, Program):
                program = path_or_program
            else:
                raise PolyfuseError("InferenceSession needs an ONNX file, an OnnxModel or a "
                                    f"Program, got {type(path_or_program).__name__}")
            from polyfuse.passes.pipeline import fuse_program

            # as compile_onnx: a session does not weigh its groups (cold-start cost)
            result = fuse_program(program, params=params, device=device, tune=tune,
                                  weigh=False) if fused else None
        self._plan: Optional[FusionPlan] = result.plan if result is not None else None
        self._program: Optional[Program] = result.fused.program if result is not None \
            else program
        # run once in a worker first (cached per source, steps and device): a device compiler
        # that aborts must not take the caller's Python process (a notebook's kernel) with it
        try:
            ex = CompiledProgram(self._program, params, None, 0, ctx=ctx, queue=queue,
                                 binary_cache=self._cache_key is not None, check_first=True)
        except CannotRun as err:
            raise PolyfuseError(f"InferenceSession: {err.message}") from None
        self._setup(ex, *self._bind(ex, model), model.io if model is not None else None)
        if _form is not None and self.form_choice is None:
            self.form_choice = {"form": _form, "cached": True}
        if self._cache_key is not None and _keep:
            self._store()

    def _setup(self, ex: CompiledProgram, inputs: tuple[_Tensor, ...],
               outputs: tuple[_Tensor, ...], model_info: Optional[GraphIO]) -> None:
        """Everything :meth:`run` needs, from the compiled program and its graph tensors."""
        self._ex = ex
        #: the OpenCL C source the session built
        self.source: str = ex.image.source
        ex.reset()
        self._inputs, self._outputs = inputs, outputs
        out_roots = {t.root for t in self._outputs}
        # outputs are fetched once at the end; graph inputs are written by the program's own
        # write operations from the host mirror, which run() fills from the feeds
        steps = [s for s in ex.steps
                 if not (s.kind == "read" and s.root in out_roots and not s.blocking)]
        # a feed the program uploads whole before anything else touches its buffer goes to the
        # device straight from the caller's array (no copy into the host mirror)
        lead = next((i for i, s in enumerate(steps) if s.kind != "write"), len(steps))
        self._feed_writes: list[tuple[str, cl.Buffer, int]] = []
        for t in self._inputs:
            hit = next((s for s in steps[:lead] if (s.root, s.start, s.nbytes)
                        == (t.root, t.start, t.nbytes)), None)
            if hit is not None and t.dtype == t.buffer_dtype and t.nbytes and \
                    sum(s.root == t.root for s in steps[:lead]) == 1:
                steps.remove(hit)
                lead -= 1
                self._feed_writes.append((t.name, ex.cl_buffers[t.root], t.start))
        direct = {name for name, _b, _s in self._feed_writes}
        self._steps = tuple(steps)
        self._mirror_views = {t.name: ex.mirror[t.root][t.start:t.start + t.nbytes]
                              .view(t.buffer_dtype).reshape(t.shape) for t in self._inputs
                              if t.name not in direct}
        missing = {t.root for t in self._inputs if t.name not in direct} - \
            {s.root for s in self._steps if s.kind == "write"}
        self._direct = sorted(missing)  # inputs the program never writes: upload them directly
        #: what a valid feed looks like: (name, shape, dtype) per input, for the fast check
        self._feed_sig = tuple((t.name, t.shape, t.dtype) for t in self._inputs)
        # narrowed integers and Gather indices are checked value by value
        self._range_checked = bool(model_info and model_info.index_bounds) or any(
            t.buffer_dtype != t.dtype and t.dtype.kind in "iu" for t in self._inputs)
        self._by_output = {t.name: t for t in self._outputs}
        #: the graph's inputs and outputs (ONNX models; None for a Program), e.g. for
        #: :func:`polyfuse.apps.onnx_run.random_inputs`
        self.io = model_info
        self._bounds = dict(model_info.index_bounds) if model_info is not None else {}
        self.device = ex.queue.device

    # ------------------------------------------------------------------ disk cache
    def _store(self) -> None:
        """Keep what this session set up in the disk cache, under :attr:`_cache_key`."""
        assert self._cache_key is not None
        meta, arrays = self._ex.image.to_record()
        info = self.io
        disk.store_record("session", self._cache_key, {
            "image": meta,
            "tensors": [[t.name, t.root, t.start, list(t.shape), t.dtype.str,
                         t.buffer_dtype.str, t.nbytes] for t in (*self._inputs, *self._outputs)],
            "inputs": len(self._inputs),
            "io": None if info is None else {
                "inputs": [[t.name, t.buffer, list(t.shape), t.dtype.str] for t in info.inputs],
                "outputs": [[t.name, t.buffer, list(t.shape), t.dtype.str]
                            for t in info.outputs],
                "index_bounds": {k: list(v) for k, v in info.index_bounds.items()}},
            "form_choice": self.form_choice}, arrays)

    def _open_cached(self, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray], *,
                     ctx: cl.Context, queue: cl.CommandQueue) -> None:
        """Set the session up from a disk cache entry (:meth:`_store`): no fusion, no
        symbolic work, the device binary where the driver takes it back."""
        from polyfuse.frontend.onnx import TensorInfo

        ex = CompiledProgram.from_image(ProgramImage.from_record(meta["image"], arrays),
                                        ctx=ctx, queue=queue, binary_cache=True)
        tensors = tuple(_Tensor(n, r, s, tuple(shape), np.dtype(dt), np.dtype(bdt), nb)
                        for n, r, s, shape, dt, bdt, nb in meta["tensors"])
        io = meta["io"]
        info = None if io is None else GraphIO(
            tuple(TensorInfo(n, b, tuple(shape), np.dtype(dt)) for n, b, shape, dt in io["inputs"]),
            tuple(TensorInfo(n, b, tuple(shape), np.dtype(dt))
                  for n, b, shape, dt in io["outputs"]),
            {k: (int(v[0]), str(v[1])) for k, v in io["index_bounds"].items()})
        self._plan = self._program = None
        self._setup(ex, tensors[:meta["inputs"]], tensors[meta["inputs"]:], info)
        self.form_choice = {**(meta["form_choice"] or {}), "cached": True}
        self.cached = True

    def _derive(self) -> None:
        """The plan and program of a session set up from the cache, made again (fusion)."""
        from polyfuse.apps.onnx_run import form_target, load_and_fuse
        from polyfuse.frontend.onnx import load_onnx_model

        assert self._origin is not None
        path, params, fused, device, tune, form = self._origin
        if fused:
            _model, result = load_and_fuse(path, params, device, tune, form=form)
            self._plan, self._program = result.plan, result.fused.program
        else:
            self._program = load_onnx_model(
                path, params=params, target=form_target(path, params, device, form)).program
        self._origin = None

    @property
    def plan(self) -> Optional[FusionPlan]:
        """The fusion plan the session runs (``None`` for an unfused session); after a cache
        hit it is planned again when first read (the run path does not need it)."""
        if self._origin is not None:
            self._derive()
        return self._plan

    @property
    def program(self) -> Program:
        """The program the session runs (after a cache hit, made again when first read)."""
        if self._origin is not None:
            self._derive()
        assert self._program is not None
        return self._program

    # ------------------------------------------------------------------ binding
    def _bind(self, ex: CompiledProgram, model: Optional[OnnxModel]
              ) -> tuple[tuple[_Tensor, ...], tuple[_Tensor, ...]]:
        prog = ex.program
        assert prog is not None

        def tensor(name: str, buffer: str, shape: Sequence[int], dtype: np.dtype) -> _Tensor:
            if buffer not in prog.buffers:
                raise PolyfuseError(f"graph tensor {name!r} has no buffer {buffer!r} in the "
                                    f"program {prog.name!r}")
            root, start, _n = ex._extent(buffer, ex.params)
            shape = tuple(int(d) for d in shape)
            nbytes = int(np.prod(shape, dtype=np.int64)) * ex.dtypes[root].itemsize
            return _Tensor(name, root, start, shape, np.dtype(dtype), ex.dtypes[root], nbytes)

        if model is not None:
            return (tuple(tensor(t.name, t.buffer, t.shape, t.dtype) for t in model.inputs),
                    tuple(tensor(t.name, t.buffer, t.shape, t.dtype) for t in model.outputs))
        ins: dict[str, _Tensor] = {}
        outs: dict[str, _Tensor] = {}
        for s in ex.steps:
            target = ins if s.kind == "write" else outs if s.kind == "read" else None
            if target is None or s.root in target:
                continue
            n = ex.sizes[s.root] // ex.dtypes[s.root].itemsize
            target[s.root] = tensor(s.root, s.root, (n,), ex.dtypes[s.root])
        return tuple(ins.values()), tuple(outs.values())

    # ------------------------------------------------------------------ onnxruntime API
    def get_inputs(self) -> list[NodeArg]:
        """The inputs ``run`` needs, in graph order."""
        return [t.arg() for t in self._inputs]

    def get_outputs(self) -> list[NodeArg]:
        """The outputs ``run`` can return, in graph order."""
        return [t.arg() for t in self._outputs]

    def _feeds_valid(self, feeds: Mapping[str, Any]) -> bool:
        """True when every feed has its input's shape and dtype (the common case, checked
        cheaply; :meth:`_check_feeds` says what is wrong otherwise)."""
        if self._range_checked or len(feeds) != len(self._feed_sig):
            return False
        for name, shape, dtype in self._feed_sig:
            arr = feeds.get(name)
            if type(arr) is not np.ndarray or arr.shape != shape or arr.dtype != dtype:
                return False
        return True

    def _check_feeds(self, feeds: Mapping[str, Any]) -> None:
        known = {t.name for t in self._inputs}
        extra = sorted(set(feeds) - known)
        if extra:
            raise PolyfuseError(f"unknown input(s) {', '.join(map(repr, extra))}; the inputs are "
                                f"{', '.join(repr(t.name) for t in self._inputs) or 'none'}")
        for t in self._inputs:
            if t.name not in feeds:
                raise PolyfuseError(f"input {t.name!r} is missing (expected shape "
                                    f"{list(t.shape)}, {t.dtype.name})")
            arr = feeds[t.name]
            if not isinstance(arr, np.ndarray):
                raise PolyfuseError(f"input {t.name!r} must be a numpy array of shape "
                                    f"{list(t.shape)} and dtype {t.dtype.name}, got "
                                    f"{type(arr).__name__}")
            if arr.shape != t.shape:
                raise PolyfuseError(f"input {t.name!r} has shape {list(arr.shape)}, expected "
                                    f"{list(t.shape)}")
            if arr.dtype != t.dtype:
                raise PolyfuseError(f"input {t.name!r} has dtype {arr.dtype.name}, expected "
                                    f"{t.dtype.name} (shape {list(t.shape)})")
            if t.buffer_dtype != t.dtype and t.dtype.kind in "iu" and arr.size:
                info = np.iinfo(t.buffer_dtype)
                if arr.max() > info.max or arr.min() < info.min:
                    raise PolyfuseError(f"input {t.name!r} has values outside "
                                        f"{t.buffer_dtype.name}, which the kernels use")
            size, node = self._bounds.get(t.name, (0, ""))
            if size and arr.size and (arr.max() >= size or arr.min() < -size):
                bad = int(arr.max()) if arr.max() >= size else int(arr.min())
                raise PolyfuseError(f"input {t.name!r}: index {bad} is out of range for {node} "
                                    f"(valid: {-size}..{size - 1})")

    def _fetch_names(self, output_names: Optional[Sequence[str]]) -> list[_Tensor]:
        if output_names is None:
            return list(self._outputs)
        try:
            return [self._by_output[n] for n in output_names]
        except KeyError as err:
            raise PolyfuseError(f"unknown output {err.args[0]!r}; the outputs are "
                                f"{', '.join(repr(t.name) for t in self._outputs)}") from None

    def run(self, output_names: Optional[Sequence[str]], feeds: Mapping[str, np.ndarray],
            run_options: Any = None) -> list[np.ndarray]:
        """Outputs ``output_names`` (all when ``None``) for ``feeds``, as onnxruntime's ``run``."""
        return self._run(output_names, feeds, profile=False)[0]

    def run_profiled(self, feeds: Mapping[str, np.ndarray]) -> tuple[list[np.ndarray], float,
                                                                      float]:
        """``(outputs, kernel seconds, wall seconds)`` of one run, kernel time from profiling
        events: where one inference's time goes (device vs host)."""
        t0 = time.perf_counter()
        outs, kernel = self._run(None, feeds, profile=True)
        return outs, kernel, time.perf_counter() - t0

    def _run(self, output_names: Optional[Sequence[str]], feeds: Mapping[str, np.ndarray],
             profile: bool) -> tuple[list[np.ndarray], float]:
        fetch = self._outputs if output_names is None else self._fetch_names(output_names)
        if not self._feeds_valid(feeds):
            self._check_feeds(feeds)
        ex = self._ex
        pending = ex._pending
        queue = ex.queue
        keep = []  # host arrays of the non-blocking uploads live until the finish below
        for name, mem, start in self._feed_writes:
            arr = feeds[name]
            if not arr.flags.c_contiguous:
                arr = np.ascontiguousarray(arr)
            keep.append(arr)
            pending.append(_write(queue, mem, arr, start, None, False))
        for name, view in self._mirror_views.items():
            np.copyto(view, feeds[name], casting="unsafe")
        for root in self._direct:
            pending.append(_write(queue, ex.cl_buffers[root], ex.mirror[root], 0, None, False))
        events = ex.enqueue(self._steps, profile=profile)
        outs = []
        for t in fetch:
            host = np.empty(t.shape, dtype=t.buffer_dtype)
            if t.nbytes:
                pending.append(_read(queue, ex.cl_buffers[t.root], host, t.start, None, False))
            outs.append(host)
        ex.finish()
        del keep
        kernel = sum((e.profile.end - e.profile.start) * 1e-9 for _, e in events) \
            if profile else 0.0
        return [o if o.dtype == t.dtype else o.astype(t.dtype) for o, t in zip(outs, fetch)], \
            kernel

    @property
    def launches(self) -> int:
        """Kernel launches per run (host loops unrolled)."""
        return self._ex.launch_count


def _copy_fallback(write: bool) -> Any:
    """``enqueue_copy`` with the argument order of pyopencl's direct transfer functions."""
    def transfer(queue: cl.CommandQueue, mem: cl.Buffer, host: np.ndarray, offset: int,
                 wait_for: Any, is_blocking: bool) -> cl.Event:
        if write:
            return cl.enqueue_copy(queue, mem, host, dst_offset=offset, is_blocking=is_blocking)
        return cl.enqueue_copy(queue, host, mem, src_offset=offset, is_blocking=is_blocking)
    return transfer


# pyopencl's direct buffer transfers skip enqueue_copy's argument dispatch (about 1.5 us per
# transfer, a tenth of a small model's run); older or newer builds without them use the
# dispatcher
_write = getattr(cl._cl, "_enqueue_write_buffer", None) or _copy_fallback(True)
_read = getattr(cl._cl, "_enqueue_read_buffer", None) or _copy_fallback(False)


#: bump when the kernels of a form change enough to invalidate cached choices
_FORM_VERSION = 7
#: every kernel form a session may run (:data:`polyfuse.core.program.KERNEL_VARIANTS`)
_FORMS = ("tiled", "blocked", "gpu")


def device_forms(device: DeviceSpec) -> tuple[str, ...]:
    """The kernel forms a session considers on ``device``: the ``gpu`` form's ``__local``
    panels and barriers only pay where work-groups run in parallel lanes, so CPU devices
    skip it (on PoCL its work-groups are loops over work-items that re-read the panels);
    GPUs skip ``blocked``, whose work-items each walk a register block with no ``__local``
    reuse (on an H200 it ran BERT-base's products at 0.05-0.37x cuBLAS and a 12-layer
    encoder 3.4x slower than the ``gpu`` form), which would only cost a cold session its
    build and timing."""
    return ("tiled", "blocked") if device_target(device).is_cpu else ("tiled", "gpu")


def _options(params: Mapping[str, int], fused: bool, tune: bool) -> dict[str, Any]:
    return {"params": sorted(params.items()), "fused": fused, "tune": tune}


def _session_key(path: str, params: Mapping[str, int], fused: bool, tune: bool, form: str,
                 dev: cl.Device) -> str:
    """The disk cache key of a session: the model's bytes, the options, the kernel variant,
    the device and polyfuse's own source."""
    return disk.key([path], {"what": "session", "form": form, **_options(params, fused, tune)},
                    stable_device_key(dev))


def session_device(path: str, params: Mapping[str, int], *, cache: bool = True
                   ) -> Optional[tuple[cl.Device, str]]:
    """The device a session of the ONNX model ``path`` runs on when none is named (neither
    ``device`` nor ``PYOPENCL_CTX``), and why: among the devices the default is chosen from,
    the one with the lowest estimated time of this model
    (:func:`~polyfuse.runtime.device.device_for_work`, from its products' FLOPs and its
    launches, kept in the disk cache by the file's bytes unless ``cache`` is False: shape
    inference of a real-size model costs seconds a cached session does not spend); None where
    the default stands."""
    from polyfuse.frontend.onnx import model_work

    if (os.environ.get("PYOPENCL_CTX", "").strip() or not path.endswith(".onnx")
            or not os.path.isfile(path)):
        return None
    key = disk.key([path], {"what": "work", **dict(params)}) if cache else ""
    raw = disk.load_blob("work", key) if cache else None
    if raw is not None:
        work = json.loads(raw)["work"]
    else:
        try:
            work = model_work(path, params=params)
        except (PolyfuseError, ValueError, IndexError, KeyError):
            return None  # an estimate only: the default device, and the load reports errors
        if cache:
            disk.store_blob("work", key, json.dumps({"work": work}).encode())
    if work is None:
        return None
    return device_for_work(float(work[0]), int(work[1]))


def _form_key(path: str, params: Mapping[str, int], fused: bool, tune: bool,
              dev: cl.Device) -> str:
    """The key of a kernel variant choice: a measurement, kept across edits of polyfuse that
    leave the forms' kernels alone (:data:`_FORM_VERSION`)."""
    return disk.key([path], {"what": "form", "version": _FORM_VERSION,
                             **_options(params, fused, tune)}, stable_device_key(dev),
                    code=False)


def _cached_form(path: str, params: Mapping[str, int], fused: bool, tune: bool,
                 dev: cl.Device) -> Optional[str]:
    """The kernel variant measured for this model on this device before, if any."""
    raw = disk.load_blob("form", _form_key(path, params, fused, tune, dev))
    try:
        form = json.loads(raw)["form"] if raw is not None else None
    except (ValueError, KeyError, TypeError):
        return None
    return form if form in _FORMS else None


#: the form a session runs a model in on a CPU device before it has measured that model: the
#: one its measurement has picked on every CPU device measured so far (both PoCL builds)
USUAL_FORM = "blocked"
#: the same on other devices: the form written for GPUs (``__local`` panels, register tiles)
USUAL_GPU_FORM = "gpu"


def session_form(path: str, params: Optional[Mapping[str, int]] = None,
                 device: DeviceSpec = None, tune: bool = False) -> tuple[str, str]:
    """The kernel form a fused session of ``path`` runs on ``device``, and how that is known:
    the session's measured choice when the disk cache holds one, else :data:`USUAL_FORM`
    (:data:`USUAL_GPU_FORM` off CPUs; measuring the forms at full size is what a session's
    first build pays for)."""
    form = _cached_form(path, dict(params or {}), True, tune, get_device(device))
    if form is not None:
        return form, "the session's measured choice"
    usual = USUAL_FORM if device_target(device).is_cpu else USUAL_GPU_FORM
    return usual, "the session's usual choice; not yet measured for this model"


#: two forms whose predicted times differ by less than this factor are both timed: the model's
#: geomean error on kernels it never saw is 60-105 % per device (docs/performance.md), so a
#: smaller predicted gap does not rank them
FORM_MARGIN = 3.0


def _predicted_forms(path: str, params: Mapping[str, int], device: DeviceSpec
                     ) -> tuple[dict[str, float], str, dict[str, tuple[Target, OnnxModel]]]:
    """The calibrated model's seconds of one run of each form's unfused program, a note (which
    calibration predicted them when it is not the device's own, or why there are none: a
    device with no calibration that is not a CPU, a size the model cannot count), and the
    models loaded for it (the form built next starts from its model: no second load).

    Unfused because fusing is most of a session's build and the forms differ in their
    products, which fusion does not change; the calibration is the one ``polyfuse predict``
    or ``polyfuse roofline`` measured and cached: a session does not calibrate a device (15-30
    s).  A CPU device without one ranks the forms with the calibration shipped for the
    development machine's CPU (:meth:`~polyfuse.perf.model.Calibration.reference_cpu`): the
    forms differ 3-5x at real size, where timing the slow form was most of a cold session."""
    from polyfuse.frontend.onnx import load_onnx_model
    from polyfuse.perf.launches import predict_program, ranking_calibration

    cal, note = ranking_calibration(device, device_target(device).is_cpu)
    if cal is None:
        return {}, note, {}
    out: dict[str, float] = {}
    models: dict[str, tuple[Target, OnnxModel]] = {}
    for form in device_forms(device):
        try:
            target = device_target(device).with_variant(form)
            models[form] = target, load_onnx_model(path, params=dict(params), target=target)
            out[form] = sum(lp.predicted_s * lp.count
                            for lp in predict_program(models[form][1].program, cal,
                                                      params=params))
        except (PolyfuseError, TypeError, ValueError, ZeroDivisionError) as err:
            return {}, f"the model cannot predict the {form} form ({str(err)[:120]})", {}
    return out, note, models


def _wall(sess: InferenceSession, feeds: Mapping[str, np.ndarray]) -> float:
    t0 = time.perf_counter()
    sess.run(None, feeds)
    return time.perf_counter() - t0


def _time_forms(cands: Mapping[str, InferenceSession], feeds: Mapping[str, np.ndarray]
                ) -> dict[str, float]:
    """Median wall seconds of each form's runs, interleaved (9 runs after a warm-up).  A form
    whose first timed run is more than :data:`FORM_MARGIN` times the fastest first run is
    timed no further (its one run is its figure): the slow form's runs were most of an
    uncalibrated cold session (a 12-layer BERT-base's tiled form, 10 runs of 27-49 s), and
    only load slowing one run of the faster form past the margin would change the winner."""
    for c in cands.values():
        c.run(None, feeds)  # warm-up
    samples = {f: [_wall(c, feeds)] for f, c in cands.items()}
    fastest = min(v[0] for v in samples.values())
    live = [f for f, v in samples.items() if v[0] <= FORM_MARGIN * fastest]
    for r in range(3):
        for f in live:
            samples[f] += [_wall(cands[f], feeds) for _ in range(2 if r == 0 else 3)]
    return {f: float(np.median(v)) for f, v in samples.items()}


def _choose_form(path: str, params: Mapping[str, int], fused: bool, device: DeviceSpec,
                 tune: bool, cache: bool) -> InferenceSession:
    """The session of the kernel variant (:data:`polyfuse.core.program.KERNEL_VARIANTS`) that runs
    this model fastest on this device: the model decides, timing confirms.  The calibrated
    model predicts each form; a form predicted more than :data:`FORM_MARGIN` times slower
    than the fastest is neither built nor timed, and the forms left are built and timed
    (all of them when the model cannot predict).  With ``cache``, the choice and the winning
    session are kept in the disk cache.

    Why choose: the blocked variant's kernels are much faster on CPU-like devices, the tiled
    one fuses with one-element-per-work-item consumers; which wins depends on the graph and
    the device.  Why the model first: building and timing the slow form of a real-size model
    was most of a cold session (a BERT-base layer: tiled runs take seconds each).
    """
    predicted, note, loaded = _predicted_forms(path, params, device)
    forms = list(device_forms(device))
    if predicted:
        best_predicted = min(predicted.values())
        forms = [f for f in forms if predicted[f] <= FORM_MARGIN * best_predicted]
    cands = {f: InferenceSession(path, params=params, fused=fused, device=device, tune=tune,
                                 cache=cache, _form=f, _keep=False, _loaded=loaded.get(f))
             for f in forms}
    del loaded
    if len({c.source for c in cands.values()}) == 1:  # e.g. no MatMul/Gemm: nothing to choose
        cands = {forms[0]: cands[forms[0]]}
    walls: dict[str, float] = {}
    if len(cands) > 1:
        from polyfuse.apps.onnx_run import random_inputs

        walls = _time_forms(cands, random_inputs(cands[forms[0]].io))
        best = min(walls, key=walls.__getitem__)
    else:
        best = next(iter(cands))
    decided = ("timing" if walls else "the model" if len(forms) == 1 and predicted
               else "no choice to make")
    winner = cands[best]
    winner.form_choice = {"form": best, "decided_by": decided, "predicted_s": predicted,
                          "wall_s": walls, "cached": False,
                          **({"calibration" if predicted else "why_no_prediction": note}
                             if note else {})}
    if cache:
        disk.store_blob("form", _form_key(path, params, fused, tune, winner.device),
                        json.dumps({"form": best, "decided_by": decided,
                                    "predicted_s": predicted, "wall_s": walls,
                                    "model": path}).encode())
        winner._store()
    return winner


__all__ = ["USUAL_FORM", "USUAL_GPU_FORM", "InferenceSession", "NodeArg", "device_forms",
           "session_device", "session_form"]
