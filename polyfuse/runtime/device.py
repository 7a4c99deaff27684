"""OpenCL device selection, device limits and profiled kernel timing.

Everything that runs kernels (verification, autotuning, micro-benchmarks) goes through this module
so that device choice (``--device PLATFORM:DEVICE`` or ``PYOPENCL_CTX``), limits and timing are
done one way.  Limits are always *queried* from the device, never assumed: PoCL on a CPU and a GPU
differ by orders of magnitude in work-group size and local memory.

Timing uses OpenCL profiling events (``event.profile.end - event.profile.start``), i.e. device
execution time without host overhead; a benchmark is repeated and summarized by its median, with
the spread (IQR / median) saying how much to trust it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Optional, TypeVar, Union

import numpy as np
import pyopencl as cl

from polyfuse.core import cache, drivers
from polyfuse.core.program import (
    KernelVariant,
    PolyfuseError,
    Target,
)
from polyfuse.core.watchdog import WorkerCrashed, call_with_budget, stage

DeviceSpec = Union[str, "cl.Device", None]

# A GPU driver installed but not registered is visible only when registered before the ICD
# loader's first enumeration, which happens in this module (polyfuse.core.drivers).
drivers.apply()


# --------------------------------------------------------------------------- selection


def list_devices() -> list[tuple[str, cl.Platform, cl.Device]]:
    """All devices as ``("P:D", platform, device)``; empty when no OpenCL platform is installed."""
    try:
        platforms = cl.get_platforms()
    except cl.Error:  # no ICD at all: clGetPlatformIDs fails with PLATFORM_NOT_FOUND_KHR
        return []
    out = []
    for pi, platform in enumerate(platforms):
        try:
            devices = platform.get_devices()
        except cl.Error:
            continue
        for di, dev in enumerate(devices):
            out.append((f"{pi}:{di}", platform, dev))
    return out


def platform_version(platform: cl.Platform) -> str:
    """The platform's version up to its build details (``OpenCL 3.0 PoCL 3.0-rc2``): what tells
    two installs of one driver apart, whose platform names are the same."""
    return re.split(r"\s{2,}|,", platform.version.strip(), maxsplit=1)[0]


def icd_library(platform: cl.Platform) -> Optional[str]:
    """The driver library file behind ``platform`` (None when it cannot be told).

    Every platform the ICD loader hands out begins with the driver's dispatch table (the
    ``cl_khr_icd`` contract), so the library holding its ``clGetPlatformInfo`` entry is the
    driver: pip's PoCL and the system's PoCL name the same platform, but not the same file.
    """
    import ctypes

    class _DlInfo(ctypes.Structure):
        _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p),
                    ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]

    try:
        table = ctypes.c_void_p.from_address(platform.int_ptr).value
        entry = ctypes.c_void_p.from_address(table + ctypes.sizeof(ctypes.c_void_p)).value \
            if table else None
        info = _DlInfo()
        if not entry or not ctypes.CDLL(None).dladdr(ctypes.c_void_p(entry), ctypes.byref(info)):
            return None
    except (OSError, AttributeError, ValueError):
        return None
    return os.fsdecode(info.fname) if info.fname else None


def device_list_text() -> str:
    """Every device as ``P:D name (platform version)``, for errors that reject a ``--device``."""
    items = [f"{i} {d.name.strip()} ({platform_version(p)})" for i, p, d in list_devices()]
    return "devices: " + ("; ".join(items) if items else "none")


def _match(items: Sequence[Any], token: str, what: str, spec: str) -> list[int]:
    """Indices selected by one spec token: an index, or a case-insensitive name substring."""
    token = token.strip()
    if token == "":
        return list(range(len(items)))
    if token.isdigit():
        idx = int(token)
        if idx >= len(items):
            raise PolyfuseError(
                f"invalid OpenCL device '{spec}': {what} index {idx} out of range "
                f"(there are {len(items)}; {device_list_text()})"
            )
        return [idx]
    hits = [i for i, it in enumerate(items) if token.lower() in it.name.lower()]
    if not hits:
        raise PolyfuseError(
            f"invalid OpenCL device '{spec}': no {what} name contains '{token}' "
            f"({device_list_text()})"
        )
    return hits


def get_device(device: DeviceSpec = None) -> cl.Device:
    """The device named by ``device`` (a ``cl.Device``, or ``"P:D"``), else ``PYOPENCL_CTX``.

    A spec is ``PLATFORM[:DEVICE]`` where each part is an index or a case-insensitive substring of
    the name, as in pyopencl's ``PYOPENCL_CTX``.  Without either, :data:`DEFAULT_RULE` (only
    devices that build and run a probe kernel count: a driver can list a device whose compiler
    rejects the host CPU, as pip's PoCL 3.0 does on CPUs newer than its LLVM).  Raises
    :class:`PolyfuseError` when there is no device or the spec does not name one (listing
    the devices).
    """
    if isinstance(device, cl.Device):
        return device
    spec = device if device is not None else os.environ.get("PYOPENCL_CTX", "")
    spec = spec.strip()
    try:
        platforms = cl.get_platforms()
    except cl.Error:
        platforms = []
    if not platforms:
        raise PolyfuseError("no OpenCL platform found (install pocl-binary-distribution)")
    if not spec:
        return _first_working_device(platforms)
    parts = spec.split(":")
    if len(parts) > 2:
        raise PolyfuseError(f"invalid OpenCL device '{spec}': expected PLATFORM:DEVICE "
                            f"({device_list_text()})")
    for pi in _match(platforms, parts[0], "platform", spec):
        try:
            devs = platforms[pi].get_devices()
        except cl.Error:
            devs = []
        if not devs:
            continue
        dev_token = parts[1] if len(parts) == 2 else ""
        try:
            hits = _match(devs, dev_token, "device", spec)
        except PolyfuseError:
            if len(parts) == 2 and dev_token.isdigit():
                raise
            continue
        return devs[hits[0]]
    raise PolyfuseError(
        f"invalid OpenCL device '{spec}': no matching device ({device_list_text()})")


#: one context per device: a program built in it (:func:`build_program` keeps programs per
#: context) is found again by whoever asks for the device next, e.g. the build pass's program
#: by the session that runs it (one compile of a real-size model is seconds to minutes)
_CONTEXTS: dict[cl.Device, cl.Context] = {}


def get_context(device: DeviceSpec = None) -> tuple[cl.Context, cl.CommandQueue]:
    """The device's context (one per device and process) and a new in-order queue with
    profiling on (for :func:`time_kernel`)."""
    dev = get_device(device)
    try:
        ctx = _CONTEXTS.get(dev)
        if ctx is None:
            ctx = _CONTEXTS[dev] = cl.Context([dev])
        queue = cl.CommandQueue(ctx, dev, properties=cl.command_queue_properties.PROFILING_ENABLE)
    except cl.Error as err:
        raise PolyfuseError(f"cannot open OpenCL device '{dev.name.strip()}': {err}") from None
    return ctx, queue


# --------------------------------------------------------------------------- limits


def _query(dev: cl.Device, *names: str) -> Any:
    """First device attribute among ``names`` the driver answers (vendor extensions vary)."""
    for name in names:
        try:
            value = getattr(dev, name)
        except (AttributeError, cl.Error, cl.LogicError, cl.RuntimeError):
            continue
        if value is not None:
            return value
    return None


@dataclass(frozen=True)
class DeviceLimits:
    """What a device allows and what it is, queried from the driver (never hard-coded)."""

    name: str
    platform: str
    vendor: str
    device_type: str
    driver_version: str
    opencl_version: str
    compute_units: int
    max_clock_mhz: int
    max_work_group_size: int
    max_work_item_sizes: tuple[int, ...]
    local_mem_size: int
    global_mem_size: int
    max_mem_alloc_size: int
    global_mem_cache_size: int
    global_mem_cacheline_size: int
    native_vector_width_float: int
    preferred_work_group_size_multiple: Optional[int]
    sub_group_size: Optional[int]
    fp32_fma: bool = False

    @classmethod
    def from_device(cls, dev: cl.Device) -> DeviceLimits:
        """Query every field from ``dev``; optional ones are ``None`` when not queryable."""
        sub_group = _query(dev, "sub_group_sizes_intel", "warp_size_nv", "wavefront_width_amd")
        if isinstance(sub_group, (list, tuple)):
            sub_group = max(sub_group) if sub_group else None
        pref = _query(dev, "preferred_work_group_size_multiple")
        return cls(
            name=dev.name.strip(),
            platform=dev.platform.name.strip(),
            vendor=dev.vendor.strip(),
            device_type=cl.device_type.to_string(dev.type),
            driver_version=dev.driver_version.strip(),
            opencl_version=dev.version.strip(),
            compute_units=int(dev.max_compute_units),
            max_clock_mhz=int(dev.max_clock_frequency),
            max_work_group_size=int(dev.max_work_group_size),
            max_work_item_sizes=tuple(int(s) for s in dev.max_work_item_sizes),
            local_mem_size=int(dev.local_mem_size),
            global_mem_size=int(dev.global_mem_size),
            max_mem_alloc_size=int(dev.max_mem_alloc_size),
            global_mem_cache_size=int(dev.global_mem_cache_size),
            global_mem_cacheline_size=int(dev.global_mem_cacheline_size),
            native_vector_width_float=int(dev.native_vector_width_float),
            preferred_work_group_size_multiple=int(pref) if pref else None,
            sub_group_size=int(sub_group) if sub_group else None,
            fp32_fma=bool(dev.single_fp_config & cl.device_fp_config.FMA),
        )

    @property
    def is_cpu(self) -> bool:
        """CPU devices want contiguous per-work-item chunks, GPUs want coalesced access."""
        return "CPU" in self.device_type.upper()

    def target(self, extensions: frozenset[str] = frozenset()) -> Target:
        """The device-free :class:`~polyfuse.core.program.Target` the planning stages take, its
        blocked products as wide as two of the device's native float vectors."""
        from polyfuse.oplib.linalg import block_cols_for

        return Target(name=self.name, max_work_group_size=self.max_work_group_size,
                      max_work_item_sizes=self.max_work_item_sizes,
                      local_mem_size=self.local_mem_size, sub_group_size=self.sub_group_size,
                      preferred_work_group_size_multiple=self.preferred_work_group_size_multiple,
                      preferred_vector_width=self.native_vector_width_float,
                      extensions=extensions, is_cpu=self.is_cpu,
                      kernel=KernelVariant(block_cols=block_cols_for(
                          self.native_vector_width_float),
                          vector_width=max(1, self.native_vector_width_float),
                          device_groups=self.compute_units))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["max_work_item_sizes"] = list(self.max_work_item_sizes)
        return d


