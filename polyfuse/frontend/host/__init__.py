"""Host front-end: an abstract interpreter of an OpenCL host program written in C or C++.

The host's translation units are parsed by clang with the system's own headers
(:mod:`polyfuse.frontend.clang_host`, which lowers them to pycparser's ``c_ast``; without libclang,
C hosts are preprocessed with polyfuse's own headers and parsed by pycparser) and interpreted from
``main``, with ``argc``/``argv`` from ``--args`` when given.  Functions of every unit are inlined.
The interpreter tracks what the polyhedral model needs and nothing else:

* **Integers** are sympy expressions.  Values read at run time (``atoi(argv[k])``, ``atol``,
  ``strtol``, ``scanf``) become host parameters named after the C variable they are stored in
  (``atoi``/``sscanf`` of a known ``--args`` word convert it);
  ``params`` replaces them by concrete values.  Integer division of symbolic values is
  ``floor`` (host sizes are assumed non-negative).  Floats are kept only when constant.
* **Programs**: ``clCreateProgramWithSource`` records its source strings (literals, or files the
  host read with ``fopen``/``fread`` or opened through a library call), ``clBuildProgram`` its
  ``-D``/``-I`` options (text a char buffer holds is followed through ``sprintf``/``strcpy``/
  ``strcat`` per path; options it cannot follow are refused naming the write that lost them);
  the kernels are parsed with them when a kernel is created, and each program keeps its own
  kernels (a name already taken by another program's kernel gets a suffix).  A source
  polyfuse cannot follow falls back to the kernel files the user gave.
* **OpenCL objects**: ``clCreateBuffer`` / ``clCreateSubBuffer`` give a :class:`Buffer` named
  after the variable the handle is stored in (``bufs[1]`` → ``bufs_1``, ``s.a`` → ``s_a``; a
  second buffer stored in the same variable gets ``_1``...); ``clCreateKernel`` gives a kernel
  object whose ``clSetKernelArg`` bindings are recorded and copied into each :class:`Launch`.
* **Device queries** (``clGetDeviceInfo``, ``clGetKernelWorkGroupInfo``: device type,
  compute units, work-group and work-item limits, vector widths, memory sizes, ``__local``
  memory, the extension list) are answered by the device the program is analysed for when one
  is given (``device_queries``; ``fuse --verify`` gives the verifying device, and a warning
  says so), and ``clGetPlatformIDs``/``clGetDeviceIDs`` then count that device alone;
  otherwise they are run-time values that name the query and line.
* **C++ objects**: ``new T(args)`` and ``T x(args)`` run ``T``'s constructor (bases' and
  members' initialisers first), a class's struct holds its bases' fields, implicit copies
  are member-wise; ``std::string``, ``std::stringstream`` and ``compare``/``==`` hold the
  text they are given (an option table matched against ``argv``; ``ss >> w`` word by word
  until ``ss.eof()``); ``std::vector<T>::resize(n)`` default-constructs its new elements, and
  ``std::vector<int> v(n[, x])`` of an integer or ``bool`` type starts with ``n`` zeros (copies of
  ``x``), ``std::vector<bool>``'s element proxies being its elements;
  ``sizeof(T)`` in a function template comes from the call's template arguments.
* **Events**: an enqueue stores a non-NULL ``cl_event`` through its ``event`` argument, and
  ``clGetEventInfo(CL_EVENT_COMMAND_EXECUTION_STATUS)`` on one is ``CL_COMPLETE`` (a warning
  says so) and a synchronisation: the in-order queue has run the command when the host looks,
  so a loop that polls for it ends.
* **Boilerplate** (platform, device, context, queue, program build, releases,
  printf, malloc/free, timing) is skipped.  Every OpenCL call is assumed to succeed: it returns
  ``CL_SUCCESS`` and stores it through its ``errcode_ret`` pointer, and handles are non-NULL, so
  error checks resolve statically.
* **Conditions** that cannot be decided are explored on both sides.  A side that ends in
  ``exit``/``abort``/``return`` (from ``main``) or ``goto`` is an error path and is assumed not
  taken; its condition, when it is a relation over host parameters, becomes a fact of
  ``Program.context`` (``if (n <= 0) exit(1);`` gives ``n >= 1``; so does ``assert``).  Launches,
  writes and copies under a condition that is still open raise "launch under data-dependent host
  condition"; reads and syncs there are kept, as if always executed (conservative).  A side
  that leaves early (``break``, ``continue``, a helper's ``return``) is no error path: what it
  stored (a search loop's ``devices = ...; break;``) and the reads it made are joined into the
  side that goes on; a launch or buffer update on it is refused.
* **Loops**: a counted ``for`` (``i = lo; i < hi`` or ``<=``; ``i++``/``i += c``; affine bounds;
  a descending ``t = a; t >= b; t--`` counts up with ``t = a - k``)
  becomes a :class:`HostLoop` whose iterator is a sympy symbol (one of a single iteration runs
  once, its iterator known: ``wg_sizes[k]`` of a one-entry option list is that entry).  When its
  iterations differ in a way that changes the operations (ping-pong buffer swaps, setting an
  argument after the launch, creating buffers in the loop) it is unrolled if the trip count is a
  constant (at most :data:`.loops.MAX_UNROLL`), otherwise it is refused.  Other loops
  (``while``, ``do``, descending or non-affine ``for``) are iterated concretely while their
  condition is known (at most :data:`.loops.MAX_UNROLL` times); otherwise they must not contain
  operations, and the variables they assign become unknown.  A loop with operations that a
  ``break``/``continue`` under an open condition may leave early is refused.  An affine guard on
  loop iterators (``if (k < n - 1) launch``) becomes a loop of 0 or 1 iteration around what it
  guards, so the loop stays symbolic.  Loops without OpenCL calls share one budget of concrete
  iterations per loop nest (:data:`.loops.NEST_BUDGET`); past it they are summarised.  A
  counted loop with a constant trip count whose symbolic pass fails (a geometry it carries from
  one iteration to the next) is run iteration by iteration.  So is one rule's loop: a counted
  loop without OpenCL calls whose symbolic pass loses something (a condition it leaves
  undecided, a known value stored at the iterator's index of a table (at most 1024 entries,
  or heap memory of at most 1024 bytes from ``malloc``/``posix_memalign``...; larger arrays
  are data) or changing per iteration, a number
  that depends on the iterator or was known before) when its trip count times the inner
  iterations of one pass fits what is left of the nest's budget; otherwise it stays symbolic,
  a warning says which budget it did not fit, and the numbers it left unknown are named
  (``--param`` binds them).
* **C++**: overloads are told apart by their number of arguments; standard containers keep
  handles and numbers as values and strings and structs in boxes the program writes through
  (``m[k].field = x``), copied with the container; members a constructor leaves to their
  default are empty containers and strings.  A recursion without OpenCL calls is inlined
  while shallow and summarised past a few re-entries (:mod:`.recursion`); one with OpenCL
  calls is inlined up to a call depth.
* **Data**: ``fscanf`` from an input file that is there (opened relative to the directory the
  program runs in, with its ``--args``) reads what the program reads, outside enumerated loops
  (a warning says the model is of this input).  A value the program computes from its data
  (read back from the device, read from a file that is not there or in a summarised loop,
  counted by a summarised loop) is named after the variable it is stored in: a
  parameter ``--param`` binds, and a refusal that depends on it names the read and its line.
* **Synchronization**: ``clFinish``, ``clWaitForEvents`` and every *blocking* read, write or map
  give a separate ``sync`` :class:`HostOp` right after the operation (ids stay in program order).
  ``clFlush`` and queue barriers/markers are ignored (in-order queue).
* **Unknown calls** (not in the file, not a known API) that receive a buffer handle give an
  ``unknown`` HostOp reading and writing the whole buffer; host variables they receive by
  pointer hold run-time values afterwards (parameters named after the variable).  Allocation
  functions (``malloc``, ``calloc``, ``posix_memalign``, ``aligned_alloc``, ``new``) give fresh
  host memory.

The front-end is composed of parts with public interfaces (docs/ARCHITECTURE.md, "The host
front-end"): the value model (:mod:`.values`), memory (:mod:`.memory`), host parameters
(:mod:`.params`), C types (:mod:`.typetable`), the C evaluator (:mod:`.evaluator` with
:mod:`.statements`, :mod:`.loops`, :mod:`.expressions`), the C library table (:mod:`.libc`),
the OpenCL API table (:mod:`.opencl_api`) that the C++ wrapper model (:mod:`.clhpp`) shares,
kernel sources (:mod:`.sources`), and the :class:`~.interpreter.Interpreter` that composes
them.  This module holds the entry points.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Optional, Union

from polyfuse.c import preprocessor
from polyfuse.core.program import (
    DeviceQueries,
    Kernel,
    PolyfuseError,
    Program,
    unknown_arg,
)
from polyfuse.frontend.host.interpreter import Interpreter
from polyfuse.frontend.host.sources import KernelFiles

# ----------------------------------------------------------------------------------------------
# Public entry points
# ----------------------------------------------------------------------------------------------


HostSource = Union[str, os.PathLike]


def parse_host(
    source_or_path: Union[HostSource, Sequence[HostSource]],
    kernels: Mapping[str, Kernel],
    *,
    filename: Optional[str] = None,
    params: Mapping[str, Union[int, float]] = {},  # noqa: B006 - read only
    include_dirs: Iterable[str] = (),
    defines: Mapping[str, Optional[str]] = {},  # noqa: B006 - read only
    argv: Optional[Sequence[str]] = None,
    kernel_files: Optional[KernelFiles] = None,
    check_params: bool = False,
    device_queries: Optional[DeviceQueries] = None,
) -> Program:
    """Build the :class:`Program` a C or C++ host program runs.

    ``source_or_path`` is one host (text or path) or several translation units of one program.
    ``kernels`` are used when the host's own kernel source cannot be followed (and as-is when
    the host reads the same file); kernel files the host opens are found from ``kernel_files``.
    ``params`` fixes values read at run time by the name of the variable they are stored in
    (``--param n=1024``); with ``check_params`` a name the host never reads is an error.
    ``argv`` is the program's command line after its name (``--args``).  With
    ``device_queries`` the host's ``clGetDeviceInfo``/``clGetKernelWorkGroupInfo`` get that
    device's answers (a warning says so); otherwise they are run-time values.  Raises
    :class:`PolyfuseError` naming file and line for bad input.
    """
    hosts = [source_or_path] if isinstance(source_or_path, (str, os.PathLike)) \
        else list(source_or_path)
    if not hosts:
        raise PolyfuseError("no host program given")
    units = [read_source(h, filename if i == 0 else None, default="<host>")
             for i, h in enumerate(hosts)]
    main_file = units[0][1]
    from polyfuse.frontend import clang_host

    if clang_host.available():
        ast = clang_host.parse_units([(name, text) for text, name in units],
                                     include_dirs=include_dirs, defines=defines)
    else:
        if len(units) > 1:
            raise PolyfuseError("several host files need libclang (pip install libclang)",
                                main_file)
        from polyfuse.c import preprocessor

        ast = preprocessor.parse(units[0][0], main_file, include_dirs=include_dirs, defines=defines,
                        opencl=False)
    if kernel_files is None:
        dirs = [os.path.dirname(os.path.abspath(n)) for _, n in units if not n.startswith("<")]
        kernel_files = KernelFiles(search_dirs=tuple(dict.fromkeys(dirs + [os.getcwd()])),
                                   include_dirs=tuple(include_dirs),
                                   defines=tuple(defines.items()))
    interp = Interpreter(ast, kernels, main_file, dict(params), kernel_files, argv,
                         device_queries)
    prog = interp.run()
    interp.sources.check_kernel_files()
    if check_params:
        known = set(prog.params) | interp.params.known() | _unknown_args(prog)
        unknown = [n for n in params if n not in known]
        if unknown:
            names = ", ".join(sorted(known)) or "none"
            raise PolyfuseError(f"--param {unknown[0]}: the host program reads no value named "
                                f"'{unknown[0]}' (known: {names})", main_file)
    files = tuple(n for _, n in units)
    return dataclasses.replace(prog, files=files)


def _unknown_args(program: Program) -> set[str]:
    """The names ``--param`` may give a scalar argument whose value the host does not show:
    its parameter's (every launch's) and one launch's own (:func:`unknown_arg`)."""
    out: set[str] = set()
    for op in program.launches:
        for a in op.args:
            if a.kind == "scalar" and a.value is None:
                name = program.kernels[op.kernel].params[a.index].name
                out |= {name, str(unknown_arg(op.id, name))}
    return out


