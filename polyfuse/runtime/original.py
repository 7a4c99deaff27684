"""Check polyfuse's *unfused* model of a program against the original program, run as written.

``--verify`` compares the fused program with polyfuse's own unfused model, so a mistake both
share (a build option the front-end missed, a host value it read wrongly) passes unnoticed.
Where the original can be run (a compilable host plus its own kernels), this module runs it and
compares the model with it:

1. the user's host file(s) are compiled with gcc (g++ for C++), ``-lOpenCL -lm`` and the
   user's ``-I``/``-D``;
2. it runs with its ``--args`` under an ``LD_PRELOAD`` shim (a small C file compiled here) that
   forwards every OpenCL call with ``dlsym(RTLD_NEXT)`` and records the bytes of every host ->
   device transfer (``clEnqueueWriteBuffer``, ``clEnqueueFillBuffer``, ``clCreateBuffer`` with
   ``CL_MEM_COPY_HOST_PTR``/``CL_MEM_USE_HOST_PTR``), every device -> host read (made blocking,
   so the bytes are there), and counts the kernel launches;
3. polyfuse's unfused model runs (:mod:`polyfuse.runtime.execute`) with exactly the written
   bytes as the host data, and every read-back is compared with the original's (1e-4
   relative; exact for integers).

A difference is an error naming the transfer and its host line.  Transfers the shim cannot
replay exactly (mapped or rectangular ones, host data the program changes between transfers)
make the check refuse, never pass.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from polyfuse.core.program import PolyfuseError, Program

if TYPE_CHECKING:
    from polyfuse.runtime.device import DeviceSpec

#: the LD_PRELOAD shim: no OpenCL headers needed (handles are pointers, sizes are size_t)
SHIM_SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef uint64_t cl_bitfield;
typedef void *cl_handle;

static FILE *trace_index(void) {
    static FILE *f = NULL;
    if (!f) {
        const char *dir = getenv("POLYFUSE_TRACE_DIR");
        char path[4096];
        snprintf(path, sizeof path, "%s/trace.txt", dir ? dir : ".");
        f = fopen(path, "w");
        if (!f) { perror("polyfuse trace"); exit(97); }
    }
    return f;
}

static void record(const char *kind, const void *buf, size_t off, size_t n, const void *data) {
    static long seq = 0;
    FILE *idx = trace_index();
    if (data && n) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%06ld.bin", getenv("POLYFUSE_TRACE_DIR"), seq);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(data, 1, n, f) != n) { perror("polyfuse trace"); exit(97); }
        fclose(f);
    }
    fprintf(idx, "%ld %s %p %zu %zu\n", seq, kind, buf, off, n);
    fflush(idx);
    seq++;
}

#define REAL(name, type) static type real; if (!real) real = (type)dlsym(RTLD_NEXT, name)

cl_int clEnqueueWriteBuffer(cl_handle q, cl_handle b, cl_uint blocking, size_t off, size_t n,
                            const void *p, cl_uint ne, const cl_handle *w, cl_handle *e) {
    typedef cl_int (*fn)(cl_handle, cl_handle, cl_uint, size_t, size_t, const void *, cl_uint,
                         const cl_handle *, cl_handle *);
    REAL("clEnqueueWriteBuffer", fn);
    record("write", b, off, n, p);
    return real(q, b, blocking, off, n, p, ne, w, e);
}

cl_int clEnqueueReadBuffer(cl_handle q, cl_handle b, cl_uint blocking, size_t off, size_t n,
                           void *p, cl_uint ne, const cl_handle *w, cl_handle *e) {
    typedef cl_int (*fn)(cl_handle, cl_handle, cl_uint, size_t, size_t, void *, cl_uint,
                         const cl_handle *, cl_handle *);
    REAL("clEnqueueReadBuffer", fn);
    cl_int r = real(q, b, 1, off, n, p, ne, w, e);  /* blocking: the bytes are there now */
    record(r == 0 ? "read" : "failed-read", b, off, n, r == 0 ? p : NULL);
    return r;
}

cl_int clEnqueueFillBuffer(cl_handle q, cl_handle b, const void *pat, size_t ps, size_t off,
                           size_t n, cl_uint ne, const cl_handle *w, cl_handle *e) {
    typedef cl_int (*fn)(cl_handle, cl_handle, const void *, size_t, size_t, size_t, cl_uint,
                         const cl_handle *, cl_handle *);
    REAL("clEnqueueFillBuffer", fn);
    char *data = malloc(n ? n : 1);
    for (size_t i = 0; ps && i < n; i++) data[i] = ((const char *)pat)[i % ps];
    record("write", b, off, n, data);
    free(data);
    return real(q, b, pat, ps, off, n, ne, w, e);
}

cl_handle clCreateBuffer(cl_handle ctx, cl_bitfield flags, size_t n, void *p, cl_int *err) {
    typedef cl_handle (*fn)(cl_handle, cl_bitfield, size_t, void *, cl_int *);
    REAL("clCreateBuffer", fn);
    cl_handle b = real(ctx, flags, n, p, err);
    if (b && p && (flags & ((1 << 3) | (1 << 5))))  /* USE_HOST_PTR | COPY_HOST_PTR */
        record("write", b, 0, n, p);
    return b;
}

cl_int clEnqueueNDRangeKernel(cl_handle q, cl_handle k, cl_uint wd, const size_t *o,
                              const size_t *g, const size_t *l, cl_uint ne,
                              const cl_handle *w, cl_handle *e) {
    typedef cl_int (*fn)(cl_handle, cl_handle, cl_uint, const size_t *, const size_t *,
                         const size_t *, cl_uint, const cl_handle *, cl_handle *);
    REAL("clEnqueueNDRangeKernel", fn);
    cl_int r = real(q, k, wd, o, g, l, ne, w, e);
    if (r == 0) record("launch", k, 0, 0, NULL);
    return r;
}

void *clEnqueueMapBuffer(cl_handle q, cl_handle b, cl_uint blocking, cl_bitfield flags,
                         size_t off, size_t n, cl_uint ne, const cl_handle *w, cl_handle *e,
                         cl_int *err) {
    typedef void *(*fn)(cl_handle, cl_handle, cl_uint, cl_bitfield, size_t, size_t, cl_uint,
                        const cl_handle *, cl_handle *, cl_int *);
    REAL("clEnqueueMapBuffer", fn);
    record("unsupported:clEnqueueMapBuffer", b, off, n, NULL);
    return real(q, b, blocking, flags, off, n, ne, w, e, err);
}

#define RECT(name, ptrtype)                                                                  \
cl_int name(cl_handle q, cl_handle b, cl_uint blocking, const size_t *bo, const size_t *ho,  \
            const size_t *rg, size_t brp, size_t bsp, size_t hrp, size_t hsp, ptrtype p,     \
            cl_uint ne, const cl_handle *w, cl_handle *e) {                                  \
    typedef cl_int (*fn)(cl_handle, cl_handle, cl_uint, const size_t *, const size_t *,     \
                         const size_t *, size_t, size_t, size_t, size_t, ptrtype, cl_uint,   \
                         const cl_handle *, cl_handle *);                                    \
    REAL(#name, fn);                                                                         \
    record("unsupported:" #name, b, 0, 0, NULL);                                             \
    return real(q, b, blocking, bo, ho, rg, brp, bsp, hrp, hsp, p, ne, w, e);                \
}
RECT(clEnqueueWriteBufferRect, const void *)
RECT(clEnqueueReadBufferRect, void *)
"""