def device_limits(device: DeviceSpec = None) -> DeviceLimits:
    """:class:`DeviceLimits` of the selected device."""
    return DeviceLimits.from_device(get_device(device))


def device_target(device: DeviceSpec = None) -> Target:
    """The :class:`~polyfuse.core.program.Target` of the selected device (limits and extensions)."""
    dev = get_device(device)
    return DeviceLimits.from_device(dev).target(frozenset(dev.extensions.split()))


def device_key(device: Union[cl.Device, DeviceLimits, str, None]) -> str:
    """A stable, file-name-safe id of a device + driver, for caches of measurements and tunings.

    Built from platform, device name, driver version, compute units, local memory and work-group
    size, so a driver upgrade or a different machine yields a different key, while re-runs yield
    the same one.  Not the global memory size: PoCL reports the host's free memory there, which
    changes from one process to the next.
    """
    lim = device if isinstance(device, DeviceLimits) else device_limits(device)
    ident = "|".join(
        str(x)
        for x in (lim.platform, lim.name, lim.vendor, lim.driver_version, lim.compute_units,
                  lim.local_mem_size, lim.max_work_group_size)
    )
    digest = hashlib.sha1(ident.encode()).hexdigest()[:10]
    slug = re.sub(r"[^a-z0-9]+", "-", f"{lim.platform} {lim.name}".lower()).strip("-")
    return f"{slug[:48]}-{digest}"


def stable_device_key(dev: cl.Device) -> str:
    """Platform name and version, device name and driver version: what decides how the device
    compiles and runs a kernel.  Keys caches of compiled binaries and of everything planned for
    the device; two installs of one driver (pip's PoCL and the system's) differ by version."""
    return "|".join(x.strip() for x in (dev.platform.name, dev.platform.version, dev.name,
                                        dev.driver_version))


# --------------------------------------------------------------------------- building

#: (id(context), source, options) -> (context, program); holding the context keeps its id unique.
_PROGRAM_CACHE: dict[tuple[int, str, str], tuple[cl.Context, cl.Program]] = {}
#: the keys of :data:`_PROGRAM_CACHE` whose binary the disk cache holds
_BINARIES_KEPT: set[tuple[int, str, str]] = set()


def build_log(program: cl.Program, ctx: cl.Context, err: Exception) -> str:
    """The compiler's log of a failed build on every device of ``ctx`` (else the error text)."""
    logs = []
    for dev in ctx.devices:
        try:
            logs.append(program.get_build_info(dev, cl.program_build_info.LOG))
        except cl.Error:
            pass
    return "\n".join(s.strip() for s in logs if s and s.strip()) or str(err)


