"""Run a whole :class:`~polyfuse.core.program.Program` on an OpenCL device, and time it.

Fusion is checked by running the unfused and the fused program (two ``Program`` records over the
same buffers) on the same random inputs and comparing the final buffers
(:mod:`polyfuse.runtime.verify`), so execution must follow the program model exactly and be
reproducible:

* **Source.** :func:`~polyfuse.c.emit.program_source` regenerates OpenCL C from every kernel's
  syntax tree with the helper functions and file-scope declarations the kernel record holds
  (:mod:`polyfuse.c.emit`).  It is built with ``-cl-std=CL1.2``.
* **Initial contents.** Every root buffer is allocated and filled with seeded random data of its
  element type: ``Buffer.dtype``, else the element type of the first kernel parameter bound to it
  (``float`` → float32, ``int`` → int32, ``uint`` → uint32, ``double`` → float64, ``char`` → int8,
  vectors by their element: ``float4`` → float32), else float32.  Floats are uniform in [-1, 1)
  (so sign-dependent code such as ReLU is exercised); integers are uniform in [0, m) with m the
  smallest element count of any root buffer (at most 1024), so integer buffers used as indices
  stay in bounds of every buffer.  Each buffer's data depends only on the seed, its name, size
  and dtype, so two programs sharing buffer names get the same inputs.  ``inputs`` overrides a
  buffer's initial contents (converted to its element type; shorter arrays fill a prefix);
  ``Program.data`` (e.g. ONNX initializers) gives default contents that ``inputs`` may override.
  A floating-point scalar argument whose value the host computes from data polyfuse does not
  follow (and no ``--param`` gives) is seeded random in the same way, the same in every program.
* **Host operations** run in order with host loops unrolled.  The host side keeps a *mirror* per
  root buffer holding the same initial contents: ``write`` uploads the mirror's range (what the
  host program would upload is unknown to polyfuse; the mirror is the stand-in), ``read``
  downloads into it, ``copy`` copies device to device, ``sync`` needs nothing (one in-order
  queue, finished once at the end) and ``unknown`` raises
  :class:`~polyfuse.core.program.UnsupportedError` (polyfuse cannot execute code it does not know).
* **Compiled once, run many times.**  :class:`CompiledProgram` evaluates every host expression
  (sympy) once and binds every argument once; running it only enqueues (see its docstring).
  :func:`run_program`, :func:`time_program`, :func:`time_interleaved`, verification, the
  autotuner and :class:`polyfuse.InferenceSession` all run programs through it.
* **Sub-buffers** are real OpenCL sub-buffers of the root (``clCreateSubBuffer``); their origin
  must be a multiple of the device's ``MEM_BASE_ADDR_ALIGN``, otherwise a clear error is raised.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import statistics
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import islpy as isl
import numpy as np
import pyopencl as cl
import sympy
from pycparser import c_ast

from polyfuse.c import types
from polyfuse.c.emit import Source, emit_program, program_source
from polyfuse.core.program import (
    ArgBinding,
    BufferRange,
    DeviceQueries,
    HostOp,
    Kernel,
    KernelParam,
    Launch,
    PolyfuseError,
    Program,
    UnsupportedError,
    eval_host_expr,
    eval_host_int,
    host_instances,
    shared_runtime_options,
    unknown_arg,
    unknown_arg_param,
    where,
)
from polyfuse.core.watchdog import stage
from polyfuse.runtime.device import (
    Check,
    DeviceSpec,
    build_log,
    build_program,
    get_context,
    precheck,
)

#: options every program is built with
BUILD_OPTIONS = ("-cl-std=CL1.2",)
#: upper bound of random integer initial values (see module doc)
MAX_RANDOM_INT = 1024

def c_dtype(name: str) -> Optional[np.dtype]:
    """numpy dtype of a C/OpenCL scalar or vector element type name (``float4`` → float32)."""
    dt = types.numpy_dtype(name)
    if dt is not None:
        return dt
    t = types.normalize(name)
    try:
        dt = np.dtype(t)  # numpy spellings (ONNX front-end): float32, int64, ...
    except TypeError:
        return None
    return dt if dt.kind in "biuf" else None


def program_options(program: Program) -> tuple[str, ...]:
    """Compiler options to build ``program`` with: polyfuse's, and the ``-cl-*``/``-w``/
    ``-Werror`` options the host built every one of its kernels with (an option only some
    kernels had cannot apply to one program; ``-cl-std`` given by the host replaces
    polyfuse's)."""
    shared = shared_runtime_options(program.kernels.values())
    base = [o for o in BUILD_OPTIONS if not (o.startswith("-cl-std=") and
                                             any(s.startswith("-cl-std=") for s in shared))]
    return tuple(base + [o for o in shared if o not in base])


def build(program: Program, ctx: cl.Context) -> cl.Program:
    """Build :func:`program_source` (cached); a failure names the program, kernel and log."""
    return _build_source(program, emit_program(program), program_options(program), ctx, False)


def _build_source(program: Program, src: Source, options: tuple[str, ...], ctx: cl.Context,
                  binary_cache: bool) -> cl.Program:
    """:func:`build` of the source already emitted."""
    try:
        return build_program(ctx, src.text, options, binary_cache=binary_cache)
    except PolyfuseError as short:
        log = str(short)
        prog = cl.Program(ctx, src.text)
        try:
            prog.build(options=list(options))
        except cl.Error as err:
            log = build_log(prog, ctx, err)
        culprits = []
        for text in log.splitlines():
            m = re.search(r"\S+?:(\d+):\d+:", text)
            if not m or "error" not in text:
                continue
            ln = int(m.group(1))
            culprits += [n for a, b, n in src.spans if a <= ln <= b and n not in culprits]
        where = f" in {', '.join(culprits)}" if culprits else ""
        raise PolyfuseError(f"building program {program.name!r} failed{where}:\n{log}") from None


# ----------------------------------------------------------------------------------------------
# Host expressions and loops
# ----------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------
# Buffers
# ----------------------------------------------------------------------------------------------


class _DeviceAnswers:
    """:class:`~polyfuse.core.program.DeviceQueries` answered by one OpenCL device; a kernel
    query builds the kernel as the host builds it."""

    def __init__(self, device: DeviceSpec) -> None:
        self.spec = device
        self._ctx: Optional[cl.Context] = None  # made at the first query

    @property
    def ctx(self) -> cl.Context:
        if self._ctx is None:
            self._ctx, _ = get_context(self.spec)
        return self._ctx

    @property
    def name(self) -> str:
        return self.ctx.devices[0].name.strip()

    def device_info(self, param: int) -> Optional[Union[int, str, tuple[int, ...]]]:
        try:
            value = self.ctx.devices[0].get_info(param)
            return value.strip() if isinstance(value, str) else _integer_answer(value)
        except (cl.Error, ValueError, TypeError):
            return None

    def kernel_info(self, param: int, kernel: Kernel) -> Optional[Union[int, tuple[int, ...]]]:
        alone = Program(kernels={kernel.name: kernel}, buffers={}, ops=())
        try:
            built = build(alone, self.ctx)
            return _integer_answer(cl.Kernel(built, kernel.name).get_work_group_info(
                param, self.ctx.devices[0]))
        except (cl.Error, PolyfuseError, ValueError, TypeError):
            return None


def _integer_answer(v: Any) -> Optional[Union[int, tuple[int, ...]]]:
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return int(v)
    if isinstance(v, (list, tuple)) and v and all(isinstance(x, (int, np.integer)) for x in v):
        return tuple(int(x) for x in v)
    return None


def device_queries(device: DeviceSpec = None) -> DeviceQueries:
    """The device's answers to a host's info queries, for the host front-end
    (:func:`polyfuse.frontend.host.load_opencl` ``device_queries``)."""
    return _DeviceAnswers(device)


def buffer_dtypes(program: Program) -> dict[str, np.dtype]:
    """Element dtype of every root buffer (see module doc for the inference)."""
    views: dict[str, list[np.dtype]] = {}
    for name, buf in program.buffers.items():
        root = program.root(name)[0]
        dt = c_dtype(buf.dtype) if buf.dtype else None
        if dt is not None:
            lst = views.setdefault(root, [])
            lst.insert(0, dt) if root == name else lst.append(dt)
    for launch in program.launches:
        kernel = program.kernels.get(launch.kernel)
        if kernel is None:
            continue
        for b in launch.args:
            if b.kind != "buffer" or b.buffer is None or b.buffer not in program.buffers:
                continue
            try:
                p = kernel.param(b.index)
            except KeyError:
                continue
            dt = c_dtype(p.type)
            if dt is not None:
                views.setdefault(program.root(b.buffer)[0], []).append(dt)
    roots = {program.root(n)[0] for n in program.buffers}
    return {r: (views[r][0] if views.get(r) else np.dtype(np.float32)) for r in sorted(roots)}


def _in_model(kernel: Kernel, param: str) -> bool:
    """Whether scalar parameter ``param`` of ``kernel`` may decide where it reads or writes or
    how long it runs: it appears in an iteration domain or an access of the polyhedral model,
    or anywhere in the source but as an operand of a comparison outside a loop's header (a
    non-affine subscript ``a[i * k]`` is over-approximated in the model, yet a random ``k``
    would leave the buffer).  True where the kernel has no model or source to tell."""
    if not kernel.statements or kernel.ast is None or not _only_compared(kernel.ast, param):
        return True
    for st in kernel.statements:
        for rel in (st.domain, *(a.relation for a in st.accesses)):
            pos = rel.find_dim_by_name(isl.dim_type.param, param)
            if pos >= 0 and rel.involves_dims(isl.dim_type.param, pos, 1):
                return True
    return False


def _only_compared(fd: c_ast.FuncDef, param: str) -> bool:
    """Whether every use of ``param`` in a kernel's body is an operand of a comparison that
    is not a loop's condition (``digest == searchDigest0``)."""
    compared: set[int] = set()
    headers: set[int] = set()
    uses: list[c_ast.ID] = []

    class V(c_ast.NodeVisitor):
        def visit_BinaryOp(self, n: c_ast.BinaryOp) -> None:
            if n.op in ("==", "!=", "<", ">", "<=", ">="):
                compared.update(id(x) for x in (n.left, n.right) if isinstance(x, c_ast.ID))
            self.generic_visit(n)

        def visit_ID(self, n: c_ast.ID) -> None:
            if n.name == param:
                uses.append(n)

        def loop(self, n: c_ast.Node) -> None:
            for part in ("init", "cond", "next"):
                sub = getattr(n, part, None)
                if sub is not None:
                    headers.update(id(x) for x in _walk(sub))
            self.generic_visit(n)

        visit_For = visit_While = visit_DoWhile = loop

    V().visit(fd.body)
    return all(id(u) in compared and id(u) not in headers for u in uses)


def _walk(n: c_ast.Node) -> list[c_ast.Node]:
    out = [n]
    for _, ch in n.children():
        out += _walk(ch)
    return out


def random_contents(name: str, nbytes: int, dtype: np.dtype, seed: int, int_bound: int
                    ) -> np.ndarray:
    """Seeded random bytes of a buffer: depends only on seed, name, size and dtype."""
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    n = nbytes // dtype.itemsize
    if dtype.kind == "f":
        vals = (rng.random(n) * 2.0 - 1.0).astype(dtype)
    else:
        bound = int_bound
        if dtype.kind in "iu":
            bound = min(bound, int(np.iinfo(dtype).max) + 1)
        vals = rng.integers(0, max(1, bound), size=n).astype(dtype)
    raw = np.zeros(nbytes, dtype=np.uint8)
    raw[: n * dtype.itemsize] = vals.view(np.uint8)
    return raw


def _as_bytes(data: Any, dtype: np.dtype) -> np.ndarray:
    arr = np.asarray(data)
    if arr.dtype != dtype:
        arr = arr.astype(dtype)
    return np.frombuffer(np.ascontiguousarray(arr).tobytes(), dtype=np.uint8)


def _view(raw: np.ndarray, dtype: np.dtype) -> np.ndarray:
    n = len(raw) // dtype.itemsize
    return raw[: n * dtype.itemsize].view(dtype)


# ----------------------------------------------------------------------------------------------
# Results
# ----------------------------------------------------------------------------------------------


@dataclass
class RunResult:
    """What one execution produced.

    ``buffers``: final device contents of every root buffer (its element dtype);
    ``initial``: the contents it started from (pass them as ``inputs`` to reproduce the run);
    ``reads``: ``(op id, host-loop iteration, data)`` for every host read, in order;
    ``kernel_times``: ``(launch id, seconds)`` per executed launch when profiling;
    ``launches``: number of kernel launches executed (host loops unrolled).
    """

    buffers: dict[str, np.ndarray]
    reads: list[tuple[int, tuple[int, ...], np.ndarray]] = field(default_factory=list)
    kernel_times: list[tuple[int, float]] = field(default_factory=list)
    launches: int = 0
    initial: dict[str, np.ndarray] = field(default_factory=dict)
    wall_time: float = 0.0
    program: str = "program"

    @property
    def kernel_time(self) -> float:
        """Total profiled kernel time in seconds (0 without profiling)."""
        return float(sum(t for _, t in self.kernel_times))


# ----------------------------------------------------------------------------------------------
# Execution
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelCall:
    """A launch's kernel and its evaluated arguments, without a device: ``("buffer", root,
    byte start, byte size)``, ``("local", bytes)`` or ``("scalar", numpy scalar)``."""

    kernel: str
    args: tuple[tuple[Any, ...], ...]


# a launch step: (launch id, the kernel object with its arguments set -- a KernelCall in a
# ProgramImage --, global, local, offset)
_LaunchStep = tuple[int, Union[cl.Kernel, KernelCall], tuple[int, ...],
                    Optional[tuple[int, ...]], Optional[tuple[int, ...]]]


@dataclass(frozen=True)
class _Step:
    """One compiled host-order action; ``kind`` in launch/write/read/copy."""

    kind: str
    op_id: int
    h: tuple[int, ...] = ()
    launch: Optional[_LaunchStep] = None
    root: str = ""
    start: int = 0
    nbytes: int = 0
    #: copy: source root and byte offset
    src_root: str = ""
    src_start: int = 0
    #: read: the host reads into the mirror at once because a later write uploads it again
    blocking: bool = False


@dataclass(frozen=True)
class ProgramImage:
    """Everything :class:`CompiledProgram` derives from a program for one device and parameter
    set, as plain data: the OpenCL source and options, every root buffer's dtype, size and
    initial bytes, and the host-order steps with sizes, NDRanges and arguments evaluated.

    Why: evaluating a large fused program (sympy, isl) takes far longer than running it, and
    none of it depends on the inputs; an image kept on disk (:meth:`to_record`) lets another
    process set the program up with no symbolic work (:meth:`CompiledProgram.from_image`).
    """

    name: str
    source: str
    options: tuple[str, ...]
    dtypes: dict[str, np.dtype]
    sizes: dict[str, int]
    initial: dict[str, np.ndarray]
    steps: tuple[_Step, ...]

    def to_record(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """JSON-able metadata and the initial bytes, for
        :func:`polyfuse.core.cache.store_record`."""
        steps = []
        for st in self.steps:
            d = dataclasses.asdict(st)
            if st.launch is not None:
                lid, call, gs, ls, off = st.launch
                assert isinstance(call, KernelCall)
                d["launch"] = [lid, call.kernel,
                               [[a[0], a[1].dtype.str, a[1].item()] if a[0] == "scalar"
                                else list(a) for a in call.args],
                               gs, ls, off]
            steps.append(d)
        meta = {"name": self.name, "source": self.source, "options": list(self.options),
                "roots": [[r, self.dtypes[r].str, self.sizes[r]] for r in self.dtypes],
                "steps": steps}
        return meta, dict(self.initial)

    @classmethod
    def from_record(cls, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]
                    ) -> ProgramImage:
        """The image :meth:`to_record` wrote."""
        def tup(x: Optional[Sequence[int]]) -> Optional[tuple[int, ...]]:
            return None if x is None else tuple(x)

        steps = []
        for d in meta["steps"]:
            launch = d.pop("launch")
            if launch is not None:
                lid, kernel, args, gs, ls, off = launch
                call = KernelCall(kernel, tuple(
                    ("scalar", np.array(a[2]).astype(np.dtype(a[1]))[()]) if a[0] == "scalar"
                    else tuple(a) for a in args))
                launch = (lid, call, tuple(gs), tup(ls), tup(off))
            steps.append(_Step(**{**d, "h": tuple(d["h"])}, launch=launch))
        return cls(meta["name"], meta["source"], tuple(meta["options"]),
                   {r: np.dtype(dt) for r, dt, _n in meta["roots"]},
                   {r: int(n) for r, _dt, n in meta["roots"]},
                   {r: arrays[r] for r, _dt, _n in meta["roots"]}, tuple(steps))


class _Mirrors(dict):
    """Host mirrors of root buffers, each made from the initial contents when first used: most
    roots (a model's weights) are only ever uploaded, and copying hundreds of MB of them would
    cost more than the upload."""

    def __init__(self, initial: Mapping[str, np.ndarray]):
        super().__init__()
        self._initial = initial

    def __missing__(self, root: str) -> np.ndarray:
        mirror = self[root] = np.array(self._initial[root])
        return mirror


class CannotRun(PolyfuseError):
    """A program's check in a worker (``CompiledProgram(check_first=True)``) failed: the
    device's compiler rejected or crashed on its kernels, or a launch failed."""


class CompiledProgram:
    """A program set up once on a device, ready to run many times with no symbolic work.

    Construction does everything that does not depend on the buffers' contents: it evaluates
    sizes, host loops, argument values, NDRanges and sub-buffer extents (sympy) into a
    :class:`ProgramImage` (:attr:`image`), builds the program, allocates the buffers and creates
    one ``cl.Kernel`` per distinct (kernel, arguments) pair with its arguments set.
    :meth:`from_image` does the second half only, from an image kept by an earlier process.
    :meth:`execute` then only enqueues: uploads of host writes (non-blocking, from the host
    mirror), the launches, copies and reads, and finishes the queue once.  Host ``sync``
    operations need no action: the queue is in order and the host reads nothing before the
    final finish, except a read whose range a later write uploads again, which is done blocking
    at its place.

    :meth:`reset` restores the initial contents; timing reuses one compiled program across
    repeats so that only execution is measured.  ``binary_cache`` builds from (and keeps) the
    device binary in the disk cache (:func:`~polyfuse.runtime.device.build_program`).
    ``check_first`` runs the evaluated image once in a worker process before anything is
    built here (:func:`image_check`, cached per source, steps and device) and raises
    :class:`CannotRun` with why it failed: a device compiler that aborts must not take the
    caller's process with it.  Kernels that differ only in their names are built once
    (:func:`distinct_kernels`).
    """

    def __init__(self, program: Program, params: Optional[Mapping[str, int]] = None,
                 inputs: Optional[Mapping[str, np.ndarray]] = None, seed: int = 0, *,
                 ctx: cl.Context, queue: cl.CommandQueue, binary_cache: bool = False,
                 check_first: bool = False):
        #: the program this was compiled from (None when set up from an image)
        self.program: Optional[Program] = program
        self.params = {k: int(v) for k, v in (params or {}).items()}
        self.seed = seed
        self.align = max(1, int(queue.device.mem_base_addr_align) // 8)
        self.size_t = np.uint64 if int(queue.device.address_bits) == 64 else np.uint32
        # the program's own data (ONNX initializers) is the default; explicit inputs win
        inputs = {**dict(getattr(program, "data", None) or {}), **dict(inputs or {})}
        unknown = sorted(set(inputs) - set(program.buffers))
        if unknown:
            raise PolyfuseError(f"inputs name unknown buffers: {', '.join(unknown)} (program "
                                f"{program.name!r} has {', '.join(sorted(program.buffers))})")
        for name in inputs:
            if program.root(name)[0] != name:
                raise PolyfuseError(f"input {name!r} is a sub-buffer; give the contents of its "
                                    f"root buffer {program.root(name)[0]!r} instead")
        self.dtypes = buffer_dtypes(program)
        sizes: dict[str, int] = {}
        for root in self.dtypes:
            buf = program.buffers[root]
            if buf.size is None:
                if root in inputs:
                    sizes[root] = int(np.asarray(inputs[root]).size) * self.dtypes[root].itemsize
                    continue
                raise PolyfuseError(f"the size of buffer {root!r} is unknown; give its contents "
                                    "in inputs", *where(buf.loc))
            try:
                sizes[root] = eval_host_int(buf.size, self.params, f"size of buffer {root!r}")
            except PolyfuseError as err:
                raise PolyfuseError(err.message, *where(buf.loc)) from None
            if sizes[root] <= 0:
                raise PolyfuseError(f"buffer {root!r} has size {sizes[root]} bytes",
                                    *where(buf.loc))
        counts = [sizes[r] // self.dtypes[r].itemsize for r in self.dtypes]
        int_bound = min([c for c in counts if c > 0] + [MAX_RANDOM_INT])
        self.sizes = sizes
        initial: dict[str, np.ndarray] = {}
        for root, dt in self.dtypes.items():
            data = _as_bytes(inputs[root], dt) if root in inputs else None
            if data is not None and len(data) > sizes[root]:
                raise PolyfuseError(f"input for buffer {root!r} has {len(data)} bytes, the "
                                    f"buffer {sizes[root]}")
            if data is not None and len(data) == sizes[root]:
                # an input that fills its buffer: no random bytes to draw (a real-size
                # model's weights are hundreds of MB); each buffer's draw is seeded by its
                # own name, so the others' contents do not change
                raw = data.copy()
            else:
                raw = random_contents(root, sizes[root], dt, seed, int_bound)
                if data is not None:
                    raw[: len(data)] = data
            initial[root] = raw
        # the kernels' renamed copies are built once (distinct_kernels): launches of a copy
        # launch the kernel it copies, with their own arguments
        self._alias = kernel_aliases(program)
        built = distinct_kernels(program, self._alias)
        src = emit_program(built)
        options = program_options(built)
        self.image = ProgramImage(program.name, src.text, options, self.dtypes, sizes, initial,
                                  self._compile())
        if check_first and program.launches:
            why = precheck(queue.device, [image_check(self.image)])[0]
            if why is not None:
                raise CannotRun(f"the kernels of {program.name!r} cannot run on "
                                f"{queue.device.name.strip()}: {why}")
        self._setup(ctx, queue, _build_source(program, src, options, ctx, binary_cache)
                    if program.launches else None, initial)
        self.steps: tuple[_Step, ...] = self._bind_steps(self.image.steps)
        #: launches per execution (host loops unrolled)
        self.launch_count = sum(1 for s in self.steps if s.kind == "launch")

    @classmethod
    def from_image(cls, image: ProgramImage, *, ctx: cl.Context, queue: cl.CommandQueue,
                   binary_cache: bool = False) -> CompiledProgram:
        """Set up ``image`` on ``queue``'s device: build, allocate, bind; no symbolic work."""
        self = cls.__new__(cls)
        self.program = None
        self.params = {}
        self.dtypes, self.sizes, self.image = dict(image.dtypes), dict(image.sizes), image
        has_launches = any(st.kind == "launch" for st in image.steps)
        self._setup(ctx, queue, build_program(ctx, image.source, image.options,
                                              binary_cache=binary_cache)
                    if has_launches else None, image.initial)
        self.steps = self._bind_steps(image.steps)
        self.launch_count = sum(1 for s in self.steps if s.kind == "launch")
        return self

    def _setup(self, ctx: cl.Context, queue: cl.CommandQueue,
               cl_program: Optional[cl.Program], initial: Mapping[str, np.ndarray]) -> None:
        """The device side: buffers, host mirrors, the built program."""
        self.ctx = ctx
        self.queue = queue
        self.device = queue.device
        self.roots = list(self.dtypes)
        self.initial = dict(initial)
        self.mirror = _Mirrors(self.initial)
        mf = cl.mem_flags
        self.cl_buffers = {r: cl.Buffer(ctx, mf.READ_WRITE, self.sizes[r]) for r in self.roots}
        self._subs: dict[tuple[str, int, int], cl.Buffer] = {}
        self.cl_program = cl_program
        self._kernels: dict[tuple, cl.Kernel] = {}
        self._pending: list[cl.Event] = []
        self._locals: dict[int, cl.LocalMemory] = {}

    def _bind_steps(self, steps: Sequence[_Step]) -> tuple[_Step, ...]:
        """The image's steps with each kernel call made a ``cl.Kernel`` with its arguments set
        (one per distinct kernel and arguments)."""
        out = []
        for st in steps:
            if st.launch is not None:
                lid, call, gs, ls, off = st.launch
                assert isinstance(call, KernelCall)
                key = (call.kernel, *(_arg_key(a) for a in call.args))
                k = self._kernels.get(key)
                if k is None:
                    k = self._kernels[key] = cl.Kernel(self.cl_program, call.kernel)
                    k.set_args(*(self._arg_value(a) for a in call.args))
                st = dataclasses.replace(st, launch=(lid, k, gs, ls, off))
            out.append(st)
        return tuple(out)

    def _arg_value(self, arg: tuple[Any, ...]) -> Any:
        """The value ``set_args`` takes for an evaluated argument (:class:`KernelCall`)."""
        if arg[0] == "local":
            if arg[1] not in self._locals:
                self._locals[arg[1]] = cl.LocalMemory(arg[1])
            return self._locals[arg[1]]
        if arg[0] == "scalar":
            return arg[1]
        _kind, root, start, n = arg
        if start == 0 and n == self.sizes[root]:
            return self.cl_buffers[root]
        sub = self._subs.get((root, start, n))
        if sub is None:
            sub = self._subs[(root, start, n)] = self.cl_buffers[root].get_sub_region(start, n)
        return sub

    # ------------------------------------------------------------------ compilation
    def _compile(self) -> tuple[_Step, ...]:
        steps: list[_Step] = []
        for op, h, env in host_instances(self.program, self.params):
            if isinstance(op, Launch):
                steps.append(_Step("launch", op.id, h, launch=self._compile_launch(op, env)))
            else:
                steps += self._compile_host_op(op, h, env)
        # a read must land in the mirror before a later write of the same root uploads it
        written_after: set[str] = set()
        out = []
        for s in reversed(steps):
            if s.kind == "read" and s.root in written_after:
                s = dataclasses.replace(s, blocking=True)
            if s.kind == "write":
                written_after.add(s.root)
            out.append(s)
        return tuple(reversed(out))

    def _compile_host_op(self, op: HostOp, h: tuple[int, ...], env: Mapping[str, Any]
                         ) -> list[_Step]:
        what = f"{op.name or op.kind} (op {op.id})"
        try:
            if op.kind == "sync":
                return []
            if op.kind in ("write", "read"):
                out = []
                for rg in (op.writes if op.kind == "write" else op.reads):
                    root, start, n = self._range(rg, env, what)
                    out.append(_Step(op.kind, op.id, h, root=root, start=start, nbytes=n))
                return out
            if op.kind == "copy":
                if len(op.reads) != 1 or len(op.writes) != 1:
                    raise UnsupportedError(f"{what}: a copy needs one source and one destination")
                sroot, s0, sn = self._range(op.reads[0], env, what)
                droot, d0, dn = self._range(op.writes[0], env, what)
                n = min(sn, dn)
                if sroot == droot and s0 < d0 + n and d0 < s0 + n:
                    raise PolyfuseError(f"{what}: clEnqueueCopyBuffer source bytes [{s0}, "
                                        f"{s0 + n}) and destination bytes [{d0}, {d0 + n}) of "
                                        f"{sroot!r} overlap (CL_MEM_COPY_OVERLAP)")
                return [_Step("copy", op.id, h, root=droot, start=d0, nbytes=n, src_root=sroot,
                              src_start=s0)] if n else []
            if op.kind == "unknown":
                bufs = sorted({r.buffer for r in op.reads + op.writes})
                raise UnsupportedError(
                    f"cannot execute the call {op.name or '?'}(...) on buffer(s) "
                    f"{', '.join(bufs) or '-'}: polyfuse does not know what it does")
            raise UnsupportedError(f"{what}: unknown host operation kind {op.kind!r}")
        except PolyfuseError as err:
            if err.file is None and op.loc is not None:
                raise type(err)(err.message, op.loc.file, op.loc.line) from None
            raise

    def _compile_launch(self, launch: Launch, env: Mapping[str, Any]) -> _LaunchStep:
        kernel = self.program.kernels.get(launch.kernel)
        if kernel is None:
            raise PolyfuseError(f"launch {launch.id} runs kernel {launch.kernel!r}, which the "
                                "program does not define", *where(launch.loc))
        tag = f"launch {launch.id} ({launch.kernel})"
        try:
            args = [self._arg(kernel, p, launch, env, tag) for p in kernel.params]
            wd = launch.work_dim
            gs = tuple(eval_host_int(x, env, f"{tag} global size") for x in launch.global_size[:wd])
            ls = None if launch.local_size is None else tuple(
                eval_host_int(x, env, f"{tag} local size") for x in launch.local_size[:wd])
            off = None if launch.global_offset is None else tuple(
                eval_host_int(x, env, f"{tag} global offset") for x in launch.global_offset[:wd])
        except PolyfuseError as err:
            if err.file is None and launch.loc is not None:
                raise type(err)(err.message, launch.loc.file, launch.loc.line) from None
            raise
        return launch.id, KernelCall(self._alias.get(launch.kernel, launch.kernel),
                                     tuple(args)), gs, ls, off

    def _arg(self, kernel: Kernel, p: KernelParam, launch: Launch, env: Mapping[str, Any],
             tag: str) -> tuple[Any, ...]:
        try:
            b: Optional[ArgBinding] = launch.arg(p.index)
        except KeyError:
            b = None
        if p.pointer and p.address_space == "local":
            if b is None or b.kind != "local" or b.local_bytes is None:
                raise PolyfuseError(f"{tag}: __local argument {p.name} has no size")
            return ("local", max(1, eval_host_int(b.local_bytes, env, f"{tag} {p.name} bytes")))
        if p.pointer:
            if b is None or b.kind != "buffer" or b.buffer is None:
                raise PolyfuseError(f"{tag}: buffer argument {p.name} is not bound to a buffer")
            if b.buffer not in self.program.buffers:
                raise PolyfuseError(f"{tag}: argument {p.name} names unknown buffer {b.buffer!r}")
            return self._buffer_arg(b.buffer, env)
        dt = c_dtype(p.type)
        if p.type == "size_t":
            dt = np.dtype(self.size_t)
        if dt is None or re.search(r"\d$", p.type):
            raise UnsupportedError(f"{tag}: scalar argument {p.name} of type {p.type} is not "
                                   "supported")
        free = launch.scalar_value(b, p.name) if b is not None and b.kind == "scalar" \
            else unknown_arg(launch.id, p.name)
        # an argument polyfuse does not know, this launch's own (a fused kernel's parameter
        # carries the name of the launch it came from): --param NAME gives every launch's NAME
        given = unknown_arg_param(free)
        if given is not None and str(free) not in env and given in env:
            value = env[given]
        elif isinstance(free, sympy.Symbol) and str(free) not in env and (
                dt.kind == "f" or not _in_model(kernel, p.name)):
            # a value the host computes from its data: like the buffers' contents, seeded
            # random (an integer only where it indexes nothing and bounds no loop the kernel's
            # model follows, so that the fused and unfused runs stay comparable for any value)
            value = random_contents(str(free), dt.itemsize, dt, self.seed,
                                    MAX_RANDOM_INT).view(dt)[0]
        elif given is None or str(free) in env:
            value = eval_host_expr(free, env, f"{tag} argument {p.name}")
        else:
            why = f" (set at {b.loc} to {b.origin})" if b is not None and b.origin else ""
            raise PolyfuseError(f"{tag}: the value of scalar argument {given} is unknown{why}: "
                                f"pass --param {given}=VALUE (params={{'{given}': ...}} in "
                                "Python)")
        return ("scalar", np.array(value).astype(dt)[()])

    # ------------------------------------------------------------------ buffers
    def reset(self) -> None:
        """Upload the initial contents to every root buffer and the host mirrors."""
        for root in self.roots:
            src = self.initial[root]
            if root in self.mirror:
                self.mirror[root][:] = src
                src = self.mirror[root]
            self._pending.append(cl.enqueue_copy(self.queue, self.cl_buffers[root], src,
                                                 is_blocking=False))
        self.finish()

    def _extent(self, name: str, env: Mapping[str, Any]) -> tuple[str, int, int]:
        """(root, byte origin, byte size) of a (sub-)buffer."""
        root, origin = self.program.root(name)
        start = eval_host_int(origin, env, f"origin of buffer {name!r}")
        size = self.program.buffers[name].size
        total = self.sizes[root]
        if name == root:
            return root, 0, total
        n = total - start if size is None else eval_host_int(size, env, f"size of buffer {name!r}")
        if start < 0 or n < 0 or start + n > total:
            raise PolyfuseError(f"sub-buffer {name!r} = bytes [{start}, {start + n}) of "
                                f"{root!r} lies outside its {total} bytes",
                                *where(self.program.buffers[name].loc))
        return root, start, n

    def _buffer_arg(self, name: str, env: Mapping[str, Any]) -> tuple[str, str, int, int]:
        """The (sub-)buffer a kernel argument bound to ``name`` receives, checked to be one
        OpenCL can create on this device."""
        root, start, n = self._extent(name, env)
        if not (start == 0 and n == self.sizes[root]):
            if start % self.align:
                raise PolyfuseError(
                    f"sub-buffer {name!r} starts at byte {start} of {root!r}, not a multiple of "
                    f"the device's MEM_BASE_ADDR_ALIGN ({self.align} bytes): OpenCL cannot "
                    "create it on this device", *where(self.program.buffers[name].loc))
            if n == 0:
                raise PolyfuseError(f"sub-buffer {name!r} is empty",
                                    *where(self.program.buffers[name].loc))
        return ("buffer", root, start, n)

    def _range(self, rg: BufferRange, env: Mapping[str, Any], what: str) -> tuple[str, int, int]:
        root, start, n = self._extent(rg.buffer, env)
        off = eval_host_int(rg.offset, env, f"{what} offset")
        size = n - off if rg.size is None else eval_host_int(rg.size, env, f"{what} size")
        if off < 0 or size < 0 or off + size > n:
            raise PolyfuseError(f"{what}: bytes [{off}, {off + size}) outside buffer "
                                f"{rg.buffer!r} ({n} bytes)")
        return root, start + off, size

    # ------------------------------------------------------------------ running
    def enqueue(self, steps: Sequence[_Step], profile: bool = False,
                reads: Optional[list[tuple[int, tuple[int, ...], np.ndarray]]] = None
                ) -> list[tuple[int, cl.Event]]:
        """Enqueue ``steps`` in order without waiting (except blocking reads); return the
        launch events when ``profile``.  Non-blocking reads append ``(op, h, array)`` to
        ``reads``; the arrays are valid after the queue is finished."""
        queue = self.queue
        events: list[tuple[int, cl.Event]] = []
        nd_range = cl.enqueue_nd_range_kernel
        for s in steps:
            if s.kind == "launch":
                lid, k, gs, ls, off = s.launch  # type: ignore[misc]
                try:
                    evt = nd_range(queue, k, gs, ls, global_work_offset=off)
                except cl.Error as err:
                    raise PolyfuseError(f"launch {lid} ({k.function_name}): enqueue failed with "
                                        f"global size {gs}, local size {ls}: {err}",
                                        *self._where(lid)) from None
                if profile:
                    events.append((lid, evt))
            else:
                try:
                    evt = self._enqueue_host(s, reads)
                except cl.Error as err:
                    op = self.program.op(s.op_id) if self.program is not None else None
                    raise PolyfuseError(f"{op.name or op.kind if op else s.kind} (op {s.op_id}) "
                                        f"failed on the device: {err}",
                                        *self._where(s.op_id)) from None
                if evt is not None:
                    self._pending.append(evt)
        return events

    def _where(self, op_id: int) -> tuple[Optional[str], Optional[int]]:
        """Where the host program does operation ``op_id`` (unknown without the program)."""
        return where(self.program.op(op_id).loc) if self.program is not None else (None, None)

    def finish(self) -> None:
        """Wait for everything enqueued; host arrays of transfers may be released after.

        A kernel that fails while it runs surfaces here, as the queue's error: NVIDIA's driver,
        for one, drops the whole queue after an access outside a buffer or ``__local`` array
        (``INVALID_COMMAND_QUEUE``), where PoCL reads or writes whatever is there."""
        try:
            self.queue.finish()
        except cl.Error as err:
            kernels = ", ".join(dict.fromkeys(
                self.program.op(s.launch[0]).kernel for s in self.steps if s.kind == "launch"))
            raise PolyfuseError(f"program {self.program.name!r}: the device failed while running "
                                f"its kernels ({kernels}): {err}; a kernel may access memory "
                                "outside a buffer or __local array (the device's driver may then "
                                "drop the command queue)") from None
        self._pending.clear()

    def _enqueue_host(self, s: _Step,
                      reads: Optional[list[tuple[int, tuple[int, ...], np.ndarray]]]
                      ) -> Optional[cl.Event]:
        """Enqueue one host write, read or copy (see :meth:`enqueue`).

        pyopencl's event of a non-blocking transfer waits for it when it is garbage-collected,
        so the caller keeps it until :meth:`finish`."""
        queue = self.queue
        if s.kind == "write":
            if s.nbytes:
                return cl.enqueue_copy(queue, self.cl_buffers[s.root],
                                       self.mirror[s.root][s.start:s.start + s.nbytes],
                                       dst_offset=s.start, is_blocking=False)
        elif s.kind == "read":
            dst = (self.mirror[s.root][s.start:s.start + s.nbytes] if s.blocking
                   else np.empty(s.nbytes, dtype=np.uint8))
            evt = None
            if s.nbytes:
                evt = cl.enqueue_copy(queue, dst, self.cl_buffers[s.root], src_offset=s.start,
                                      is_blocking=s.blocking)
            if reads is not None:
                reads.append((s.op_id, s.h, dst.copy() if s.blocking else dst))
            return evt
        elif s.nbytes:  # copy
            return cl.enqueue_copy(queue, self.cl_buffers[s.root], self.cl_buffers[s.src_root],
                                   byte_count=s.nbytes, src_offset=s.src_start,
                                   dst_offset=s.start)
        return None

    def execute(self, profile: bool = False) -> RunResult:
        """Run every op in host order; return final contents, reads and kernel times."""
        raw_reads: list[tuple[int, tuple[int, ...], np.ndarray]] = []
        t0 = time.perf_counter()
        events = self.enqueue(self.steps, profile, raw_reads)
        self.finish()
        wall = time.perf_counter() - t0
        times = [(lid, (e.profile.end - e.profile.start) * 1e-9) for lid, e in events]
        reads = []
        for (op_id, h, raw), s in zip(raw_reads, (s for s in self.steps if s.kind == "read")):
            if not s.blocking:
                self.mirror[s.root][s.start:s.start + s.nbytes] = raw
            reads.append((op_id, h, _view(raw, self.dtypes[s.root])))
        final = {}
        for root in self.roots:
            raw = np.empty(self.sizes[root], dtype=np.uint8)
            self._pending.append(cl.enqueue_copy(self.queue, raw, self.cl_buffers[root],
                                                 is_blocking=False))
            final[root] = _view(raw, self.dtypes[root])
        self.finish()
        initial = {r: _view(raw.copy(), self.dtypes[r]) for r, raw in self.initial.items()}
        return RunResult(final, reads, times, self.launch_count, initial, wall,
                         self.image.name)


def _arg_key(arg: Any) -> Any:
    """What identifies an argument value for sharing kernel objects between launches."""
    if isinstance(arg, np.generic):
        return (arg.dtype.str, arg.tobytes())
    return id(arg)


def compile_program(program: Program, *, params: Optional[Mapping[str, int]] = None,
                    inputs: Optional[Mapping[str, np.ndarray]] = None, seed: int = 0,
                    device: DeviceSpec = None, ctx: Optional[cl.Context] = None,
                    queue: Optional[cl.CommandQueue] = None) -> CompiledProgram:
    """Set ``program`` up on a device once (:class:`CompiledProgram`), initial contents loaded."""
    ctx, queue = _context(device, ctx, queue)
    ex = CompiledProgram(program, params, inputs, seed, ctx=ctx, queue=queue)
    ex.reset()
    return ex


def _context(device: DeviceSpec, ctx: Optional[cl.Context], queue: Optional[cl.CommandQueue]
             ) -> tuple[cl.Context, cl.CommandQueue]:
    if queue is not None:
        return queue.context, queue
    if ctx is not None:
        dev = ctx.devices[0]
        return ctx, cl.CommandQueue(ctx, dev,
                                    properties=cl.command_queue_properties.PROFILING_ENABLE)
    return get_context(device)


def run_program(
    program: Program,
    *,
    params: Optional[Mapping[str, int]] = None,
    inputs: Optional[Mapping[str, np.ndarray]] = None,
    seed: int = 0,
    device: DeviceSpec = None,
    ctx: Optional[cl.Context] = None,
    queue: Optional[cl.CommandQueue] = None,
    profile: bool = False,
) -> RunResult:
    """Execute ``program`` once on an OpenCL device from seeded random contents (module doc)."""
    ctx, queue = _context(device, ctx, queue)
    if profile and not queue.properties & cl.command_queue_properties.PROFILING_ENABLE:
        raise PolyfuseError("profiling needs a queue with PROFILING_ENABLE (use get_context)")
    return compile_program(program, params=params, inputs=inputs, seed=seed, ctx=ctx,
                           queue=queue).execute(profile=profile)


def _program_trial(program: Program, params: Mapping[str, int], ctx: cl.Context,
                   queue: cl.CommandQueue, _built: cl.Program) -> None:
    """In a precheck worker: every launch of ``program`` once, from random contents."""
    ex = CompiledProgram(program, params, ctx=ctx, queue=queue)
    ex.reset()
    _launch_each(ex)


def _image_trial(image: ProgramImage, ctx: cl.Context, queue: cl.CommandQueue,
                 _built: cl.Program) -> None:
    """In a precheck worker: every step of ``image`` once; the roots :func:`image_check` left
    behind (float data) are not uploaded (their host mirrors are zeros): what a launch
    computes from them does not decide whether the device can build and run it."""
    initial = {r: image.initial[r] if r in image.initial else np.zeros(n, np.uint8)
               for r, n in image.sizes.items()}
    ex = CompiledProgram.from_image(dataclasses.replace(image, initial=initial), ctx=ctx,
                                    queue=queue)
    for root, data in image.initial.items():
        cl.enqueue_copy(queue, ex.cl_buffers[root], data)
    _launch_each(ex)


def _launch_each(ex: CompiledProgram) -> None:
    """Each step of ``ex`` once, each launch in a stage naming its kernel (PoCL compiles a
    kernel for its work-group size at its first launch, and that compile can abort)."""
    where_ = ex.device.name.strip()
    for s in ex.steps:
        if s.kind != "launch":
            ex.enqueue([s])
            continue
        with stage(f"running OpenCL kernel '{s.launch[1].function_name}' on {where_}"):  # type: ignore[index]
            ex.enqueue([s])
            ex.finish()
    ex.finish()


def kernel_aliases(program: Program) -> dict[str, str]:
    """Each kernel's name -> the first kernel of ``program`` that differs from it only in its
    name (the same text and build options; itself when none before it does): a model's
    repeated layers launch renamed copies of one kernel."""
    src = emit_program(program)
    lines = src.text.split("\n")
    first: dict[tuple[str, tuple[str, ...]], str] = {}
    alias: dict[str, str] = {}
    for a, b, name in src.spans:
        kernel = program.kernels.get(name)
        if kernel is None:
            continue  # a helper function
        text = re.sub(rf"\b{re.escape(name)}\b", "\0", "\n".join(lines[a - 1:b]))
        alias[name] = first.setdefault((text, kernel.build_options), name)
    return alias


def distinct_kernels(program: Program, aliases: Optional[Mapping[str, str]] = None) -> Program:
    """``program`` with each kernel's renamed copies left out and their launches launching it
    (:func:`kernel_aliases`); ``program`` itself when it has none.

    What a device compiler does with a kernel depends on its text, its build options and the
    launch's work-group shape, not on its name: a 12-layer encoder built as it is compiles
    every kernel 12 times (at the build, and on PoCL again at each kernel's first launch)."""
    alias = kernel_aliases(program) if aliases is None else aliases
    if all(alias.get(n, n) == n for n in program.kernels):
        return program
    ops = tuple(dataclasses.replace(op, kernel=alias[op.kernel])
                if isinstance(op, Launch) and alias.get(op.kernel, op.kernel) != op.kernel else op
                for op in program.ops)
    return dataclasses.replace(program, ops=ops, kernels={
        n: k for n, k in program.kernels.items() if alias.get(n, n) == n})


def program_check(program: Program, params: Optional[Mapping[str, int]] = None) -> Check:
    """The :class:`~polyfuse.runtime.device.Check` of running ``program`` once: its source built
    as :class:`CompiledProgram` builds it (renamed kernel copies left out,
    :func:`distinct_kernels`) and every launch made.  Float data (weights) stays behind, the
    worker runs on random contents; integer data (indices) travels, so data-dependent
    subscripts stay in range."""
    data = {k: v for k, v in (program.data or {}).items()
            if program.buffers[k].size is None or np.asarray(v).dtype.kind in "iub"}
    reduced = distinct_kernels(program)
    light = dataclasses.replace(reduced, data=data)
    values = {k: int(v) for k, v in (params or {}).items()}
    geometry = [(op.kernel, op.global_size, op.local_size, op.global_offset, op.loops)
                for op in light.launches]
    return Check(program_source(reduced), program_options(reduced),
                 functools.partial(_program_trial, light, values),
                 repr((sorted(values.items()), geometry)))


def image_check(image: ProgramImage) -> Check:
    """The :class:`~polyfuse.runtime.device.Check` of running ``image`` once, exactly as it
    will run here: the same source (renamed kernel copies already left out) and the same
    evaluated steps, so the worker does no symbolic work.  The initial bytes of float roots
    (a model's weights: hundreds of MB) stay behind and are zeros there; integer roots travel,
    so data-dependent subscripts stay in range."""
    ints = {r: a for r, a in image.initial.items() if image.dtypes[r].kind in "iub"}
    light = dataclasses.replace(image, initial=ints)
    launches = [(s.launch[1].kernel, s.launch[1].args, *s.launch[2:])  # type: ignore[union-attr,index]
                for s in image.steps if s.launch is not None]
    return Check(image.source, image.options, functools.partial(_image_trial, light),
                 repr((sorted(image.sizes.items()), launches)))


def precheck_programs(programs: Sequence[Program], params: Optional[Mapping[str, int]] = None,
                      device: DeviceSpec = None) -> list[Optional[str]]:
    """Why each program cannot be built and run on ``device`` (None: it can), each run once in
    a worker process first (:func:`~polyfuse.runtime.device.precheck`, cached): a device
    compiler that aborts costs a reason, not the caller's process."""
    return precheck(device, [program_check(p, params) for p in programs])


# ----------------------------------------------------------------------------------------------
# Timing
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProgramTiming:
    """Medians over repeats, in seconds: total kernel time (profiling events) and wall time.

    ``per_launch`` gives, per launch id, the median over repeats of the summed time of its
    instances (a launch inside a host loop runs several times per execution).
    """

    program: str
    kernel_time: float
    wall_time: float
    launches: int
    per_launch: dict[int, float]
    kernel_samples: tuple[float, ...]
    wall_samples: tuple[float, ...]

    @property
    def spread(self) -> float:
        """IQR / median of the kernel-time samples (0 = stable)."""
        q1, q3 = np.percentile(self.kernel_samples, [25, 75])
        return float((q3 - q1) / self.kernel_time) if self.kernel_time > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"program": self.program, "kernel_time": self.kernel_time,
                "wall_time": self.wall_time, "launches": self.launches,
                "per_launch": {str(k): v for k, v in self.per_launch.items()},
                "kernel_samples": list(self.kernel_samples),
                "wall_samples": list(self.wall_samples), "spread": self.spread}


def time_program(
    program: Program,
    *,
    params: Optional[Mapping[str, int]] = None,
    repeat: int = 5,
    warmup: int = 1,
    seed: int = 0,
    device: DeviceSpec = None,
    ctx: Optional[cl.Context] = None,
    queue: Optional[cl.CommandQueue] = None,
    budget_s: Optional[float] = None,
) -> ProgramTiming:
    """Time whole executions: the buffers are reset to the same contents before each one.
    ``budget_s`` bounds the measured runs: as many as fit in it at the last warm-up's wall
    time, at least one and at most ``repeat`` (a real-size model runs for seconds)."""
    if repeat < 1:
        raise ValueError("repeat must be >= 1")
    ctx, queue = _context(device, ctx, queue)
    if not queue.properties & cl.command_queue_properties.PROFILING_ENABLE:
        raise PolyfuseError("time_program needs a queue with profiling enabled (get_context)")
    ex = CompiledProgram(program, params, None, seed, ctx=ctx, queue=queue)
    return _time_compiled(ex, repeat, warmup, budget_s)


def runs_within(budget_s: Optional[float], one_run_s: float, repeat: int) -> int:
    """How many runs of ``one_run_s`` seconds fit in ``budget_s``: between 1 and ``repeat``."""
    if budget_s is None or one_run_s <= 0:
        return repeat
    return max(1, min(repeat, int(budget_s / one_run_s)))


def _time_compiled(ex: CompiledProgram, repeat: int, warmup: int,
                   budget_s: Optional[float] = None) -> ProgramTiming:
    """Profiled executions of a compiled program, each from its initial contents."""
    for _ in range(max(0, warmup)):
        ex.reset()
        t0 = time.perf_counter()
        ex.enqueue(ex.steps)
        ex.finish()
        repeat = runs_within(budget_s, time.perf_counter() - t0, repeat)
    kernel: list[float] = []
    wall: list[float] = []
    per: dict[int, list[float]] = {s.launch[0]: [] for s in ex.steps if s.launch is not None}
    for _ in range(repeat):
        ex.reset()
        t0 = time.perf_counter()
        events = ex.enqueue(ex.steps, profile=True)
        ex.finish()
        wall.append(time.perf_counter() - t0)
        sums: dict[int, float] = dict.fromkeys(per, 0.0)
        for lid, e in events:
            sums[lid] += (e.profile.end - e.profile.start) * 1e-9
        kernel.append(sum(sums.values()))
        for lid, t in sums.items():
            per[lid].append(t)
    return ProgramTiming(ex.image.name, statistics.median(kernel), statistics.median(wall),
                         ex.launch_count, {lid: statistics.median(v) for lid, v in per.items()},
                         tuple(kernel), tuple(wall))


@dataclass(frozen=True)
class InterleavedTiming:
    """Samples of one program (or callable) from :func:`time_interleaved`, in seconds."""

    kernel_samples: tuple[float, ...]
    wall_samples: tuple[float, ...]

    @property
    def kernel_time(self) -> Optional[float]:
        return float(np.median(self.kernel_samples)) if self.kernel_samples else None

    @property
    def wall_time(self) -> Optional[float]:
        return float(np.median(self.wall_samples)) if self.wall_samples else None

    @property
    def spread(self) -> float:
        """IQR / median of the kernel-time samples (0 = stable)."""
        med = self.kernel_time
        if not med:
            return 0.0
        q1, q3 = np.percentile(self.kernel_samples, [25, 75])
        return float((q3 - q1) / med)


def time_interleaved(
    programs: Mapping[str, Program],
    *,
    params: Optional[Mapping[str, int]] = None,
    repeat: int = 20,
    rounds: int = 5,
    ctx: Optional[cl.Context] = None,
    queue: Optional[cl.CommandQueue] = None,
    device: DeviceSpec = None,
    extra: Optional[Mapping[str, Callable[[], Any]]] = None,
) -> dict[str, InterleavedTiming]:
    """Time several programs (and ``extra`` callables, wall time only) in alternating rounds.

    On a shared machine the load drifts over a benchmark; timing A fully and then B would put
    the drift into the ratio.  Each of ``rounds`` rounds runs every program ``repeat / rounds``
    times (one warm-up in the first round), so all see the same conditions.
    """
    ctx, queue = _context(device, ctx, queue)
    per = max(1, -(-repeat // rounds))
    kern: dict[str, list[float]] = {k: [] for k in [*programs, *(extra or {})]}
    wall: dict[str, list[float]] = {k: [] for k in kern}
    if not queue.properties & cl.command_queue_properties.PROFILING_ENABLE:
        raise PolyfuseError("time_interleaved needs a queue with profiling enabled (get_context)")
    compiled = {name: CompiledProgram(prog, params, None, 0, ctx=ctx, queue=queue)
                for name, prog in programs.items()}
    for r in range(rounds):
        for name, ex in compiled.items():
            t = _time_compiled(ex, per, 1 if r == 0 else 0)
            kern[name].extend(t.kernel_samples)
            wall[name].extend(t.wall_samples)
        for name, fn in (extra or {}).items():
            if r == 0:
                fn()
            for _ in range(per):
                t0 = time.perf_counter()
                fn()
                wall[name].append(time.perf_counter() - t0)
    return {k: InterleavedTiming(tuple(kern[k]), tuple(wall[k])) for k in kern}


__all__ = [
    "CannotRun",
    "CompiledProgram",
    "compile_program",
    "image_check",
    "precheck_programs",
    "program_check",
    "InterleavedTiming",
    "time_interleaved",
    "BUILD_OPTIONS",
    "ProgramTiming",
    "RunResult",
    "buffer_dtypes",
    "build",
    "program_options",
    "c_dtype",
    "host_instances",
    "program_source",
    "random_contents",
    "run_program",
    "time_program",
]