#: seconds the original program may run
RUN_TIMEOUT = 300.0


@dataclasses.dataclass(frozen=True)
class Transfer:
    """One traced event of the original run: ``write``/``read``/``launch``/``unsupported:...``."""

    seq: int
    kind: str
    handle: str
    offset: int
    nbytes: int
    data: Optional[bytes]


@dataclasses.dataclass(frozen=True)
class OriginalCheck:
    """What :func:`check_against_original` compared (all of it matched)."""

    writes: int
    reads: int
    launches: int
    bytes_compared: int
    #: elements read back that no write defines (uninitialized in the original): not compared
    undefined: int = 0

    def summary(self) -> str:
        left = (f"; {self.undefined} element(s) read back were never written, not compared"
                if self.undefined else "")
        return (f"the unfused model matches the original program: {self.reads} read(s) "
                f"({self.bytes_compared} bytes) after {self.writes} write(s) and "
                f"{self.launches} launch(es){left}")


def _cache_dir() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "polyfuse"
    root.mkdir(parents=True, exist_ok=True)
    return root


def build_shim() -> Path:
    """The compiled ``LD_PRELOAD`` shim (cached by the hash of its source)."""
    digest = hashlib.sha256(SHIM_SOURCE.encode()).hexdigest()[:16]
    lib = _cache_dir() / f"trace_shim_{digest}.so"
    if lib.is_file():
        return lib
    with tempfile.TemporaryDirectory(prefix="polyfuse-shim-") as tmp:
        src = Path(tmp) / "shim.c"
        src.write_text(SHIM_SOURCE)
        out = Path(tmp) / "shim.so"
        _run_compiler(["gcc", "-O1", "-shared", "-fPIC", str(src), "-o", str(out), "-ldl"],
                      "the tracing shim")
        part = lib.with_suffix(f".{os.getpid()}.part")
        shutil.copyfile(out, part)
        os.replace(part, lib)  # atomic: a concurrent build never sees half a library
    return lib