@contextlib.contextmanager
def quiet_build() -> Iterator[None]:
    """pyopencl warns (``CompilerWarning``) whenever a successful build printed anything: the
    NVIDIA driver's remarks on generated kernels filled every ``fuse`` run with them.  A failed
    build's log is reported in full either way."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cl.CompilerWarning)
        yield


def _binary_key(ctx: cl.Context, source: str, options: Sequence[str]) -> str:
    ident = [[stable_device_key(d) for d in ctx.devices], source, list(options)]
    return hashlib.sha256(json.dumps(ident).encode()).hexdigest()


def _from_binaries(ctx: cl.Context, source: str, options: Sequence[str]
                   ) -> Optional[cl.Program]:
    """The program built from the device binaries cached for this source, or None when there
    are none or the driver rejects them (a driver update can make old binaries invalid)."""
    binary = cache.load_blob("binaries", _binary_key(ctx, source, options))
    if binary is None or len(ctx.devices) != 1:
        return None
    try:
        with quiet_build():
            return cl.Program(ctx, list(ctx.devices), [binary]).build(options=list(options))
    except cl.Error:
        return None


def _store_binaries(ctx: cl.Context, source: str, options: Sequence[str],
                    prog: cl.Program) -> None:
    """Keep the device's compiled binary (``CL_PROGRAM_BINARIES``) where the driver gives one."""
    if len(ctx.devices) != 1:
        return
    try:
        binary = prog.get_info(cl.program_info.BINARIES)[0]
    except cl.Error:
        return
    if binary:
        cache.store_blob("binaries", _binary_key(ctx, source, options), bytes(binary))


def driver_keeps_binaries(dev: cl.Device) -> bool:
    """Whether asking ``dev``'s driver for its binaries (``CL_PROGRAM_BINARIES``) is worth it.

    Not on PoCL: it keeps every program and work-group function it compiles in a disk cache
    of its own, so a program built from source in a later process costs what one built from
    a binary does (a BERT-base layer's session from the disk cache: 0.10-0.12 s either way),
    while the query compiles every kernel again (1-3 s of a cold session).  And on PoCL's
    ``basic`` device (3.x) each query leaks a reference on the kernels' loaded work-group
    functions, in a cache of 128 shared by the process: once the pinned ones fill it, every
    launch loads its shared object again (``dlopen``).  A process that had built a dozen
    models ran a 13-launch model in 600 us instead of 32."""
    return "portable computing language" not in dev.platform.name.lower()


def build_program(ctx: cl.Context, source: str, options: Sequence[str] = (), *,
                  binary_cache: bool = False) -> cl.Program:
    """Build (once per context, source and options) and explain failures in one line.

    A build error becomes a :class:`PolyfuseError` with the compiler's first error line.  PoCL
    built against an LLVM that does not know the host CPU fails every build with "unknown target
    CPU 'generic'"; that case gets a hint, since it is an installation problem, not a kernel bug.
    ``binary_cache`` starts from the device binary a previous process kept in the disk cache
    (:mod:`polyfuse.core.cache`) and keeps the binary of a build from source, where
    :func:`driver_keeps_binaries`; it is off by default because asking a driver for its binary
    can cost as much as the build.
    """
    binary_cache = binary_cache and driver_keeps_binaries(ctx.devices[0])
    key = (id(ctx), source, " ".join(options))
    hit = _PROGRAM_CACHE.get(key)
    if hit is not None:
        if binary_cache and key not in _BINARIES_KEPT:  # built before without keeping it
            _store_binaries(ctx, source, options, hit[1])
            _BINARIES_KEPT.add(key)
        return hit[1]
    prog = _from_binaries(ctx, source, options) if binary_cache else None
    if prog is not None:
        _PROGRAM_CACHE[key] = (ctx, prog)
        _BINARIES_KEPT.add(key)
        return prog
    try:
        with stage(f"building OpenCL kernel {kernel_names(source)} on "
                   f"{ctx.devices[0].name.strip()}"):
            with quiet_build():
                prog = cl.Program(ctx, source).build(options=list(options))
    except (cl.RuntimeError, cl.LogicError) as err:
        text = str(err)
        lines = [ln.strip() for ln in text.splitlines() if "error" in ln.lower()]
        detail = next((ln for ln in lines if not ln.startswith("clBuildProgram")), text.strip())
        if "unknown target CPU" in text:
            raise PolyfuseError(
                f"the OpenCL compiler cannot build kernels on this device ({detail}): PoCL's "
                "LLVM does not recognise this host CPU; use a PoCL built with a newer LLVM or "
                "select another device with --device / PYOPENCL_CTX"
            ) from None
        raise PolyfuseError(f"OpenCL build failed: {detail}") from None
    if binary_cache:
        _store_binaries(ctx, source, options, prog)
        _BINARIES_KEPT.add(key)
    _PROGRAM_CACHE[key] = (ctx, prog)
    return prog


_KERNEL_CACHE: dict[tuple[int, str], cl.Kernel] = {}


def build_kernel(ctx: cl.Context, source: str, name: str,
                 options: Sequence[str] = ()) -> cl.Kernel:
    """One reusable ``cl.Kernel`` per program and name (``prog.name`` makes a new one each time)."""
    prog = build_program(ctx, source, options)
    key = (id(prog), name)
    kernel = _KERNEL_CACHE.get(key)
    if kernel is None:
        kernel = _KERNEL_CACHE[key] = cl.Kernel(prog, name)
    return kernel