def load_opencl(
    source_or_path: Union[HostSource, Sequence[HostSource], None] = None,
    host: Union[HostSource, Sequence[HostSource], None] = None,
    *,
    params: Optional[Mapping[str, Union[int, float]]] = None,
    include_dirs: Iterable[str] = (),
    defines: Mapping[str, Optional[str]] = {},  # noqa: B006 - read only
    argv: Optional[Sequence[str]] = None,
    allow_empty: bool = False,
    check_params: bool = False,
    kernel_source_override: bool = False,
    device_queries: Optional[DeviceQueries] = None,
) -> Program:
    """Load an OpenCL program: kernels from ``source_or_path``, host code from ``host``.

    ``source_or_path`` is one or several kernel files (or kernel source text); it may be None
    when the host names its kernel files itself.  ``host`` is one or several C/C++ translation
    units.  A kernel file the host does not build is an error (what runs is what the host
    reads) unless ``kernel_source_override``: then the given kernels replace every program's
    source.  Without ``host`` every kernel is launched once (see
    :func:`polyfuse.frontend.builder.default_program`).  A host with no kernel launch is an
    error unless ``allow_empty``: an empty model is never returned silently.
    ``device_queries``: the device that answers the host's info queries (see
    :func:`parse_host`).
    """
    from polyfuse.frontend import opencl

    include_dirs = tuple(os.fspath(d) for d in include_dirs)
    sources = [] if source_or_path is None else (
        [source_or_path] if isinstance(source_or_path, (str, os.PathLike))
        else list(source_or_path))
    kernels: dict[str, Kernel] = {}
    kfiles: list[str] = []
    for src in sources:
        shown = _display_name(src, "<kernels>")
        if host is not None and not shown.startswith("<"):
            # parsed when the host builds it, with that build's options (a -DBLOCK_SIZE=%d
            # made at run time), and only if it does: each program resolves its own names
            kfiles.append(shown)
            continue
        ks = opencl.parse_kernels(os.fspath(src), include_dirs=include_dirs,
                                  defines=dict(defines))
        for name, k in ks.items():
            if name in kernels:
                raise PolyfuseError(f"kernel '{name}' is defined in two of the kernel files; "
                                    "polyfuse cannot tell which one the host means",
                                    _display_name(src, "<kernels>"))
            kernels[name] = k
        kfiles.append(shown)
    if host is None:
        if not sources:
            raise PolyfuseError("no kernel file and no host program given")
        if not kernels and not allow_empty:
            raise PolyfuseError("no __kernel function in the kernel source(s)", kfiles[0])
        from polyfuse.frontend.builder import default_program

        prog = default_program(kernels, params=params or {})
        return dataclasses.replace(prog, files=tuple(kfiles))
    if kernel_source_override and not sources:
        raise PolyfuseError("--kernel-source-override: no kernel file given to build in place "
                            "of the host's")
    hosts = [host] if isinstance(host, (str, os.PathLike)) else list(host)
    dirs = [os.path.dirname(os.path.abspath(os.fspath(h))) for h in hosts
            if _display_name(h, "<") != "<"]
    dirs += [os.getcwd()] + [os.path.dirname(os.path.abspath(f)) for f in kfiles
                             if not f.startswith("<")]
    kf = KernelFiles(files=tuple(f for f in kfiles if not f.startswith("<")),
                     search_dirs=tuple(dict.fromkeys(dirs)), include_dirs=include_dirs,
                     defines=tuple(defines.items()), replace=kernel_source_override)
    prog = parse_host(hosts, kernels, params=params or {}, include_dirs=include_dirs,
                      defines=defines, argv=argv, kernel_files=kf, check_params=check_params,
                      device_queries=device_queries)
    if not prog.launches and not allow_empty:
        raise PolyfuseError("the host program launches no kernel (is a launch on a path "
                            "polyfuse takes as an error path?); pass --allow-empty to accept "
                            "an empty model", prog.files[0] if prog.files else "<host>")
    used = tuple(dict.fromkeys(kfiles + [k.loc.file for k in prog.kernels.values()
                                         if k.loc is not None and k.loc.file not in kfiles]))
    return dataclasses.replace(prog, files=used + prog.files)


def read_source(
    source_or_path: Union[str, os.PathLike], filename: Optional[str], *, default: str
) -> tuple[str, str]:
    """(text, file name) of a source given as text or as a path."""
    if isinstance(source_or_path, os.PathLike) or (
        isinstance(source_or_path, str)
        and "\n" not in source_or_path
        and (os.path.exists(source_or_path) or re.search(r"\.(c|h|cl|cpp)$", source_or_path))
    ):
        path = Path(source_or_path)
        return preprocessor.read_source(str(path)), filename or str(path)
    return str(source_or_path), filename or default


def _display_name(source_or_path: Union[str, os.PathLike], default: str) -> str:
    if isinstance(source_or_path, os.PathLike):
        return str(source_or_path)
    if "\n" not in source_or_path and os.path.exists(source_or_path):
        return source_or_path
    return default