def _run_compiler(cmd: list[str], what: str) -> None:
    if shutil.which(cmd[0]) is None:
        raise PolyfuseError(f"cannot check against the original program: {cmd[0]} not found")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=300)
    except subprocess.TimeoutExpired:
        raise PolyfuseError(f"compiling {what} took more than 300 s") from None
    if p.returncode != 0:
        first = next((ln for ln in p.stderr.splitlines() if "error" in ln),
                     (p.stderr.strip().splitlines() or ["?"])[-1])
        raise PolyfuseError(f"cannot compile {what} to check against it: {first.strip()}")


def compile_host(hosts: Sequence[str], out: Path, *, include_dirs: Sequence[str] = (),
                 defines: Optional[Mapping[str, Optional[str]]] = None) -> Path:
    """Compile the original host file(s) like the user would (plus ``-lOpenCL -lm``)."""
    cxx = any(Path(h).suffix in (".cpp", ".cc", ".cxx", ".C") for h in hosts)
    cmd = ["g++" if cxx else "gcc", "-O1", "-w", "-DCL_TARGET_OPENCL_VERSION=120",
           "-DCL_USE_DEPRECATED_OPENCL_1_2_APIS"]
    cmd += [f"-I{d}" for d in include_dirs]
    cmd += [f"-D{k}" if v is None else f"-D{k}={v}" for k, v in (defines or {}).items()]
    cmd += [str(h) for h in hosts] + ["-o", str(out), "-lOpenCL", "-lm"]
    _run_compiler(cmd, "the original host " + ", ".join(Path(h).name for h in hosts))
    return out


def _run_env() -> dict[str, str]:
    """The environment an OpenCL host runs in: pip's PoCL as the ICD vendor if none is set."""
    import glob

    env = dict(os.environ)
    if not glob.glob("/etc/OpenCL/vendors/*.icd") and "OCL_ICD_VENDORS" not in env:
        import pyopencl

        libs = glob.glob(os.path.join(os.path.dirname(pyopencl.__file__), ".libs",
                                      "libpocl*.so*"))
        if libs:
            env["OCL_ICD_VENDORS"] = libs[0]
    return env