def kernel_names(source: str) -> str:
    """The kernels a source defines, for messages: ``'poly'``, ``'a', 'b'``."""
    names = re.findall(r"__kernel\s+void\s+(\w+)", source) or ["(no kernel)"]
    shown = ", ".join(f"'{n}'" for n in names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def device_spec(dev: cl.Device) -> str:
    """``"P:D"`` of ``dev`` in :func:`list_devices` (how a worker process finds it again)."""
    for dev_id, _, d in list_devices():
        if d == dev:
            return dev_id
    raise PolyfuseError(f"OpenCL device '{dev.name.strip()}' is not listed by its platform")


#: a trial: run a built program's kernels once, as the real launches will (module level, so
#: a worker can unpickle it)
Trial = Callable[[cl.Context, cl.CommandQueue, cl.Program], None]


@dataclass(frozen=True)
class Check:
    """One kernel source to try in a worker before this process builds it: built with
    ``options``, each kernel created by name, then ``trial`` run once (without one, the
    program's binaries are asked for, which makes PoCL generate code).  ``key`` names what the
    trial's launches depend on beyond the source (sizes, work-group shapes)."""

    source: str
    options: tuple[str, ...] = ()
    trial: Optional[Trial] = None
    key: str = ""


#: a kernel name that makes a check abort its worker while building it: no driver crashes on
#: demand, and tests must show that a native crash is contained
CRASH_HOOK = "POLYFUSE_TEST_CRASH_KERNEL"
#: the stage a worker is in during each check, ending with the check's index
_CHECK_STAGE = re.compile(r"^checking OpenCL kernel .* \(check (\d+)\)$")


def _check_job(spec: str, checks: Sequence[Check], log: str,
               progress: Callable[[str], None]) -> list[Optional[str]]:
    """In a worker: each check on device ``spec``; why each failed (None: it built and ran).
    Native stderr goes to ``log``: a compiler's last words are the parent's to report."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 2)
    os.close(fd)
    warnings.simplefilter("ignore", cl.CompilerWarning)
    ctx = cl.Context([get_device(spec)])
    queue = cl.CommandQueue(ctx)
    doomed = os.environ.get(CRASH_HOOK)
    out: list[Optional[str]] = []
    for i, check in enumerate(checks):
        with stage(f"checking OpenCL kernel {kernel_names(check.source)} (check {i})"):
            out.append(_check_one(ctx, queue, check, doomed))
    return out


def _check_one(ctx: cl.Context, queue: cl.CommandQueue, check: Check,
               doomed: Optional[str]) -> Optional[str]:
    """Why ``check`` fails in this (worker) process, None when it builds and runs."""
    names = re.findall(r"__kernel\s+void\s+(\w+)", check.source)
    try:
        if doomed and doomed in names:
            with stage(f"building OpenCL kernel '{doomed}' on {ctx.devices[0].name.strip()}"):
                os.abort()
        prog = build_program(ctx, check.source, check.options)
        for name in names:
            try:
                cl.Kernel(prog, name)
            except cl.Error:  # PoCL caches a build its compiler crashed on, with no kernels
                return (f"kernel '{name}' is missing from the built program: the device "
                        "compiler failed on it (in an earlier process, if PoCL cached the build)")
        if check.trial is not None:
            check.trial(ctx, queue, prog)
            queue.finish()
        else:  # PoCL compiles lazily, at the first launch or when asked for binaries
            with stage(f"generating code for OpenCL kernel {kernel_names(check.source)} on "
                       f"{ctx.devices[0].name.strip()}"):
                prog.get_info(cl.program_info.BINARY_SIZES)
    except PolyfuseError as err:
        return err.message.splitlines()[0]
    except cl.Error as err:
        return (str(err).strip().splitlines() or [type(err).__name__])[0]
    return None


def _compiler_key(dev: cl.Device) -> str:
    """What decides how a device compiles (not device_key: PoCL's reported memory follows the
    host's free memory, the compiler does not)."""
    return "|".join(x.strip() for x in (dev.platform.name, dev.platform.version, dev.name,
                                        dev.driver_version))


#: bump when what a check does changes, so cached verdicts are redone
_CHECK_VERSION = 2
#: check digest -> why it failed (None: it built and ran)
_CHECKED: dict[str, Optional[str]] = {}


def _check_digest(dev_key: str, check: Check) -> str:
    ident = "\0".join([dev_key, str(_CHECK_VERSION), os.environ.get(CRASH_HOOK, ""),
                        " ".join(check.options), check.key, check.source])
    return hashlib.sha1(ident.encode()).hexdigest()


def _check_cache_file(digest: str) -> str:
    return os.path.join(_cache_dir(), "precheck", f"{digest}.json")


def _cached_verdict(digest: str) -> tuple[bool, Optional[str]]:
    """(found, reason) from memory, then disk: a new process then pays no worker again."""

    if digest in _CHECKED:
        return True, _CHECKED[digest]
    try:
        with open(_check_cache_file(digest), encoding="utf-8") as fh:
            why = json.load(fh)["reason"]
    except (OSError, ValueError, KeyError, TypeError):
        return False, None
    _CHECKED[digest] = why if isinstance(why, str) else None
    return True, _CHECKED[digest]


def _store_verdict(digest: str, why: Optional[str]) -> None:

    _CHECKED[digest] = why
    path = _check_cache_file(digest)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            json.dump({"reason": why}, fh)
    except OSError:
        pass  # an unwritable cache only costs the check next time


def _last_words(log: str) -> str:
    """``; LLVM ERROR: Cannot select: i64 = fadd``: the error line a crashed worker wrote,
    without the compiler's node addresses, or nothing."""
    try:
        with open(log, encoding="utf-8", errors="replace") as fh:
            lines = [ln.strip() for ln in fh if "ERROR" in ln or "error:" in ln]
    except OSError:
        return ""
    if not lines:
        return ""
    text = re.sub(r"\s*0x[0-9a-f]+(:|,)?", "", lines[0])
    return "; " + (text[:117] + "..." if len(text) > 120 else text)


def precheck(device: DeviceSpec, checks: Sequence[Check]) -> list[Optional[str]]:
    """Why each check fails on ``device`` (None: it builds and runs), found in a worker process
    first, once per device and check (cached in memory and on disk): the device compiler can
    abort the process (PoCL's LLVM: "Cannot select ... fma"), at the build or lazily at the
    first launch, and then only that kernel is lost, with the stage and signal as its reason,
    instead of the whole command or the caller's Python session."""
    dev = get_device(device)
    dev_key = _compiler_key(dev)
    digests = [_check_digest(dev_key, c) for c in checks]
    todo: dict[str, Check] = {}
    for d, c in zip(digests, checks):
        if d not in todo and not _cached_verdict(d)[0]:
            todo[d] = c
    pending = list(todo.items())
    current = [-1]  # the check the worker is in

    def seen(name: str) -> None:
        m = _CHECK_STAGE.match(name)
        if m:
            current[0] = int(m.group(1))

    while pending:
        current[0] = -1
        with tempfile.TemporaryDirectory(prefix="polyfuse-check-") as tmp:
            log = os.path.join(tmp, "stderr")
            try:
                reasons = call_with_budget(
                    _check_job, (device_spec(dev), [c for _, c in pending], log), on_stage=seen)
            except WorkerCrashed as err:
                i = current[0]
                if i < 0:  # before any check: the device itself is broken
                    raise
                reasons = [None] * i + [f"{err.stage}: crashed ({err.signal or 'no signal'}"
                                        f"{_last_words(log)})"]
        for (d, _), why in zip(pending, reasons):
            _store_verdict(d, why)
        pending = pending[len(reasons):]
    return [_cached_verdict(d)[1] for d in digests]


_WORKING_DEVICE: list[cl.Device] = []
#: the devices the default was chosen among and their speed figures (several devices only)
_CANDIDATES: list[tuple[cl.Device, Optional[DeviceSpeed]]] = []
#: why the default device was chosen (for ``polyfuse devices``)
_DEFAULT_REASON: list[str] = []

# PoCL offers a single-threaded ``basic`` device beside the default ``pthread`` one only when
# asked through POCL_DEVICES, read once when the ICD loads.  Expose both (the user's own
# setting wins) so the default choice below can measure them.
os.environ.setdefault("POCL_DEVICES", "pthread basic")


def _pins_pocl_workers() -> bool:
    """Whether PoCL's ``pthread`` workers should each be pinned to their own CPU
    (``POCL_AFFINITY``, read once when the device starts).

    Unpinned, Linux's scheduler packs the workers onto one CPU after they have idled (their
    tracked load decays within tens of milliseconds) and spreads them again only after some
    50-80 ms of load; a whole process can stay in the packed state.  On this project's 2-CPU
    machine a ResNet stem ran 1.28 ms unpinned and 0.72 pinned, the same kernels.  PoCL pins
    worker ``i`` to CPU ``i``, so it is asked to only when the process may run on every CPU
    (a process confined by ``taskset`` or a cpuset keeps the scheduler's placement); the
    user's own setting wins."""
    if not hasattr(os, "sched_getaffinity"):
        return False
    return os.sched_getaffinity(0) == set(range(os.cpu_count() or 0))


if _pins_pocl_workers():
    os.environ.setdefault("POCL_AFFINITY", "1")


#: the product of the speed probe, (M, K, N): one BERT-base projection at sequence length
#: 128, in the library's ``blocked`` MatMul (the form sessions run on CPUs)
PRODUCT_SHAPE = (128, 768, 768)
#: launches in the speed probe's chain (one finish at the end)
CHAIN_LAUNCHES = 16
#: the representative model the score estimates: one BERT-base encoder layer at sequence
#: length 128, whose products are about 12 times the probe product's FLOPs (1.86 GFLOP) and
#: which runs as about 16 launches once fused
MIX_PRODUCTS = 12


@dataclass(frozen=True)
class DeviceSpeed:
    """What the speed probe measured on a device, in seconds: one ``PRODUCT_SHAPE`` product
    (throughput) and a chain of ``CHAIN_LAUNCHES`` small dependent launches (latency)."""

    product: float
    chain: float

    def estimate(self, flops: float, launches: float) -> float:
        """Estimated seconds of work of ``flops`` in products and ``launches`` launches: the
        probe product's seconds per FLOP and the chain's seconds per launch."""
        m, k, n = PRODUCT_SHAPE
        return flops / (2 * m * k * n) * self.product + launches / CHAIN_LAUNCHES * self.chain

    @property
    def score(self) -> float:
        """Estimated seconds of one representative layer (:data:`MIX_PRODUCTS` products and
        one launch chain): what the default choice minimizes."""
        m, k, n = PRODUCT_SHAPE
        return self.estimate(MIX_PRODUCTS * 2 * m * k * n, CHAIN_LAUNCHES)

    def text(self) -> str:
        m, k, n = PRODUCT_SHAPE
        return (f"product {m}x{k}x{n} {self.product * 1e3:.2f} ms, {CHAIN_LAUNCHES} launches "
                f"{self.chain * 1e3:.2f} ms, estimated layer {self.score * 1e3:.1f} ms")


def _speed_bench(spec: str) -> tuple[Callable[[], None], Callable[[], None], tuple[object, ...]]:
    """On device ``spec``: (one product, one launch chain, what must stay alive meanwhile)."""
    from polyfuse.oplib import op_kernel  # the library's own kernel, as a session builds it

    dev = get_device(spec)
    ctx = cl.Context([dev])
    queue = cl.CommandQueue(ctx)
    chain = build_kernel(ctx, "__kernel void polyfuse_speed(__global float *a) {"
                         " const int i = get_global_id(0); a[i] = a[i] * 0.5f + 1.0f; }",
                         "polyfuse_speed")
    mf = cl.mem_flags
    m, k, n = PRODUCT_SHAPE
    opk = op_kernel("MatMul", {}, [(m, k), (k, n)], [(m, n)], name="polyfuse_speed_mm",
                    max_work_group_size=dev.max_work_group_size,
                    local_mem_size=dev.local_mem_size,
                    variant=device_target(dev).with_variant("blocked").kernel)
    product = build_kernel(ctx, opk.source, opk.name)
    rng = np.random.default_rng(0)
    # kept by the caller: a kernel's arguments do not keep their buffers alive
    buffers = tuple(cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR,
                              hostbuf=rng.standard_normal(shape, dtype=np.float32))
                    for shape in ((m, k), (k, n))) + (
        cl.Buffer(ctx, mf.WRITE_ONLY, 4 * m * n), cl.Buffer(ctx, mf.READ_WRITE, 4 * 4096))
    product.set_args(*buffers[:3])
    chain.set_args(buffers[3])

    def launches() -> None:
        for _ in range(CHAIN_LAUNCHES):
            cl.enqueue_nd_range_kernel(queue, chain, (4096,), (64,))
        queue.finish()

    def matmul() -> None:
        cl.enqueue_nd_range_kernel(queue, product, opk.global_size, opk.local_size)
        queue.finish()

    return matmul, launches, (ctx, queue, buffers)


#: rounds of the speed probe (each device runs one product and one chain per round)
SPEED_ROUNDS = 10


def _speed_job(specs: Sequence[str], progress: Callable[[str], None]) -> list[DeviceSpeed]:
    """In a worker (a device compiler may abort on the product): both figures of the speed
    probe on each device of ``specs``, wall time launch to finish, the devices taking turns
    round by round so that they see the same load, each figure the best of
    :data:`SPEED_ROUNDS` after a warm-up (tens of ms in all on a CPU): on a shared machine
    the least disturbed run is what a device can do, where a median follows others' load."""
    warnings.simplefilter("ignore", cl.CompilerWarning)
    progress("building the speed probe's kernels")
    benches = [_speed_bench(spec) for spec in specs]
    progress("running the speed probe")
    best = [[float("inf"), float("inf")] for _ in specs]
    for rnd in range(SPEED_ROUNDS + 1):
        for (matmul, launches, _), fig in zip(benches, best):
            for i, fn in enumerate((matmul, launches)):
                t0 = time.perf_counter()
                fn()
                if rnd:  # round 0 warms up
                    fig[i] = min(fig[i], time.perf_counter() - t0)
    return [DeviceSpeed(product=p, chain=c) for p, c in best]


#: bump when the speed probe changes, so cached figures are measured again
_SPEED_VERSION = 1
_SPEEDS: dict[str, Optional[DeviceSpeed]] = {}


def _speed_cache_path() -> str:
    return os.path.join(_cache_dir(), "device_speed.json")


def _speed_key(dev: cl.Device) -> str:
    return f"{stable_device_key(dev)}|speed {_SPEED_VERSION}"


def _measure_speeds(devs: Sequence[cl.Device], timeout: float) -> list[Optional[DeviceSpeed]]:
    """The speed probe on ``devs`` together in one worker; when that fails, on each alone,
    so that a device whose compiler crashes on the product costs only its own figures."""
    try:
        return list(call_with_budget(_speed_job, ([device_spec(d) for d in devs],),
                                     timeout=timeout))
    except (WorkerCrashed, PolyfuseError):
        if len(devs) == 1:
            return [None]
    return [_measure_speeds([d], timeout)[0] for d in devs]


def device_speeds(devs: Sequence[cl.Device], timeout: float = 300.0
                  ) -> list[Optional[DeviceSpeed]]:
    """The speed probe's figures on each of ``devs``, measured once per device (in a worker:
    a native crash costs only the measurement; the devices not yet measured together) and
    cached under the :func:`stable_device_key`, which does not follow the host's free
    memory.  None for a device whose probe crashed or overran (not cached)."""
    path = _speed_cache_path()
    try:
        with open(path, encoding="utf-8") as fh:
            table = json.load(fh)
    except (OSError, ValueError):
        table = {}
    for dev in devs:
        entry = table.get(_speed_key(dev)) if isinstance(table, dict) else None
        if _speed_key(dev) not in _SPEEDS and isinstance(entry, dict):
            with contextlib.suppress(KeyError, TypeError, ValueError):
                _SPEEDS[_speed_key(dev)] = DeviceSpeed(float(entry["product"]),
                                                       float(entry["chain"]))
    todo = [d for d in devs if _speed_key(d) not in _SPEEDS]
    if todo:
        for dev, speed in zip(todo, _measure_speeds(todo, timeout)):
            _SPEEDS[_speed_key(dev)] = speed
            if speed is not None:
                _remember(path, _speed_key(dev), {"product": speed.product, "chain": speed.chain})
    return [_SPEEDS[_speed_key(d)] for d in devs]


#: the rule :func:`get_device` follows without a spec, as ``polyfuse devices`` prints it
DEFAULT_RULE = (
    "--device, else PYOPENCL_CTX, else among the devices that build and run a probe kernel the "
    "one with the lowest estimated time of a BERT-base layer (seq 128): "
    f"{MIX_PRODUCTS} x a {PRODUCT_SHAPE[0]}x{PRODUCT_SHAPE[1]}x{PRODUCT_SHAPE[2]} blocked "
    f"MatMul + a chain of {CHAIN_LAUNCHES} small launches, so a GPU unless measurement says a "
    "CPU device is faster; measured once per device and cached"
)

D = TypeVar("D")


def choose_default(working: Sequence[D],
                   measure: Callable[[Sequence[D]], Sequence[Optional[DeviceSpeed]]]
                   ) -> tuple[int, list[Optional[DeviceSpeed]]]:
    """:data:`DEFAULT_RULE` over ``working`` devices: (index chosen, figures of each); a device
    whose probe failed (None) is chosen only when every probe failed (then the first)."""
    speeds = list(measure(working))
    scores = [s.score if s is not None else float("inf") for s in speeds]
    return scores.index(min(scores)), speeds


def _cache_dir() -> str:
    return os.environ.get("POLYFUSE_CACHE") or os.path.expanduser("~/.cache/polyfuse")


def _first_working_device(platforms: list) -> cl.Device:
    """The default device (:data:`DEFAULT_RULE`) among those that build and run a probe
    kernel, each measured once and cached on disk."""
    if _WORKING_DEVICE:
        return _WORKING_DEVICE[0]
    candidates = []
    for platform in platforms:
        try:
            candidates += platform.get_devices()
        except cl.Error:
            continue
    if not candidates:
        raise PolyfuseError("no OpenCL device found (install pocl-binary-distribution)")
    reasons = []
    working = []
    for dev in candidates:
        why = probe_device(dev)
        if why is not None:
            reasons.append(f"{dev.name.strip()}: {why}")
            continue
        working.append(dev)
    if not working:
        raise PolyfuseError("no OpenCL device can build a kernel (" + "; ".join(reasons)
                            + "); run .ci/ensure-opencl or install pocl-opencl-icd")
    if len(working) == 1:
        _WORKING_DEVICE.append(working[0])
        _DEFAULT_REASON.append("the only device that builds and runs kernels")
        return working[0]
    index, speeds = choose_default(working, device_speeds)
    best = working[index]
    _WORKING_DEVICE.append(best)
    _CANDIDATES.extend(zip(working, speeds))
    detail = ", ".join(f"{d.name.strip()} {s.score * 1e3:.1f} ms" if s else
                       f"{d.name.strip()} probe failed" for d, s in zip(working, speeds))
    _DEFAULT_REASON.append(f"lowest estimated layer time ({detail}; measured once, cached in "
                           f"{_speed_cache_path()})")
    return best


def device_for_work(flops: float, launches: int) -> Optional[tuple[cl.Device, str]]:
    """The device, among those the default was chosen from, with the lowest estimated time
    of a program of ``flops`` in products and ``launches`` launches, and why; None where
    there is no choice (one working device, the speed probe failed) and the default stands.

    A CPU offers two devices of very different shapes (PoCL ``pthread``: every core, a few
    microseconds to wake them per launch; ``basic``: one core, in the calling thread): a
    model of 20 small launches ran 3-4x faster on ``basic``, a BERT-base layer faster on
    ``pthread``.  What decides is the model's own mix, not the representative layer's.  Only
    devices of the default's type compete: a GPU chosen by default stays the device (a chain
    of launches finished once prices a GPU's queue at its synchronization, not at what a
    model's launches cost there)."""
    default = get_device(None)  # the default chosen (and the candidates' speeds measured) once
    kind = getattr(default, "type", None)
    measured = [(d, s) for d, s in _CANDIDATES
                if s is not None and getattr(d, "type", None) == kind]
    if len(measured) < 2:
        return None
    times = [s.estimate(flops, launches) for _, s in measured]
    best = times.index(min(times))
    detail = ", ".join(f"{d.name.strip()} {t * 1e3:.3g} ms" for (d, _), t in zip(measured, times))
    return measured[best][0], (f"lowest estimated time of this model ({flops / 1e9:.3g} GFLOP "
                               f"in products, {launches} launches: {detail})")


def default_device_reason() -> str:
    """Why :func:`get_device` picks its default (after it has been called once)."""
    return _DEFAULT_REASON[0] if _DEFAULT_REASON else "not chosen yet"


@dataclass(frozen=True)
class ProbeKernel:
    """A real kernel a device must build, run and get right: ``name(in, out)`` over ``global``
    work-items in groups of ``local``, ``out`` compared with ``expected``."""

    name: str
    source: str
    inputs: np.ndarray
    expected: np.ndarray
    global_size: tuple[int, ...] = (256,)
    local_size: tuple[int, ...] = (64,)


def _probe_signature(name: str) -> str:
    return f"__kernel void {name}(__global const float *in, __global float *out)\n"


def _probe_kernels() -> tuple[ProbeKernel, ...]:
    """What polyfuse's kernels use: vector types, a barrier reduction in ``__local`` memory and
    float16 ``fma`` (the roofline's FLOP kernel; one PoCL build here aborts compiling it)."""
    x = (np.arange(256, dtype=np.float32) % 17) / 8 - 1
    group = x.reshape(4, 64)
    fma = (x.astype(np.float64) * x + 0.5).astype(np.float32)
    return (
        ProbeKernel("vector4", _probe_signature("vector4") + """{ const int i = get_global_id(0);
  if (i < 64) vstore4(vload4(i, in) * (float4)(2.0f) + (float4)(1.0f), i, out); }""",
                    x, x * 2 + 1),
        ProbeKernel("reduce", _probe_signature("reduce") + """{ __local float s[64];
  const int l = get_local_id(0);
  s[l] = in[get_global_id(0)];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int w = 32; w > 0; w >>= 1) {
    if (l < w) s[l] += s[l + w];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  out[get_global_id(0)] = s[0]; }""",
                    x, np.repeat(group.sum(axis=1), 64).astype(np.float32)),
        ProbeKernel("fma16", _probe_signature("fma16") + """{ const int i = get_global_id(0);
  if (i < 16) { const float16 v = vload16(i, in);
                vstore16(fma(v, v, (float16)(0.5f)), i, out); } }""", x, fma),
        ProbeKernel("local_reverse", _probe_signature("local_reverse") + """{ __local float s[64];
  const int l = get_local_id(0);
  s[l] = in[get_global_id(0)];
  barrier(CLK_LOCAL_MEM_FENCE);
  out[get_global_id(0)] = s[63 - l]; }""", x, group[:, ::-1].reshape(-1)),
    )


def _capability_kernels() -> dict[str, ProbeKernel]:
    """What a device may compile wrongly without being unusable, for code generation to avoid:
    capability -> a kernel that uses it.  ``conditional barriers``: a row sum with barriers
    under a guard on the group id (5 rows of 3 in groups of 4 lanes, 8 groups), then code after
    the guard, as a fused Softmax and the launch after it had; both PoCL builds of the
    development machine drop the guarded stores (``codegen/barrier_guard.py`` never emits it)."""
    x = np.arange(15, dtype=np.float32) % 7 - 3
    rows = x.reshape(5, 3)
    expected = np.concatenate([np.repeat(rows.sum(axis=1), 3), -x])
    return {"conditional barriers": ProbeKernel(
        "cond_barrier", _probe_signature("cond_barrier") + """{ __local float red[4];
  if ((int) get_group_id(0) <= 4) {
    const int row = get_group_id(0);
    const int lane = get_local_id(0);
    red[lane] = lane < 3 ? in[row * 3 + lane] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lane < 2) red[lane] += red[lane + 2];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lane < 1) red[lane] += red[lane + 1];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lane < 3) out[row * 3 + lane] = red[0];
  }
  { const int i0 = get_local_id(0);
    const int i1 = get_group_id(0);
    if (i0 < 3 && i1 < 5) out[15 + i1 * 3 + i0] = -in[i1 * 3 + i0]; } }""", x, expected,
        global_size=(32,), local_size=(4,)),
        "sibling guarded stores": _sibling_stores_kernel()}


def _sibling_stores_kernel() -> ProbeKernel:
    """Stores to one buffer from two sibling ``if`` blocks, then a load of it in the same
    work-item, as a Concat fused with its reader has: both PoCL builds of the development
    machine return the buffer's old contents to the load in a 4 x 16 work-group
    (``codegen/store_order.py`` stores through a volatile pointer there)."""
    x = np.arange(32, dtype=np.float32) % 7 - 3.5
    rows = x.reshape(16, 2)
    slab = np.concatenate([rows, rows], axis=1).reshape(-1)
    return ProbeKernel("sibling_stores", _probe_signature("sibling_stores") + """{
  const int c = get_local_id(0);
  const int r = get_local_id(1);
  if (c < 2) out[r * 4 + c] = in[r * 2 + c];
  if (c >= 2) out[r * 4 + c] = in[r * 2 + c - 2];
  out[64 + r * 4 + c] = out[r * 4 + c]; }""", x, np.concatenate([slab, slab]),
        global_size=(4, 16), local_size=(4, 16))


@dataclass(frozen=True)
class DeviceProbe:
    """What probing a device found: ``reason`` it is unusable (None: usable) and how it does
    on the capabilities of :data:`CAPABILITY_KERNELS` (``ok``, ``miscompiled``, ...)."""

    reason: Optional[str]
    capabilities: dict[str, str]


def _run_probe(ctx: cl.Context, queue: cl.CommandQueue, k: ProbeKernel) -> Optional[str]:
    """Why ``k`` fails on the device (build error, wrong result), None when it is right."""
    try:
        kernel = build_kernel(ctx, k.source, k.name)
        mf = cl.mem_flags
        src = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=k.inputs)
        dst = cl.Buffer(ctx, mf.READ_WRITE, k.expected.nbytes)
        cl.enqueue_fill_buffer(queue, dst, np.float32(0), 0, k.expected.nbytes)
        with stage(f"running OpenCL kernel '{k.name}'"):
            kernel(queue, k.global_size, k.local_size, src, dst)
            out = np.empty_like(k.expected)
            cl.enqueue_copy(queue, out, dst)
            queue.finish()
    except PolyfuseError as err:
        return err.message
    except cl.Error as err:  # PoCL caches a crashed build: the kernel is then missing
        return (str(err).strip().splitlines() or [type(err).__name__])[0]
    if not np.allclose(out, k.expected, rtol=1e-5, atol=1e-6):
        bad = int(np.flatnonzero(~np.isclose(out, k.expected, rtol=1e-5, atol=1e-6))[0])
        return f"miscompiled (element {bad}: {out[bad]:g}, expected {k.expected[bad]:g})"
    return None


