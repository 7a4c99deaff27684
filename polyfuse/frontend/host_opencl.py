"""The OpenCL half of the host interpreter: every ``cl*`` call, the buffers, programs,
kernels, queues and events they create, build options and launch recording.  Kept apart
from the C semantics (:mod:`polyfuse.frontend.host_c`), which it builds on; the C++
wrapper model (:mod:`polyfuse.frontend.clhpp`) maps onto these handlers."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partialmethod
from pathlib import Path
from typing import Any, Optional

import sympy
from pycparser import c_ast

from polyfuse.c import cpp, syntax, types
from polyfuse.frontend.host_c import (
    _RUNTIME,
    _UNK,
    _UNK_TYPE,
    _ZERO,
    _Arr,
    _BufRef,
    _c_unescape,
    _CType,
    _Handle,
    _KObj,
    _KState,
    _NeedUnroll,
    _Num,
    _Poison,
    _ProgObj,
    _Rec,
    _Ref,
    _Runtime,
    _scalar_value,
    _Str,
    _truth,
    _Unknown,
)
from polyfuse.program import (
    ArgBinding,
    Buffer,
    BufferRange,
    HostOp,
    Kernel,
    Launch,
    Operation,
    PolyfuseError,
    SourceLoc,
    UnsupportedError,
    runtime_options,
)

_MEM_FLAGS = {
    1 << 0: "CL_MEM_READ_WRITE",
    1 << 1: "CL_MEM_WRITE_ONLY",
    1 << 2: "CL_MEM_READ_ONLY",
    1 << 3: "CL_MEM_USE_HOST_PTR",
    1 << 4: "CL_MEM_ALLOC_HOST_PTR",
    1 << 5: "CL_MEM_COPY_HOST_PTR",
    1 << 7: "CL_MEM_HOST_WRITE_ONLY",
    1 << 8: "CL_MEM_HOST_READ_ONLY",
    1 << 9: "CL_MEM_HOST_NO_ACCESS",
}
_CL_MAP_READ, _CL_MAP_WRITE, _CL_MAP_WRITE_INVALIDATE = 1, 2, 4
_CL_KERNEL_FUNCTION_NAME, _CL_KERNEL_NUM_ARGS = 0x1190, 0x1191


@dataclass
class _ProgInfo:
    """What a ``cl_program`` is built from: source pieces, build options, its kernels."""

    pieces: list  # ("text", str) | ("file", path) | ("unknown", why)
    loc: Optional[SourceLoc]
    options: str = ""
    names: Optional[dict] = None  # kernel name in the program -> name in the Program record



class OpenCLModel:
    """The OpenCL API model of the host interpreter (a mixin of ``_Interpreter``)."""

    def _success(self, args: list) -> None:
        """OpenCL create calls succeed: ``*errcode_ret = CL_SUCCESS`` (their last argument)."""
        if args and isinstance(args[-1], _Ref) and \
                isinstance(self._read(args[-1]), (_Unknown, _Num, _Runtime)):
            self._write(args[-1], _ZERO)

    def _query(self, args: list) -> None:
        """Values an info query stores through its pointers are known only at run time."""
        for a in args:
            if isinstance(a, _Ref):
                cur = self._read(a)
                if isinstance(cur, (_Unknown, _Num, _Runtime)):
                    self._write(a, _RUNTIME)
                elif not isinstance(cur, (_Arr, _Rec)):
                    self._write(a, _Handle("queried"))

    def _buffer_arg(self, v: Any, what: str, node: c_ast.Node) -> str:
        if isinstance(v, _BufRef):
            if v.name not in self.state.buffers:
                raise self._error(f"{what}: buffer '{v.name}' was not created on this path",
                                  node)
            return v.name
        if isinstance(v, _Poison):
            raise self._error(f"{what}: the buffer is {v.reason}", node, UnsupportedError)
        raise self._error(f"{what} is not a buffer created with clCreateBuffer or "
                          "clCreateSubBuffer", node, UnsupportedError)

    def _op(self, op: Operation, node: c_ast.Node) -> None:
        op = dataclasses.replace(op, loops=tuple(self.loops), loc=self._loc(node))
        self.state.ops.append(op)

    def _sync(self, name: str, node: c_ast.Node) -> None:
        self._op(HostOp(id=0, kind="sync", name=name), node)

    def _new_buffer_name(self) -> str:
        name = syntax.fresh_name(re.sub(r"\W", "_", self.name_hint or "buffer"),
                                 self.buffer_names.__contains__)
        self.buffer_names.add(name)
        return name

    def _cl_clCreateBuffer(self, node: c_ast.FuncCall, args: list) -> Any:
        self._success(args)
        flags_v = self._arg(args, 1)
        flags = self._concrete(flags_v, "clCreateBuffer flags", node) if isinstance(
            flags_v, _Num) else 0
        size = self._int(self._arg(args, 2), "buffer size", node, required=False)
        if self.loops:
            raise _NeedUnroll("a buffer is created inside a host loop")
        name = self._new_buffer_name()
        names = tuple(n for bit, n in _MEM_FLAGS.items() if flags & bit)
        self.state.buffers[name] = Buffer(name=name, size=size, flags=names, loc=self._loc(node))
        if flags & ((1 << 5) | (1 << 3)):
            self._op(HostOp(id=0, kind="write", writes=(BufferRange(name, sympy.Integer(0),
                                                                      size),),
                            name="clCreateBuffer"), node)
        return _BufRef(name)

    def _cl_clCreateSubBuffer(self, node: c_ast.FuncCall, args: list) -> Any:
        self._success(args)
        parent = self._buffer_arg(self._arg(args, 0), "clCreateSubBuffer parent", node)
        flags_v = self._arg(args, 1)
        flags = int(flags_v.e) if isinstance(flags_v, _Num) and flags_v.e.is_Integer else 0
        info = self._arg(args, 3)
        region = self._read(info) if isinstance(info, _Ref) else None
        if not isinstance(region, _Rec):
            raise self._error("clCreateSubBuffer: the region is not a cl_buffer_region polyfuse "
                              "can follow", node, UnsupportedError)
        origin = self._int(region.get("origin"), "sub-buffer origin", node)
        size = self._int(region.get("size"), "sub-buffer size", node)
        if self.loops:
            raise _NeedUnroll("a sub-buffer is created inside a host loop")
        name = self._new_buffer_name()
        names = tuple(n for bit, n in _MEM_FLAGS.items() if flags & bit)
        self.state.buffers[name] = Buffer(name=name, size=size, parent=parent, origin=origin,
                                          flags=names, loc=self._loc(node))
        return _BufRef(name)

    def _cl_clCreateKernel(self, node: c_ast.FuncCall, args: list) -> Any:
        self._success(args)
        kname = self._arg(args, 1)
        if not isinstance(kname, _Str):
            raise self._error("clCreateKernel: the kernel name is not a string polyfuse can "
                              "follow", node, UnsupportedError)
        names = self._program_kernels(self._arg(args, 0), node)
        if kname.s not in names:
            avail = ", ".join(sorted(names)) or "none"
            raise self._error(f"clCreateKernel: no kernel named '{kname.s}' (available: "
                              f"{avail})", node)
        if self.loops:
            raise _NeedUnroll("a kernel object is created inside a host loop")
        oid = self.next_oid
        self.next_oid += 1
        self.state.kobjs[oid] = _KState(var=self.name_hint or kname.s, kernel=names[kname.s])
        return _KObj(oid)

    # -- programs: where kernels come from ----------------------------------------------------

    def _cl_clCreateProgramWithSource(self, node: c_ast.FuncCall, args: list) -> Any:
        self._success(args)
        count = self._arg(args, 1)
        n = int(count.e) if isinstance(count, _Num) and count.e.is_Integer else 1
        strings = self._arg(args, 2)
        pieces: list = []
        for i in range(max(n, 1)):
            ref = self._index(strings, _Num(sympy.Integer(i))) if isinstance(strings, _Ref) \
                else None
            v = self._read(ref) if isinstance(ref, _Ref) else _UNK
            pieces.append(self._source_piece(v))
        pid = len(self.programs)
        self.programs[pid] = _ProgInfo(pieces, self._loc(node))
        return _ProgObj(pid)

    def _cl_clCreateProgramWithBinary(self, node: c_ast.FuncCall, args: list) -> Any:
        self._success(args)
        pid = len(self.programs)
        self.programs[pid] = _ProgInfo([("unknown", "built from a binary")], self._loc(node))
        return _ProgObj(pid)

    def _source_piece(self, v: Any) -> tuple[str, str]:
        if isinstance(v, _Str):
            return ("text", _c_unescape(v.s))
        if isinstance(v, _Ref) and v.slot in self.file_texts:
            return ("file", self.file_texts[v.slot])
        if isinstance(v, _Ref) and v.slot in self.str_slots:
            return ("text", self.str_slots[v.slot])
        if self.opened:  # a kernel file the host opened but read in a way polyfuse did not see
            return ("file", self.opened[-1])
        return ("unknown", "a source string polyfuse cannot follow")

    def _cl_clBuildProgram(self, node: c_ast.FuncCall, args: list) -> Any:
        prog = self._arg(args, 0)
        opts = self._arg(args, 3)
        if isinstance(prog, _ProgObj):
            info = self.programs[prog.pid]
            if isinstance(opts, _Str):
                info.options = opts.s
            elif isinstance(opts, _Ref) and opts.slot in self.str_slots:
                info.options = self.str_slots[opts.slot]
            elif not (isinstance(opts, _Num) and opts.e == 0):
                raise self._error("clBuildProgram: build options polyfuse cannot determine "
                                  "(they may define macros the kernels use)", node,
                                  UnsupportedError)
        return _ZERO

    _cl_clCompileProgram = _cl_clBuildProgram

    def _program_kernels(self, prog: Any, node: c_ast.Node) -> dict[str, str]:
        """Kernel names of the program a kernel object is created from → names in the record."""
        if not isinstance(prog, _ProgObj):
            return self._adopt(self._cli_kernels(node), None)
        info = self.programs[prog.pid]
        if info.names is None:
            info.names = self._adopt(self._parse_program(info, node), info)
        return info.names

    def _cli_kernels(self, node: c_ast.Node, defines: Mapping[str, Optional[str]] = {},  # noqa: B006
                     include_dirs: Sequence[str] = ()) -> dict[str, Kernel]:
        """The kernels given on the command line, standing in for a source polyfuse cannot
        follow: parsed now, with the build's options; one name in two files is ambiguous."""
        self.cli_used = True
        if not self.kernels and not self.kernel_files.files:
            raise self._error("cannot tell which kernel source the host builds; pass the "
                              ".cl file(s)", node)
        if (defines or include_dirs) and not self.kernel_files.files:
            raise self._error("build options define macros, but the kernels were given "
                              "without their source file; pass the .cl file", node,
                              UnsupportedError)
        out: dict[str, Kernel] = {} if defines or include_dirs else dict(self.kernels)
        where: dict[str, str] = {}
        for f in self.kernel_files.files:
            for name, k in self._parse_kernel_text(None, f, defines, include_dirs).items():
                if name in out:
                    first = where.get(name, "the kernel source")
                    raise self._error(f"kernel '{name}' is defined in {first} and {f}; "
                                      "polyfuse cannot tell which one the host means", node)
                out[name] = k
                where[name] = f
        return out

    def _parse_program(self, info: _ProgInfo, node: c_ast.Node) -> dict[str, Kernel]:
        defines, include_dirs, flags = self._build_options(info.options, node)
        if self.kernel_files.replace:
            return _with_options(self._cli_kernels(node, defines, include_dirs), flags)
        pieces = [("unknown", f"kernel file '{p[1]}' not found (looked in "
                   f"{', '.join(self.kernel_files.search_dirs) or 'the working directory'})")
                  if p[0] == "file" and not os.path.isfile(p[1]) else p for p in info.pieces]
        if all(p[0] == "text" for p in pieces) and \
                not any(_KERNEL_RE.search(p[1]) for p in pieces):
            pieces = [("unknown", "its source strings define no __kernel")]
        known = [p for p in pieces if p[0] != "unknown"]
        if len(known) < len(pieces):
            why = next(p[1] for p in pieces if p[0] == "unknown")
            if known:
                raise self._error(f"clCreateProgramWithSource: {why}; polyfuse would model a "
                                  "different program", node, UnsupportedError)
            if not self.kernels and not self.kernel_files.files:
                raise self._error(f"clCreateProgramWithSource: {why}; pass the kernel file(s) "
                                  "on the command line", node)
            return _with_options(self._cli_kernels(node, defines, include_dirs), flags)
        files = [p[1] for p in info.pieces if p[0] == "file"]
        self.sources_built.append((files[0] if files else "", info.loc))
        self.sources_built += [(f, info.loc) for f in files[1:]]
        if len(info.pieces) == 1 and files:
            path = files[0]
            return _with_options(self._parse_kernel_text(None, path, defines, include_dirs),
                                 flags)
        text = []
        for kind, value in info.pieces:
            if kind == "file":
                text.append(f'#line 1 "{value}"\n')
                text.append(cpp.read_source(value))
            else:
                where = info.loc.file if info.loc else self.filename
                text.append(f'#line {info.loc.line if info.loc else 1} "{where}"\n')
                text.append(value)
            if text[-1] and not text[-1].endswith("\n"):
                text.append("\n")
        name = files[0] if files else (info.loc.file if info.loc else self.filename)
        return _with_options(self._parse_kernel_text("".join(text), name, defines,
                                                     include_dirs), flags)

    def check_kernel_files(self) -> None:
        """A kernel file named on the command line that the host never builds is an error: the
        source the host reads is what runs, so modelling it would silently ignore the user's."""
        if self.cli_used or not self.sources_built:
            return
        for given in self.kernel_files.files:
            if any(path and _same_file(given, path) for path, _ in self.sources_built):
                continue
            path, loc = self.sources_built[0]
            built = f"'{path}'" if path else "source strings"
            raise PolyfuseError(
                f"the host builds its kernels from {built}, not from '{given}' named on the "
                f"command line; pass {path or 'no kernel file'}, or --kernel-source-override "
                f"to build '{given}' in its place", loc.file if loc else self.filename,
                loc.line if loc else None)

    def _parse_kernel_text(self, text: Optional[str], path: str,
                           defines: Mapping[str, Optional[str]],
                           include_dirs: Sequence[str]) -> dict[str, Kernel]:
        from polyfuse.frontend import opencl

        kf = self.kernel_files
        dirs = tuple(include_dirs) + kf.include_dirs
        if os.path.exists(path):
            dirs += (os.path.dirname(os.path.abspath(path)),)
        defs = dict(kf.defines)
        defs.update(defines)
        key = (text, path, dirs, tuple(sorted(defs.items(), key=str)))
        if key not in self.parse_cache:
            if text is None:
                self.parse_cache[key] = opencl.parse_kernels(path, include_dirs=dirs,
                                                             defines=defs)
            else:
                self.parse_cache[key] = opencl.parse_kernels(text, path, include_dirs=dirs,
                                                             defines=defs)
        return self.parse_cache[key]

    def _build_options(self, options: str, node: c_ast.Node
                       ) -> tuple[dict[str, Optional[str]], list[str], tuple[str, ...]]:
        """``-D``/``-I`` of a build option string, and the compiler options (``-cl-*``, ``-w``,
        ``-Werror``) that do not change the model but are reproduced when the runtime builds."""
        try:
            words = shlex.split(options)
        except ValueError:
            raise self._error(f"clBuildProgram: cannot read the build options {options!r}",
                              node) from None
        defines: dict[str, Optional[str]] = {}
        include_dirs: list[str] = []
        i = 0
        while i < len(words):
            w = words[i]
            if w in ("-D", "-I") and i + 1 < len(words):
                w = w + words[i + 1]
                i += 1
            if w.startswith("-D"):
                name, sep, value = w[2:].partition("=")
                defines[name] = value if sep else None
            elif w.startswith("-I"):
                include_dirs.append(self._find_file(w[2:]) or w[2:])
            i += 1
        return defines, include_dirs, runtime_options(words)

    def _adopt(self, kernels: Mapping[str, Kernel], info: Optional[_ProgInfo]
               ) -> dict[str, str]:
        """Add a program's kernels to the record; a name already taken by a different kernel
        (another program's) gets a suffix, so each program keeps its own kernels."""
        names: dict[str, str] = {}
        for name, k in kernels.items():
            new = name
            n = 1
            while new in self.out_kernels and not _same_kernel(self.out_kernels[new], k):
                new = f"{name}_{n}"
                n += 1
            if new != name:
                k = _renamed_kernel(k, new)
            self.out_kernels.setdefault(new, k)
            names[name] = new
        return names

    def _find_file(self, path: str) -> Optional[str]:
        """A path the host opens, found relative to the host's directory or the cwd."""
        if os.path.isabs(path):
            return path if os.path.exists(path) else None
        for d in self.kernel_files.search_dirs:
            cand = os.path.join(d, path)
            if os.path.exists(cand):
                rel = os.path.relpath(cand)
                return rel if not rel.startswith("..") else os.path.normpath(cand)
        return None

    # -- the C library a host uses ------------------------------------------------------------

    def _cl_fopen(self, node: c_ast.FuncCall, args: list) -> Any:
        path = self._arg(args, 0)
        if isinstance(path, _Str):
            found = self._find_file(path.s)
            if found is not None:
                if found.endswith((".cl", ".clh", ".ocl")) or _looks_like_opencl(found):
                    self.opened.append(found)
                return _Handle("file:" + found)
            if path.s.endswith((".cl", ".ocl")):
                self.opened.append(path.s)
                return _Handle("file:" + path.s)
        return _Handle("fopen")

    def _cl_fread(self, node: c_ast.FuncCall, args: list) -> Any:
        buf, f = self._arg(args, 0), self._arg(args, 3)
        if isinstance(buf, _Ref) and isinstance(f, _Handle) and f.kind.startswith("file:") and \
                f.kind[5:] in self.opened:
            self.file_texts[buf.slot] = f.kind[5:]
        elif isinstance(buf, _Ref):  # data read at run time (sizes read from input files)
            self._query([buf])
        return _UNK

    def _kobj(self, v: Any, node: c_ast.Node) -> _KState:
        if isinstance(v, _KObj) and v.oid in self.state.kobjs:
            return self.state.kobjs[v.oid]
        if isinstance(v, _Poison):
            raise self._error(f"the kernel object is {v.reason}", node, UnsupportedError)
        raise self._error("not a kernel object created with clCreateKernel", node,
                          UnsupportedError)

    def _cl_clSetKernelArg(self, node: c_ast.FuncCall, args: list) -> Any:
        kv = self._arg(args, 0)
        ks = self._kobj(kv, node)
        kernel = self.out_kernels[ks.kernel]
        idx = self._concrete(self._arg(args, 1), "clSetKernelArg index", node)
        if idx < 0 or idx >= len(kernel.params):
            raise self._error(f"clSetKernelArg: argument index {idx} out of range for kernel "
                              f"'{kernel.name}' ({len(kernel.params)} parameters)", node)
        param = kernel.params[idx]
        size = self._arg(args, 2)
        ptr = self._arg(args, 3)
        loc = self._loc(node)
        pdesc = f"parameter {idx} ('{param.name}') of kernel '{kernel.name}'"
        if isinstance(ptr, _Num) and ptr.e == 0:
            if param.pointer and param.address_space == "local":
                nbytes = self._int(size, "local memory size", node)
                binding = ArgBinding(idx, "local", local_bytes=nbytes, loc=loc)
            else:
                raise self._error(f"clSetKernelArg: NULL value for {pdesc}, which is not a "
                                  "__local pointer", node)
        elif isinstance(ptr, _Ref):
            value = self._deref_value(ptr)
            if param.pointer and param.address_space == "local":
                raise self._error(f"clSetKernelArg: {pdesc} is a __local pointer; its value "
                                  "must be NULL with a size", node)
            nbytes = size.e if isinstance(size, _Num) and size.e.is_Integer else None
            if isinstance(value, _BufRef):
                if nbytes is not None and nbytes != 8:
                    raise self._error(f"clSetKernelArg: size {nbytes} for buffer "
                                      f"'{value.name}' bound to {pdesc}; a cl_mem argument "
                                      "takes sizeof(cl_mem)", node)
                if not param.is_buffer:
                    raise self._error(f"clSetKernelArg: buffer '{value.name}' bound to {pdesc}, "
                                      "which is not a __global/__constant pointer", node)
                self._buffer_arg(value, "clSetKernelArg", node)
                binding = ArgBinding(idx, "buffer", buffer=value.name, loc=loc)
            elif isinstance(value, _Poison):
                if param.pointer:
                    raise self._error(f"clSetKernelArg: the buffer for {pdesc} is "
                                      f"{value.reason}", node, UnsupportedError)
                binding = ArgBinding(idx, "scalar", value=None, loc=loc)
            elif param.pointer:
                raise self._error(f"clSetKernelArg: {pdesc} is a pointer but the value is not a "
                                  "buffer (pass &buf with a cl_mem created by clCreateBuffer)",
                                  node)
            else:
                want = types.size_of(param.type)
                if nbytes is not None and want is not None and nbytes != want:
                    raise self._error(f"clSetKernelArg: size {nbytes} for {pdesc} of type "
                                      f"{param.type} ({want} bytes)", node)
                binding = ArgBinding(idx, "scalar", value=_scalar_value(value, param.type),
                                     loc=loc)
        elif isinstance(ptr, _BufRef):
            raise self._error(f"clSetKernelArg: pass the address of the cl_mem (&{ptr.name}) "
                              f"for {pdesc}", node)
        else:
            if param.pointer:
                raise self._error(f"clSetKernelArg: cannot tell which buffer is bound to {pdesc}",
                                  node, UnsupportedError)
            binding = ArgBinding(idx, "scalar", value=None, loc=loc)
        self.state.kobjs[kv.oid] = ks.bind(idx, binding)
        return _ZERO

    def _sizes(self, v: Any, dim: int, what: str, node: c_ast.Node) -> Optional[tuple]:
        if isinstance(v, _Num) and v.e == 0:
            return None
        if not isinstance(v, _Ref):
            raise self._error(f"{what}: not a size_t array polyfuse can follow", node,
                              UnsupportedError)
        target = self._read(v)
        if isinstance(target, _Arr):
            elems = [target.get(i) for i in range(dim)]
        elif v.path and isinstance(v.path[-1], int):
            arr = self._read(_Ref(v.slot, v.path[:-1]))
            k = v.path[-1]
            elems = [arr.get(k + i) if isinstance(arr, _Arr) else _UNK for i in range(dim)]
        elif dim == 1:
            elems = [target]
        else:
            raise self._error(f"{what}: {dim} dimensions but a single value", node)
        return tuple(self._int(e, f"{what}[{i}]", node) for i, e in enumerate(elems))

    def _cl_clEnqueueNDRangeKernel(self, node: c_ast.FuncCall, args: list) -> Any:
        ks = self._kobj(self._arg(args, 1), node)
        dim = self._concrete(self._arg(args, 2), "work_dim", node)
        if dim not in (1, 2, 3):
            raise self._error(f"clEnqueueNDRangeKernel: work_dim must be 1, 2 or 3, got {dim}",
                              node)
        offset = self._sizes(self._arg(args, 3), dim, "global work offset", node)
        gsize = self._sizes(self._arg(args, 4), dim, "global work size", node)
        if gsize is None:
            raise self._error("clEnqueueNDRangeKernel: the global work size is NULL", node)
        lsize = self._sizes(self._arg(args, 5), dim, "local work size", node)
        self._launch(ks, dim, gsize, lsize, offset, node)
        return _ZERO

    def _cl_clEnqueueTask(self, node: c_ast.FuncCall, args: list) -> Any:
        ks = self._kobj(self._arg(args, 1), node)
        one = (sympy.Integer(1),)
        self._launch(ks, 1, one, one, None, node)
        return _ZERO

    def _launch(self, ks: _KState, dim: int, gsize: tuple, lsize: Optional[tuple],
                offset: Optional[tuple], node: c_ast.Node) -> None:
        kernel = self.out_kernels[ks.kernel]
        bound = ks.bound()
        missing = [p.index for p in kernel.params if p.index not in bound]
        if missing:
            names = ", ".join(f"{i} ({kernel.params[i].name})" for i in missing)
            raise self._error(f"launch of kernel '{kernel.name}' with unset arguments: {names}",
                              node)
        for i, b in bound.items():
            if isinstance(b, _Poison):
                if ks.kernel and self.loops:
                    raise _NeedUnroll(f"argument {i} {b.reason}")
                raise self._error(f"launch of kernel '{kernel.name}': argument {i} "
                                  f"({kernel.params[i].name}) {b.reason}", node, UnsupportedError)
        self._op(Launch(id=0, kernel=kernel.name, work_dim=dim, global_size=gsize,
                        local_size=lsize, args=tuple(bound[i] for i in sorted(bound)),
                        global_offset=offset, kernel_object=ks.var), node)

    def _range(self, buf: str, off: Any, size: Any, node: c_ast.Node) -> BufferRange:
        o = self._int(off, "offset", node, required=False)
        s = self._int(size, "size", node, required=False)
        if o is None:
            return BufferRange(buf)
        bsize = self.state.buffers[buf].size if buf in self.state.buffers else None
        for what, v in (("offset", o), ("end", None if s is None else o + s)):
            if v is None:
                continue
            below = sympy.simplify(v) if what == "offset" else None
            if below is not None and below.is_number and below < 0:
                raise self._error(f"transfer on buffer '{buf}' starts at negative offset {v}",
                                  node)
            if what == "end" and bsize is not None:
                over = sympy.simplify(v - bsize)
                if over.is_number and over > 0:
                    raise self._error(f"transfer on buffer '{buf}' reaches byte {v}, past the "
                                      f"end of the buffer ({bsize} bytes)", node)
        return BufferRange(buf, o, s)

    def _blocking(self, v: Any) -> bool:
        return _truth(v) is not False

    def _transfer(self, node: c_ast.FuncCall, args: list, *, call: str, rect: bool) -> Any:
        """``clEnqueue{Read,Write}Buffer[Rect]``: a host read or write of the bytes it moves (a
        rectangular transfer: the whole buffer, a safe over-approximation), synchronizing the
        queue when it blocks."""
        buf = self._buffer_arg(self._arg(args, 1), call, node)
        rng = BufferRange(buf) if rect else \
            self._range(buf, self._arg(args, 3), self._arg(args, 4), node)
        if "Write" in call:
            self._op(HostOp(id=0, kind="write", writes=(rng,), name=call), node)
        else:
            self._op(HostOp(id=0, kind="read", reads=(rng,), name=call), node)
            self._read_back(self._arg(args, 10 if rect else 5), call, node)
        if self._blocking(self._arg(args, 2)):
            self._sync(call, node)
        return _ZERO

    _cl_clEnqueueWriteBuffer = partialmethod(_transfer, call="clEnqueueWriteBuffer", rect=False)
    _cl_clEnqueueReadBuffer = partialmethod(_transfer, call="clEnqueueReadBuffer", rect=False)
    _cl_clEnqueueWriteBufferRect = partialmethod(_transfer, call="clEnqueueWriteBufferRect",
                                                 rect=True)
    _cl_clEnqueueReadBufferRect = partialmethod(_transfer, call="clEnqueueReadBufferRect",
                                                rect=True)

    def _cl_clEnqueueCopyBuffer(self, node: c_ast.FuncCall, args: list) -> Any:
        src = self._buffer_arg(self._arg(args, 1), "clEnqueueCopyBuffer source", node)
        dst = self._buffer_arg(self._arg(args, 2), "clEnqueueCopyBuffer destination", node)
        size = self._arg(args, 5)
        self._op(HostOp(id=0, kind="copy",
                        reads=(self._range(src, self._arg(args, 3), size, node),),
                        writes=(self._range(dst, self._arg(args, 4), size, node),),
                        name="clEnqueueCopyBuffer"), node)
        return _ZERO

    def _cl_clEnqueueCopyBufferRect(self, node: c_ast.FuncCall, args: list) -> Any:
        src = self._buffer_arg(self._arg(args, 1), "clEnqueueCopyBufferRect source", node)
        dst = self._buffer_arg(self._arg(args, 2), "clEnqueueCopyBufferRect destination", node)
        self._op(HostOp(id=0, kind="copy", reads=(BufferRange(src),),
                        writes=(BufferRange(dst),), name="clEnqueueCopyBufferRect"), node)
        return _ZERO

    def _cl_clEnqueueFillBuffer(self, node: c_ast.FuncCall, args: list) -> Any:
        buf = self._buffer_arg(self._arg(args, 1), "clEnqueueFillBuffer", node)
        rng = self._range(buf, self._arg(args, 4), self._arg(args, 5), node)
        self._op(HostOp(id=0, kind="write", writes=(rng,), name="clEnqueueFillBuffer"), node)
        return _ZERO

    def _cl_clEnqueueMapBuffer(self, node: c_ast.FuncCall, args: list) -> Any:
        self._success(args)
        buf = self._buffer_arg(self._arg(args, 1), "clEnqueueMapBuffer", node)
        fl = self._arg(args, 3)
        flags = int(fl.e) if isinstance(fl, _Num) and fl.e.is_Integer else 3
        rng = self._range(buf, self._arg(args, 4), self._arg(args, 5), node)
        reads = (rng,) if flags & _CL_MAP_READ or not flags & _CL_MAP_WRITE_INVALIDATE else ()
        writes = (rng,) if flags & (_CL_MAP_WRITE | _CL_MAP_WRITE_INVALIDATE) else ()
        if not flags & (_CL_MAP_READ | _CL_MAP_WRITE | _CL_MAP_WRITE_INVALIDATE):
            reads = writes = (rng,)
        self._op(HostOp(id=0, kind="write" if writes else "read", reads=reads, writes=writes,
                        name="clEnqueueMapBuffer"), node)
        if self._blocking(self._arg(args, 2)):
            self._sync("clEnqueueMapBuffer", node)
        sid = self._new_slot("mapped", _CType("array", 0, elem=_UNK_TYPE), _Arr(None, (), _UNK))
        return _Ref(sid)

    def _cl_clFinish(self, node: c_ast.FuncCall, args: list) -> Any:
        self._sync("clFinish", node)
        return _ZERO

    def _cl_clWaitForEvents(self, node: c_ast.FuncCall, args: list) -> Any:
        self._sync("clWaitForEvents", node)
        return _ZERO

    def _cl_clCreateKernelsInProgram(self, node: c_ast.FuncCall, args: list) -> Any:
        """One kernel object per kernel of the program, in source order (programs then find
        theirs by ``clGetKernelInfo(CL_KERNEL_FUNCTION_NAME)``); the count through the last
        argument."""
        names = list(self._program_kernels(self._arg(args, 0), node).items())
        count, out = self._arg(args, 3), self._arg(args, 2)
        if isinstance(count, _Ref):
            self._write(count, _Num(sympy.Integer(len(names))))
        if isinstance(out, _Ref):
            if self.loops:
                raise _NeedUnroll("kernel objects are created inside a host loop")
            room = self._arg(args, 1)
            n = min(len(names), int(room.e)) if isinstance(room, _Num) and room.e.is_Integer \
                else len(names)
            for i, (_, record_name) in enumerate(names[:n]):
                ref = self._index(out, _Num(sympy.Integer(i)))
                if not isinstance(ref, _Ref):
                    raise self._error("clCreateKernelsInProgram: the kernel array is not one "
                                      "polyfuse can follow", node, UnsupportedError)
                oid = self.next_oid
                self.next_oid += 1
                var = f"{self.name_hint or self.state.slots[out.slot].name}_{i}"
                self.state.kobjs[oid] = _KState(var=var, kernel=record_name)
                self._write(ref, _KObj(oid))
        elif not (isinstance(out, _Num) and out.e == 0):
            raise self._error("clCreateKernelsInProgram: the kernel array is not one polyfuse "
                              "can follow", node, UnsupportedError)
        return _ZERO

    def _cl_clGetKernelInfo(self, node: c_ast.FuncCall, args: list) -> Any:
        """``CL_KERNEL_FUNCTION_NAME`` and ``CL_KERNEL_NUM_ARGS`` of a kernel object are known;
        other queries are run-time values."""
        k, what, out = self._arg(args, 0), self._arg(args, 1), self._arg(args, 3)
        ret = self._arg(args, 4)
        if isinstance(k, _KObj) and k.oid in self.state.kobjs and isinstance(what, _Num):
            kernel = self.out_kernels[self.state.kobjs[k.oid].kernel]
            name = next((n for n, r in self._kernel_names() if r == kernel.name), kernel.name)
            if what.e == _CL_KERNEL_FUNCTION_NAME:
                if isinstance(out, _Ref):
                    self.str_slots[out.slot] = name
                if isinstance(ret, _Ref):
                    self._write(ret, _Num(sympy.Integer(len(name) + 1)))
                return _ZERO
            if what.e == _CL_KERNEL_NUM_ARGS and isinstance(out, _Ref):
                self._write(out, _Num(sympy.Integer(len(kernel.params))))
                return _ZERO
        self._query(args[1:])
        return _ZERO

    def _kernel_names(self) -> list[tuple[str, str]]:
        """(name in its program's source, name in the record) of every kernel created."""
        return [pair for info in self.programs.values() if info.names
                for pair in info.names.items()]


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def _same_kernel(a: Kernel, b: Kernel) -> bool:
    return a is b or (a.source == b.source and a.loc == b.loc and
                      a.build_options == b.build_options)