def trace_original(exe: Path, argv: Sequence[str], cwd: Path, trace_dir: Path, *,
                   timeout: float = RUN_TIMEOUT) -> list[Transfer]:
    """Run the original program under the shim; its transfers and launches, in order."""
    env = _run_env()
    env["LD_PRELOAD"] = " ".join(x for x in (str(build_shim()), env.get("LD_PRELOAD")) if x)
    env["POLYFUSE_TRACE_DIR"] = str(trace_dir)
    try:
        p = subprocess.run([str(exe), *argv], cwd=cwd, env=env, capture_output=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        raise PolyfuseError(f"the original program ran for more than {timeout:g} s") from None
    if p.returncode != 0:
        tail = (p.stderr.decode("latin-1").strip().splitlines() or
                p.stdout.decode("latin-1").strip().splitlines() or [""])[-1]
        raise PolyfuseError(f"the original program exited with status {p.returncode} "
                            f"({tail.strip()[:200]}); nothing to check the model against")
    index = trace_dir / "trace.txt"
    out = []
    for line in (index.read_text().splitlines() if index.is_file() else []):
        seq, kind, handle, off, n = line.split()
        blob = trace_dir / f"{int(seq):06d}.bin"
        out.append(Transfer(int(seq), kind, handle, int(off), int(n),
                            blob.read_bytes() if blob.is_file() else None))
    return out


def _where(op: Any) -> str:
    loc = getattr(op, "loc", None)
    return f"{loc.file}:{loc.line}" if loc is not None and loc.line else (
        loc.file if loc is not None else f"op {op.id}")


def check_against_original(program: Program, hosts: Sequence[str], *,
                           argv: Sequence[str] = (), params: Optional[Mapping[str, int]] = None,
                           include_dirs: Sequence[str] = (),
                           defines: Optional[Mapping[str, Optional[str]]] = None,
                           cwd: Optional[str] = None, rtol: float = 1e-4,
                           device: DeviceSpec = None) -> OriginalCheck:
    """Run the original program and polyfuse's unfused model (on ``device``) on the same host
    data; raise a :class:`PolyfuseError` naming the first read-back that differs (module
    doc)."""
    from polyfuse.runtime.execute import compile_program
    from polyfuse.runtime.verify import compare_arrays

    with tempfile.TemporaryDirectory(prefix="polyfuse-original-") as tmp:
        exe = compile_host(hosts, Path(tmp) / "original", include_dirs=include_dirs,
                           defines=defines)
        trace_dir = Path(tmp) / "trace"
        trace_dir.mkdir()
        events = trace_original(exe, argv, Path(cwd or Path(hosts[0]).resolve().parent),
                                trace_dir)
    bad = next((e for e in events if e.kind.startswith(("unsupported:", "failed-"))), None)
    if bad is not None:
        raise PolyfuseError(f"cannot check against the original program: it calls "
                            f"{bad.kind.split(':')[-1]}, which the check cannot replay")
    writes = [e for e in events if e.kind == "write"]
    reads = [e for e in events if e.kind == "read"]
    launches = sum(1 for e in events if e.kind == "launch")

    cp = compile_program(program, params=params, device=device)
    steps = cp.steps
    wsteps = [s for s in steps if s.kind == "write"]
    rsteps = [s for s in steps if s.kind == "read"]
    for what, traced, modelled in (("kernel launches", launches, cp.launch_count),
                                   ("buffer writes", len(writes), len(wsteps)),
                                   ("buffer reads", len(reads), len(rsteps))):
        if traced != modelled:
            raise PolyfuseError(f"the unfused model does not match the original program: it "
                                f"makes {traced} {what}, polyfuse's model {modelled}")
    handles: dict[str, str] = {}

    def same_buffer(step: Any, event: Transfer, k: int, what: str) -> Any:
        op = program.op(step.op_id)
        ranges = op.writes if step.kind == "write" else op.reads
        name = ranges[0].buffer if ranges else "?"
        if handles.setdefault(name, event.handle) != event.handle or event.nbytes != step.nbytes:
            raise PolyfuseError(f"the unfused model does not match the original program: "
                                f"{what} {k + 1} ({op.name or op.kind} at {_where(op)}) moves "
                                f"{step.nbytes} bytes of buffer '{name}', the original "
                                f"{event.nbytes} bytes of another buffer or range")
        return op

    # the host data: what the original wrote (first write of each byte), random elsewhere
    fresh = {r: np.zeros(len(raw), dtype=bool) for r, raw in cp.initial.items()}
    for k, (s, e) in enumerate(zip(wsteps, writes)):
        same_buffer(s, e, k, "write")
        mask = fresh[s.root][s.start:s.start + s.nbytes]
        cp.initial[s.root][s.start:s.start + s.nbytes][~mask] = np.frombuffer(
            e.data or b"", dtype=np.uint8)[~mask]
        mask[:] = True
    cp.reset()
    result = cp.execute()
    # bytes nobody wrote (the original reads uninitialized memory there) come out differently
    # when the unwritten host data changes: run again with it flipped and leave those out
    first = {r: raw.copy() for r, raw in cp.initial.items()}
    for r, raw in cp.initial.items():
        raw[~fresh[r]] ^= 0xA5
    cp.reset()
    flipped = cp.execute()
    for r, raw in cp.initial.items():
        raw[:] = first[r]

    # replay the host mirror: every write must send what the original sent
    mirror = {r: raw.copy() for r, raw in cp.initial.items()}
    wi = ri = undefined = 0
    compared = 0
    for s in steps:
        if s.kind == "write":
            e = writes[wi]
            if mirror[s.root][s.start:s.start + s.nbytes].tobytes() != (e.data or b""):
                op = program.op(s.op_id)
                raise PolyfuseError(f"cannot check against the original program: the host "
                                    f"changes the data it sends to the device between "
                                    f"transfers (write {wi + 1}, {op.name} at {_where(op)}); "
                                    f"polyfuse does not model host computation")
            wi += 1
        elif s.kind == "read":
            e = reads[ri]
            op = same_buffer(s, e, ri, "read")
            _, _, got = result.reads[ri]
            raw = got.view(np.uint8)
            mirror[s.root][s.start:s.start + s.nbytes] = raw
            dtype = got.dtype
            ref = np.frombuffer(e.data or b"", dtype=np.uint8)
            ref = ref[: len(ref) // dtype.itemsize * dtype.itemsize].view(dtype)
            name = (op.reads[0].buffer if op.reads else "?")
            defined = got.view(np.uint8).reshape(len(got), -1) == flipped.reads[ri][2].view(
                np.uint8).reshape(len(got), -1)
            defined = defined.all(axis=1)
            undefined += int(np.count_nonzero(~defined))
            check = compare_arrays(name, ref[defined], got[defined], rtol=rtol)
            if not check.ok:
                raise PolyfuseError(f"the unfused model does not match the original program: "
                                    f"read {ri + 1} ({op.name} of buffer '{name}'): "
                                    f"{check.reason} (reference: the original)",
                                    *((op.loc.file, op.loc.line) if op.loc else ()))
            compared += int(np.count_nonzero(defined)) * dtype.itemsize
            ri += 1
    return OriginalCheck(len(writes), len(reads), launches, compared, undefined)


__all__ = ["OriginalCheck", "build_shim", "check_against_original", "compile_host",
           "trace_original"]