def _probe_job(spec: str, kernels: Sequence[ProbeKernel],
               capabilities: Mapping[str, ProbeKernel],
               progress: Callable[[str], None]) -> DeviceProbe:
    """In a worker: ``kernels`` on device ``spec``, stopping at the first that fails (the
    compiler's remarks on the probe kernels are not the user's business)."""
    ctx = cl.Context([get_device(spec)])
    queue = cl.CommandQueue(ctx)
    for k in kernels:
        why = _run_probe(ctx, queue, k)
        if why is not None:
            return DeviceProbe(f"probe kernel '{k.name}': {why}", {})
    caps = {}
    for cap, k in capabilities.items():
        why = _run_probe(ctx, queue, k)
        caps[cap] = "ok" if why is None else why.split(" (")[0]
    return DeviceProbe(None, caps)


#: bump when the probe kernels change, so cached verdicts are redone
_PROBE_VERSION = 3
_PROBED: dict[str, DeviceProbe] = {}


def _remember(path: str, key: str, value: object) -> None:
    """Set ``key`` in the JSON table at ``path`` (a cache: an unwritable one only costs the
    measurement or probe next time)."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            with open(path, encoding="utf-8") as fh:
                table = json.load(fh)
        except (OSError, ValueError):
            table = {}
        table[key] = value
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(table, fh, indent=1)
    except OSError:
        pass


def _probe_cache_path() -> str:
    return os.path.join(_cache_dir(), "device_probe.json")


def probe(dev: cl.Device, kernels: Optional[Sequence[ProbeKernel]] = None,
          timeout: float = 300.0) -> DeviceProbe:
    """Build, run and check real kernels (:func:`_probe_kernels`) on ``dev`` in a worker
    process: a driver can list a device whose compiler aborts on or miscompiles real kernels
    though it builds a one-line one, and an abort there must not kill polyfuse.  Cached per
    device in memory and on disk; ``kernels`` (for tests) replaces the set, uncached."""
    key = stable_device_key(dev)
    cached = kernels is None
    if cached and key in _PROBED:
        return _PROBED[key]
    path = _probe_cache_path()
    entry_key = f"{key}|probe {_PROBE_VERSION}"
    if cached:
        try:
            with open(path, encoding="utf-8") as fh:
                entry = json.load(fh)[entry_key]
            _PROBED[key] = DeviceProbe(entry["reason"], dict(entry["capabilities"]))
            return _PROBED[key]
        except (OSError, ValueError, KeyError, TypeError):
            pass
    try:
        spec = device_spec(dev)
        result = call_with_budget(_probe_job, (spec, kernels or _probe_kernels(),
                                               _capability_kernels()), timeout=timeout)
    except WorkerCrashed as err:
        result = DeviceProbe(f"{err.stage}: crashed ({err.signal or 'no signal'})", {})
    except PolyfuseError as err:
        return DeviceProbe(str(err).splitlines()[0], {})  # a time-out: not a verdict to keep
    if cached:
        _PROBED[key] = result
        _remember(path, entry_key,
                  {"reason": result.reason, "capabilities": result.capabilities})
    return result


def probe_device(dev: cl.Device) -> Optional[str]:
    """None when ``dev`` builds, runs and gets right the probe kernels, else why not."""
    return probe(dev).reason


def check_device(ctx: cl.Context, queue: cl.CommandQueue) -> None:
    """Build and run a one-line kernel: fail early, with the reason, before a long benchmark."""
    kernel = build_kernel(ctx, "__kernel void polyfuse_probe(__global int *a) { a[0] = 42; }",
                          "polyfuse_probe")
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4)
    kernel(queue, (1,), (1,), buf)
    out = np.zeros(1, np.int32)
    cl.enqueue_copy(queue, out, buf)
    if int(out[0]) != 42:
        raise PolyfuseError("the OpenCL device ran a probe kernel but returned a wrong value")


# --------------------------------------------------------------------------- timing


@dataclass(frozen=True)
class TimingResult:
    """Summary of repeated measurements, in seconds.  ``spread`` is IQR / median (0 = stable)."""

    median: float
    min: float
    max: float
    spread: float
    samples: tuple[float, ...]

    @classmethod
    def from_samples(cls, samples: Sequence[float]) -> TimingResult:
        if len(samples) == 0:
            raise ValueError("no timing samples")
        arr = np.asarray(samples, dtype=np.float64)
        med = float(np.median(arr))
        q1, q3 = np.percentile(arr, [25, 75])
        spread = float((q3 - q1) / med) if med > 0 else 0.0
        return cls(med, float(arr.min()), float(arr.max()), spread,
                   tuple(float(s) for s in arr))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["samples"] = list(self.samples)
        return d


def _profiled_seconds(event: cl.Event) -> float:
    return (event.profile.end - event.profile.start) * 1e-9


def runs_in_calling_thread(device: cl.Device) -> bool:
    """Whether ``device`` runs a kernel in the host thread that enqueues and waits for it.

    PoCL's ``basic`` CPU device does (one compute unit, no worker threads): the CPU time of
    that thread around a launch and its wait is then the kernel's time, and other jobs'
    load on the machine does not inflate it as it inflates profiling events (wall time).
    """
    try:
        return (bool(device.type & cl.device_type.CPU) and device.max_compute_units == 1
                and "pocl" in device.platform.version.lower()
                and device.name.strip().lower().startswith("basic"))
    except cl.Error:
        return False


def time_kernel(
    queue: cl.CommandQueue,
    kernel: cl.Kernel,
    global_size: Sequence[int],
    local_size: Optional[Sequence[int]],
    args: Optional[Sequence[Any]] = None,
    *,
    repeat: int = 5,
    warmup: int = 1,
    thread_time: bool = False,
) -> TimingResult:
    """Device time of ``kernel`` from profiling events: ``warmup`` unrecorded runs, then ``repeat``.

    Each run is waited for separately, so samples are independent (no overlap between launches).
    ``args`` are set on the kernel when given (otherwise the caller has set them).
    ``thread_time``: the calling thread's CPU seconds around each launch and its wait instead
    (for a device that :func:`runs_in_calling_thread`).
    """
    if not queue.properties & cl.command_queue_properties.PROFILING_ENABLE:
        raise PolyfuseError("time_kernel needs a queue with profiling enabled (use get_context)")
    if repeat < 1:
        raise ValueError("repeat must be >= 1")
    if args is not None:
        kernel.set_args(*args)
    gs = tuple(int(g) for g in global_size)
    ls = None if local_size is None else tuple(int(v) for v in local_size)
    for _ in range(max(0, warmup)):
        cl.enqueue_nd_range_kernel(queue, kernel, gs, ls).wait()
    samples = []
    for _ in range(repeat):
        t0 = time.thread_time()
        evt = cl.enqueue_nd_range_kernel(queue, kernel, gs, ls)
        evt.wait()
        samples.append(time.thread_time() - t0 if thread_time else _profiled_seconds(evt))
    return TimingResult.from_samples(samples)


def time_host(fn: Callable[[], Any], *, repeat: int = 5, warmup: int = 1) -> TimingResult:
    """Host wall-clock time of ``fn()`` (which must block until done), for launch overheads."""
    for _ in range(max(0, warmup)):
        fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return TimingResult.from_samples(samples)