def _with_options(kernels: Mapping[str, Kernel], flags: Sequence[str]) -> dict[str, Kernel]:
    """Kernels of a program built with compiler options ``flags`` (``-cl-*``)."""
    if not flags:
        return dict(kernels)
    return {n: dataclasses.replace(k, build_options=k.build_options + tuple(flags))
            for n, k in kernels.items()}


def _renamed_kernel(k: Kernel, name: str) -> Kernel:
    """The same kernel under another name (two programs may each define a kernel ``mmul``)."""
    import copy

    from polyfuse.c import cpp

    if k.ast is None:
        return dataclasses.replace(k, name=name)
    ast = copy.deepcopy(k.ast)
    ast.decl.name = name
    t = ast.decl.type.type
    while not isinstance(t, c_ast.TypeDecl) and getattr(t, "type", None) is not None:
        t = t.type
    if isinstance(t, c_ast.TypeDecl):
        t.declname = name
    return dataclasses.replace(k, name=name, ast=ast, source=cpp.generate(ast))


_KERNEL_RE = re.compile(r"\b(__kernel|kernel)\s+(__attribute__|void)\b")


def _looks_like_opencl(path: str) -> bool:
    try:
        head = Path(path).read_bytes()[:65536]
    except OSError:
        return False
    return _KERNEL_RE.search(head.decode("utf-8", errors="replace")) is not None
