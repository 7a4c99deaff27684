"""The C++ OpenCL wrapper (``CL/cl.hpp``, ``cl2.hpp``, ``opencl.hpp``) at the API level.

Host programs written against the wrapper (the HandsOnOpenCL C++ solutions, many SDK samples)
create ``cl::Buffer``/``cl::Program``/``cl::Kernel`` objects, launch through
``queue.enqueueNDRangeKernel`` or a kernel functor (``cl::make_kernel<...>``,
``cl::KernelFunctor<...>`` called as ``k(cl::EnqueueArgs(queue, cl::NDRange(n)), a, b, n)``) and
move data with ``cl::copy``.  Interpreting the header's template bodies would drown the model in
reference counting and exceptions; instead :mod:`polyfuse.frontend.clang_host` lowers every call
into namespace ``cl`` to ``__clhpp__Class__method(object, args...)`` and this module maps each
onto the entries of the OpenCL API table :data:`.opencl_api.HANDLERS` (``clCreateBuffer``,
``clSetKernelArg``, ``clEnqueueNDRangeKernel``...), through public interfaces only.  A wrapper
call that is not modelled is treated like any unknown library call (buffers it receives are
read and written entirely); one that would change the launches in a way polyfuse cannot follow
is refused with file:line.

``std::vector`` lengths are tracked (``std::vector<float> h(n)``), because the wrapper sizes
buffers from a vector's iterators.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

import sympy
from pycparser import c_ast

from polyfuse.core.program import UnsupportedError
from polyfuse.frontend.host import opencl_api, values

if TYPE_CHECKING:
    from polyfuse.frontend.host.evaluator import CEvaluator

#: the prefix clang_host gives lowered wrapper calls
PREFIX = "__clhpp__"


@dataclass(frozen=True)
class Range(values.Value):
    """A ``cl::NDRange`` (empty for ``cl::NullRange``)."""

    sizes: tuple


@dataclass(frozen=True)
class EnqueueArgs(values.Value):
    """A ``cl::EnqueueArgs``: the launch geometry of a functor call."""

    offset: Range
    global_: Range
    local: Range


@dataclass(frozen=True)
class LocalArg(values.Value):
    """A ``cl::LocalSpaceArg`` (``cl::Local(bytes)``)."""

    size: Any


@dataclass(frozen=True)
class Vec(values.Value):
    """A ``std::vector`` of ``length`` elements of ``elem`` bytes (None: not known), and its
    elements while every one is a known handle or number (``std::vector<cl_kernel>``)."""

    length: Any
    elem: int
    items: Optional[tuple] = None


@dataclass(frozen=True)
class StdMap(values.Value):
    """A ``std::map``/``std::unordered_map``: its (key, value) pairs while all are known."""

    items: Optional[tuple] = None


@dataclass(frozen=True)
class MapIter(values.Value):
    """An iterator from ``m.find(k)`` (``key``) or ``m.end()`` (``key`` None) of the map
    that ``map`` points to."""

    map: values.Ref
    key: Any


@dataclass(frozen=True)
class Iter(values.Value):
    """An iterator into a vector: ``base + pos`` (``begin``: 0, ``end``: the length)."""

    vec: Vec
    pos: Any


_NOT_HANDLED = object()
#: classes of cl.hpp 1.2 that implement what opencl.hpp's classes do
_CLASS_ALIASES = {"functionImplementation": "make_kernel",
                  "KernelFunctorGlobal": "KernelFunctor"}


def handles(name: str) -> bool:
    """Whether a lowered call is the wrapper's or a tracked ``std::vector`` operation."""
    return name.startswith(PREFIX) or name in _VECTOR or \
        name.split("__", 1)[0] in ("map", "unordered_map") or name in _MAP_ITER_OPS or \
        name in ("operator==", "operator!=")


def functor_call(ev: CEvaluator, node: c_ast.FuncCall, obj: Any, args: list) -> Any:
    """A kernel functor called through a variable whose type the call does not name (a
    template's ``F& kernel``: ``kernel(cl::EnqueueArgs(...), a, b)``): its launch; None when
    ``obj`` is no kernel object or the call gives no ``cl::EnqueueArgs``."""
    for _ in range(3):  # through the references that passed it
        if isinstance(obj, values.Ref):
            obj = ev.mem.read(obj)
    if not isinstance(obj, values.KObj) or not args or not isinstance(args[0], EnqueueArgs):
        return None
    return call(ev, PREFIX + "KernelFunctor__call", node, [obj, *args])


def call(ev: CEvaluator, name: str, node: c_ast.FuncCall, args: list) -> Any:
    """The value of a wrapper call, with its effects recorded through the host interpreter."""
    interp = _Host(ev)
    model = _Model(interp, node)
    if name in _VECTOR:
        return model.vector(name, args)
    if name.startswith(("map__", "unordered_map__")):
        return model.std_map(name.split("__", 1)[1], args)
    if name in _MAP_ITER_OPS:
        return model.map_iter(args)
    if name in ("operator==", "operator!="):
        return model.compare(name, node, args)
    key = name[len(PREFIX):]
    cls_, sep, rest = key.partition("__")
    key = _CLASS_ALIASES.get(cls_, cls_) + sep + rest
    handler: Optional[Callable[[list], Any]] = getattr(model, "m_" + key.replace("__", "_"),
                                                       None)
    if handler is not None:
        result = handler(args)
        if result is not _NOT_HANDLED:
            return result
    cls = key.split("__")[0]
    if key.endswith("__ctor"):
        # a copy of a tracked object (``cl::Buffer b = a;``, pass by value) is that object
        if len(args) == 1 and not isinstance(args[0], (interp.Num, interp.Unknown)):
            return args[0]
        return interp.Handle("cl::" + cls)
    if key.endswith(("__dtor", "__getInfo", "__getBuildInfo", "__getWorkGroupInfo",
                     "__getProfilingInfo", "__getDevices", "__getDefault", "__get",
                     "__flush", "__dimensions")) or cls in ("Platform", "Device", "Context",
                                                            "Error"):
        interp.query(args)
        # getInfo<NAME>() returns the value; getInfo(NAME, &value) stores it
        stores = any(isinstance(a, interp.Ref) for a in args[1:])
        return interp.RUNTIME if key.endswith(("__getInfo", "__getWorkGroupInfo",
                                               "__getBuildInfo")) and not stores \
            else interp.ZERO
    return interp.unknown_call(f"cl::{key.replace('__', '::')}", args, node)


class _Host:
    """The host interpreter as this model uses it: the value types and the evaluator's public
    parts (memory, diagnostics, the OpenCL API table)."""

    Num, Unknown, Handle, Ref, Str = values.Num, values.Unknown, values.Handle, values.Ref, \
        values.Str
    KObj, ProgObj, BufRef = values.KObj, values.ProgObj, values.BufRef
    UNK, ZERO, ONE, RUNTIME = values.UNK, values.ZERO, values.ONE, values.RUNTIME

    def __init__(self, ev: CEvaluator) -> None:
        self.x = ev

    def error(self, msg: str, node: c_ast.Node, cls: type = UnsupportedError) -> Exception:
        return self.x.ctx.error(msg, node, cls)

    def as_int(self, v: Any, what: str, node: c_ast.Node, *, required: bool = True) -> Any:
        return self.x.int_value(v, what, node, required=required)

    def concrete(self, v: Any, what: str, node: c_ast.Node) -> int:
        return self.x.concrete(v, what, node)

    def truth(self, v: Any) -> Optional[bool]:
        return values.truth_of(v)

    def read(self, ref: Any) -> Any:
        return self.x.mem.read(ref)

    def write(self, ref: Any, value: Any) -> None:
        self.x.mem.write(ref, value)

    def query(self, args: list) -> None:
        self.x.mem.forget_through([a for a in args if isinstance(a, self.Ref)])

    def unknown_call(self, name: str, args: list, node: c_ast.Node) -> Any:
        return self.x.unknown_call(name, args, node)

    def device_answers(self) -> Any:
        """The device that answers queries (``--verify``'s), or None."""
        return self.x.cl.queries

    def warn(self, msg: str, node: c_ast.Node) -> None:
        self.x.ctx.warn(msg, node)

    def string_at(self, ref: Any) -> Optional[str]:
        return self.x.mem.texts.get(ref.slot)

    def new_box(self, value: Any, owner: Any) -> Any:
        """A class-type element of the container ``owner`` points to."""
        return self.x.mem.new_box(value, (owner.slot, owner.path))

    def text(self, v: Any) -> Optional[str]:
        """The text of a string value (or of what a pointer to one points to)."""
        if isinstance(v, self.Ref):
            cur = self.read(v)
            if isinstance(cur, self.Str):
                return cur.s
        return self.x.mem.string(v)

    def temp_ref(self, value: Any) -> Any:
        """A pointer to a fresh variable holding ``value`` (an argument passed by value)."""
        return self.Ref(self.x.mem.new_slot("arg", values.CType("void", 8), value))

    def c_api(self, name: str, node: c_ast.Node, args: list) -> Any:
        return opencl_api.HANDLERS[name](self.x, node, args)

    def info_query(self, name: str, node: c_ast.Node, args: list) -> Any:
        """An info query of the C API (``clGetKernelWorkGroupInfo``) at the wrapper call
        ``node``, which the handler sees under the API's name (it tells the queries apart
        by it)."""
        call = c_ast.FuncCall(c_ast.ID(name), getattr(node, "args", None),
                              coord=getattr(node, "coord", None))
        return opencl_api.HANDLERS[name](self.x, call, args)

    def create_buffer_call(self, node: c_ast.Node, args: list) -> Any:
        return self.c_api("clCreateBuffer", node, args + [self.UNK, self.UNK])

    def create_buffer(self, node: c_ast.Node, flags: int, size: Any) -> Any:
        return self.create_buffer_call(node, [self.UNK, self.Num(sympy.Integer(flags)),
                                              self.Num(size) if size is not None else self.UNK])

    def create_program(self, node: c_ast.Node, sources: list) -> Any:
        slot = self.x.mem.new_slot(
            "sources", values.CType("array", 8, elem=values.PTR_VOID, length=len(sources)),
            values.Arr(len(sources), tuple(enumerate(sources)), self.UNK))
        return self.c_api("clCreateProgramWithSource", node,
                          [self.Handle("context"), self.Num(sympy.Integer(len(sources))),
                           self.Ref(slot), self.ZERO, self.ZERO])

    def build_program(self, node: c_ast.Node, prog: Any, options: Any) -> Any:
        return self.c_api("clBuildProgram", node, [prog, self.ZERO, self.ZERO, options])

    def create_kernel(self, node: c_ast.Node, args: list) -> Any:
        name = args[1]
        if isinstance(name, self.Ref):  # a std::string holding the name
            name = self.read(name)
        return self.c_api("clCreateKernel", node, [args[0], name, self.UNK])

    def set_kernel_arg(self, node: c_ast.Node, args: list) -> Any:
        return self.c_api("clSetKernelArg", node, args)

    def launch_kernel(self, node: c_ast.Node, kobj: Any, dim: int, gsize: tuple,
                      lsize: Optional[tuple], offset: Optional[tuple]) -> None:
        opencl_api.launch(self.x, opencl_api.kernel_object(self.x, kobj, node), dim, gsize,
                          lsize, offset, node)


class _Model:
    def __init__(self, interp: Any, node: c_ast.FuncCall) -> None:
        self.i = interp
        self.node = node

    def error(self, msg: str) -> Exception:
        return self.i.error(msg, self.node, UnsupportedError)

    # -- values ---------------------------------------------------------------------------------

    def range_of(self, v: Any, what: str) -> Range:
        if isinstance(v, Range):
            return v
        if isinstance(v, self.i.Num):  # an integer converted to a 1-D NDRange
            return Range((self.i.as_int(v, what, self.node),))
        raise self.error(f"{what} is not a cl::NDRange polyfuse can follow")

    def vec_of(self, v: Any) -> Optional[Vec]:
        if isinstance(v, self.i.Ref):
            v = self.i.read(v)
        return v if isinstance(v, Vec) else None

    # -- std::vector ----------------------------------------------------------------------------

    def vector(self, name: str, args: list) -> Any:
        i = self.i
        if name == "__polyfuse_vector":
            if len(args) in (2, 3) and isinstance(args[0], i.Num) and \
                    isinstance(args[1], i.Num):
                n = i.as_int(args[0], "vector length", self.node, required=False)
                # numbers (the elements' value, given third) are kept while they are few
                x = args[2] if len(args) == 3 else None
                few = n is not None and n.is_Integer and n <= _MAX_RESIZED  # (n: symbolic)
                items = () if n == 0 else (x,) * int(n) if x is not None and \
                    _element(i, x) and few else None
                return Vec(n, int(args[1].e), items)
            return Vec(None, 0)
        vec = self.vec_of(args[0]) if args else None
        if name == "vector__vector":  # a copy (its elements are copied where it is stored)
            return vec if vec is not None and len(args) == 1 else i.UNK
        if name in ("begin", "cbegin", "vector__begin", "vector__cbegin"):
            return Iter(vec, sympy.Integer(0)) if vec is not None else i.UNK
        if name in ("end", "cend", "vector__end", "vector__cend"):
            return Iter(vec, vec.length) if vec is not None and vec.length is not None \
                else i.UNK
        if name in ("vector__size", "size", "__polyfuse_vector_size"):
            return i.Num(vec.length) if vec is not None and vec.length is not None else i.UNK
        if name == "vector__empty":
            return i.Num(sympy.Integer(int(vec.length == 0))) if vec is not None and \
                vec.length is not None else i.UNK
        if name == "vector__resize" and isinstance(args[0], i.Ref) and len(args) > 1:
            n = i.as_int(args[1], "vector length", self.node, required=False)
            old = vec.elem if vec is not None else 0
            i.write(args[0], Vec(n, old, self.resized_items(vec, n, args)))
            return i.UNK
        items = vec.items if vec is not None else None
        if name in ("vector__push_back", "vector__emplace_back") and items is not None and \
                len(args) == 2 and _element(i, args[1]):
            i.write(args[0], Vec(vec.length + 1, vec.elem, items + (args[1],)))
            return i.UNK
        if name in ("vector__push_back", "vector__emplace_back") and items is not None and \
                len(args) == 2 and isinstance(args[0], i.Ref):
            v = i.read(args[1]) if isinstance(args[1], i.Ref) else args[1]
            if isinstance(v, (i.Str, values.Rec)):  # a string or struct: boxed
                box = i.new_box(v, args[0])
                i.write(args[0], Vec(vec.length + 1, vec.elem, items + (box,)))
                return i.UNK
        if name.startswith("vector__element"):
            return self.vector_element(name, vec, args)
        if name == "vector__set" and vec is not None and isinstance(args[0], i.Ref):
            # v[k] = x: the length stays
            k = _index(i, args[1], len(items)) if items is not None else None
            known = k is not None and _element(i, args[2])
            i.write(args[0], Vec(vec.length, vec.elem, items[:k] + (args[2],) + items[k + 1:]
                                 if known else None))
            return args[2]
        if name in ("vector__push_back", "vector__emplace_back", "vector__clear",
                    "vector__assign", "vector__insert", "vector__pop_back", "vector__set"):
            if vec is not None and isinstance(args[0], i.Ref):
                i.write(args[0], Vec(0, vec.elem, ()) if name == "vector__clear" else
                        Vec(None, vec.elem))
                return i.UNK
            return i.unknown_call(name, args, self.node)
        if name in ("vector__data", "__polyfuse_vector_at") and isinstance(args[0], i.Ref):
            # `v.data()`, `&v[k]`: a pointer into the elements, read where it is used
            k = args[1] if len(args) > 1 else i.ZERO
            if isinstance(k, i.Num) and k.e.is_Integer and k.e >= 0:
                return values.ElemPtr(args[0], int(k.e))
        if name in ("vector__operator[]", "vector__at", "vector__front", "vector__back",
                    "__polyfuse_vector_item") and items:
            k = {"vector__front": 0, "vector__back": len(items) - 1}.get(name)
            k = _index(i, args[1], len(items)) if k is None and len(args) > 1 else k
            if k is not None:
                return items[k]
        # data() and elements not known: host memory polyfuse does not track element-wise
        return i.UNK

    def resized_items(self, vec: Optional[Vec], n: Optional[int], args: list
                      ) -> Optional[tuple]:
        """The elements of ``v.resize(n, x)`` while they are known: those kept, then copies
        of ``x``; a class element (``x`` is ``T()`` where ``resize(n)`` default-constructs)
        is a box of its own per element.  None past :data:`_MAX_RESIZED` elements."""
        i = self.i
        items = vec.items if vec is not None else None
        if items is None or n is None or not sympy.sympify(n).is_Integer or n > _MAX_RESIZED:
            return None
        if n <= len(items):
            return items[:n]
        if len(args) < 3:  # an element the front-end cannot make: not known
            return None
        x = i.read(args[2]) if isinstance(args[2], i.Ref) else args[2]
        if isinstance(x, values.Rec):
            return items + tuple(i.new_box(x, args[0]) for _ in range(n - len(items)))
        return items + (x,) * (n - len(items)) if _element(i, x) else None

    def vector_element(self, name: str, vec: Optional[Vec], args: list) -> Any:
        """``v[k]`` (``at``, ``front``, ``back``) of a vector of class elements: a pointer to
        its box.  An element polyfuse cannot tell may be written: the elements are forgotten."""
        i = self.i
        items = vec.items if vec is not None else None
        k = None
        if items:
            k = {"vector__element_front": 0, "vector__element_back": len(items) - 1}.get(name)
            k = _index(i, args[1], len(items)) if k is None and len(args) > 1 else k
        if k is not None and isinstance(items[k], values.Box) and isinstance(args[0], i.Ref) \
                and items[k].owner == (args[0].slot, args[0].path):
            return i.Ref(items[k].slot)
        if vec is not None and items is not None and isinstance(args[0], i.Ref):
            i.write(args[0], Vec(vec.length, vec.elem))
        return i.UNK

    def map_element(self, m: Any, items: Optional[dict], key: Any, args: list) -> Any:
        """``m[k]`` of a map of class elements: a pointer to the element in its (key,
        value) box, inserted when missing.  A key polyfuse cannot tell may insert one: the
        map is forgotten."""
        i = self.i
        if items is not None and key is not None and isinstance(args[0], i.Ref):
            box = items.get(key)
            if box is None:
                k = i.read(args[1]) if isinstance(args[1], i.Ref) else args[1]
                box = i.new_box(values.Rec((("first", k), ("second", i.UNK))), args[0])
                items[key] = box
                i.write(args[0], StdMap(tuple(items.items())))
            if isinstance(box, values.Box) and box.owner == (args[0].slot, args[0].path):
                return i.Ref(box.slot, ("second",))
        if isinstance(m, StdMap) and isinstance(args[0], i.Ref):
            i.write(args[0], StdMap(None))
        return i.UNK

    def map_iter(self, args: list) -> Any:
        """``it->`` / ``*it`` of a map iterator from ``find``: its (key, value) box."""
        i = self.i
        it = i.read(args[0]) if args and isinstance(args[0], i.Ref) else arg0(args)
        if isinstance(it, MapIter) and it.key is not None:
            m = i.read(it.map)
            box = dict(m.items).get(it.key) if isinstance(m, StdMap) and m.items is not None \
                else None
            if isinstance(box, values.Box):
                return i.Ref(box.slot)
        return i.UNK

    def compare(self, name: str, node: c_ast.FuncCall, args: list) -> Any:
        """``==``/``!=`` of known strings or of map iterators; else an unknown call."""
        i = self.i
        a, b = (i.read(x) if isinstance(x, i.Ref) and isinstance(i.read(x), MapIter) else x
                for x in (arg0(args), args[1] if len(args) > 1 else i.UNK))
        same: Optional[bool] = None
        if isinstance(a, MapIter) and isinstance(b, MapIter) and a.map == b.map:
            same = a.key == b.key
        elif not isinstance(a, MapIter) and not isinstance(b, MapIter):
            ta, tb = i.text(a), i.text(b)
            if ta is not None and tb is not None:
                same = ta == tb
        if same is None:
            return i.unknown_call(name, args, node)
        return i.ONE if same == (name == "operator==") else i.ZERO

    def std_map(self, method: str, args: list) -> Any:
        """A map's known (key, value) pairs: keys that are strings or integers, values that
        are handles or numbers; any other use forgets them (the value is then unknown)."""
        i = self.i
        if method == "ctor":  # empty, or a copy of another map
            if len(args) == 1:
                src = i.read(args[0]) if isinstance(args[0], i.Ref) else args[0]
                return src if isinstance(src, StdMap) else StdMap(None)
            return StdMap(() if not args else None)
        m = i.read(args[0]) if args and isinstance(args[0], i.Ref) else None
        items = dict(m.items) if isinstance(m, StdMap) and m.items is not None else None
        key = _key(i, args[1]) if len(args) > 1 else None
        if method == "element":
            return self.map_element(m, items, key, args)
        if method == "find" and items is not None and key is not None and \
                isinstance(args[0], i.Ref):
            return MapIter(args[0], key if key in items else None)
        if method == "end" and isinstance(m, StdMap) and isinstance(args[0], i.Ref):
            return MapIter(args[0], None)
        if method in ("operator[]", "at") and items is not None and key is not None:
            if key not in items:  # operator[] inserts a value-initialized element
                items[key] = i.ZERO
                i.write(args[0], StdMap(tuple(items.items())))
            return items[key]
        if method == "count" and items is not None and key is not None:
            return i.Num(sympy.Integer(int(key in items)))
        if method == "size" and items is not None:
            return i.Num(sympy.Integer(len(items)))
        if method in ("operator[]", "at", "count", "size", "find", "begin", "end", "dtor"):
            return i.UNK
        if isinstance(m, StdMap):  # m[k] = v, insert, erase, clear
            if method == "set" and items is not None and key is not None and \
                    _element(i, args[2]):
                items[key] = args[2]
            elif method == "clear":
                items = {}
            else:
                items = None
            i.write(args[0], StdMap(tuple(items.items()) if items is not None else None))
            return args[2] if method == "set" else i.UNK
        return i.unknown_call(f"std::map::{method}", args, self.node)

    # -- objects --------------------------------------------------------------------------------

    def m_NDRange_ctor(self, args: list) -> Any:
        if len(args) == 1 and isinstance(args[0], Range):
            return args[0]
        return Range(tuple(self.i.as_int(a, f"cl::NDRange size {k}", self.node)
                           for k, a in enumerate(args[:3])))

    def m_NullRange(self, args: list) -> Any:
        return Range(())

    def m_NDRange_dimensions(self, args: list) -> Any:
        r = args[0] if args else None
        return self.i.Num(sympy.Integer(len(r.sizes))) if isinstance(r, Range) else self.i.UNK

    def m_Local(self, args: list) -> Any:
        return LocalArg(self.i.as_int(args[0], "cl::Local size", self.node) if args else None)

    def m_LocalSpaceArg_ctor(self, args: list) -> Any:
        return args[0] if len(args) == 1 and isinstance(args[0], LocalArg) else _NOT_HANDLED

    def m_EnqueueArgs_ctor(self, args: list) -> Any:
        ranges = [a for a in args if isinstance(a, (Range, self.i.Num))]
        if len(args) == 1 and isinstance(args[0], EnqueueArgs):
            return args[0]
        ranges = [self.range_of(a, "cl::EnqueueArgs range") for a in ranges]
        if len(ranges) == 1:
            return EnqueueArgs(Range(()), ranges[0], Range(()))
        if len(ranges) == 2:
            return EnqueueArgs(Range(()), ranges[0], ranges[1])
        if len(ranges) == 3:
            return EnqueueArgs(*ranges)
        raise self.error("cl::EnqueueArgs without a global range polyfuse can follow")

    def m_Buffer_ctor(self, args: list) -> Any:
        i = self.i
        if len(args) == 1:
            return _NOT_HANDLED  # a copy
        if not args:
            return i.Handle("cl::Buffer (empty)")
        iters = [a for a in args if isinstance(a, Iter)]
        if len(iters) >= 2 or (len(args) >= 3 and isinstance(args[1], i.Unknown)
                               and isinstance(args[2], i.Unknown)):
            # Buffer(context, begin, end, readOnly[, useHostPtr]): a copy of the host data
            size = None
            if len(iters) >= 2 and iters[0].vec is not None and iters[0].vec.elem and \
                    iters[1].pos is not None:
                size = (iters[1].pos - iters[0].pos) * iters[0].vec.elem
            read_only = i.truth(args[3]) if len(args) > 3 else None
            flags = (1 << 2) if read_only is True else 1
            use_host = len(args) > 4 and i.truth(args[4]) is True
            flags |= (1 << 3) if use_host else (1 << 5)
            return i.create_buffer(self.node, flags, size)
        # Buffer([context,] flags, size[, host_ptr[, err]])
        start = 1 if len(args) >= 3 or isinstance(args[0], i.Handle) else 0
        if isinstance(args[0], i.Num) and len(args) <= 3:
            start = 0
        flags = args[start] if start < len(args) else i.ZERO
        size = args[start + 1] if start + 1 < len(args) else i.UNK
        return i.create_buffer_call(self.node, [i.UNK, flags, size])

    def m_Program_ctor(self, args: list) -> Any:
        i = self.i
        if len(args) == 1 and isinstance(args[0], i.ProgObj):
            return args[0]
        src_i = 1 if len(args) >= 2 and isinstance(args[0], i.Handle) else 0
        source = args[src_i] if src_i < len(args) else i.UNK
        prog = i.create_program(self.node, [source])
        build = args[src_i + 1] if src_i + 1 < len(args) else None
        if build is not None and isinstance(build, i.Num) and i.truth(build) is True:
            i.build_program(self.node, prog, i.ZERO)
        return prog

    def m_Program_build(self, args: list) -> Any:
        if not args:
            return self.i.ZERO
        opts = next((a for a in args[1:] if isinstance(a, self.i.Str)), None)
        if opts is None:
            opts = next((a for a in args[1:] if isinstance(a, self.i.Ref)
                         and self.i.string_at(a) is not None), self.i.ZERO)
        self.i.build_program(self.node, args[0], opts)
        return self.i.ZERO

    def _kernel(self, args: list) -> Any:
        if len(args) == 1 and isinstance(args[0], self.i.KObj):
            return args[0]  # a functor made from a kernel object
        if len(args) < 2:
            raise self.error("a kernel object without a program and a kernel name")
        return self.i.create_kernel(self.node, [args[0], args[1], self.i.UNK])

    m_Kernel_ctor = _kernel
    m_make_kernel_ctor = _kernel
    m_KernelFunctor_ctor = _kernel

    def m_KernelFunctor_getKernel(self, args: list) -> Any:
        return args[0]

    def set_arg(self, kobj: Any, index: int, value: Any) -> None:
        i = self.i
        if isinstance(value, LocalArg):
            i.set_kernel_arg(self.node, [kobj, i.Num(sympy.Integer(index)), i.Num(value.size),
                                         i.ZERO])
            return
        size = i.Num(sympy.Integer(8)) if isinstance(value, i.BufRef) else i.UNK
        i.set_kernel_arg(self.node, [kobj, i.Num(sympy.Integer(index)), size,
                                     i.temp_ref(value)])

    def m_Kernel_setArg(self, args: list) -> Any:
        if len(args) < 3:
            raise self.error("cl::Kernel::setArg without an index and a value")
        index = self.i.concrete(args[1], "cl::Kernel::setArg index", self.node)
        if len(args) >= 4:  # setArg(index, size, ptr): the C API's form
            self.i.set_kernel_arg(self.node, [args[0], args[1], args[2], args[3]])
        else:
            self.set_arg(args[0], index, args[2])
        return self.i.ZERO

    def _functor_call(self, args: list) -> Any:
        if len(args) < 2 or not isinstance(args[1], EnqueueArgs):
            raise self.error("a kernel functor called without cl::EnqueueArgs polyfuse can "
                             "follow")
        kobj, ea = args[0], args[1]
        for k, v in enumerate(args[2:]):
            self.set_arg(kobj, k, v)
        self.launch(kobj, ea.offset, ea.global_, ea.local)
        return self.i.Handle("cl::Event")

    m_make_kernel_call = _functor_call
    m_KernelFunctor_call = _functor_call

    def launch(self, kobj: Any, offset: Range, global_: Range, local: Range) -> None:
        i = self.i
        dim = len(global_.sizes)
        if dim not in (1, 2, 3):
            raise self.error("a launch without a 1-, 2- or 3-dimensional global range")
        for what, r in (("offset", offset), ("local range", local)):
            if r.sizes and len(r.sizes) != dim:
                raise self.error(f"the {what} has {len(r.sizes)} dimensions, the global range "
                                 f"{dim}")
        i.launch_kernel(self.node, kobj, dim, global_.sizes, local.sizes or None,
                        offset.sizes or None)

    # -- the command queue -----------------------------------------------------------------------

    def m_CommandQueue_enqueueNDRangeKernel(self, args: list) -> Any:
        if len(args) < 4:
            raise self.error("enqueueNDRangeKernel without a global range")
        local = self.range_of(args[4], "local range") if len(args) > 4 else Range(())
        self.launch(args[1], self.range_of(args[2], "offset"),
                    self.range_of(args[3], "global range"), local)
        return self.i.ZERO

    def m_CommandQueue_enqueueTask(self, args: list) -> Any:
        one = Range((sympy.Integer(1),))
        self.launch(args[1], Range(()), one, one)
        return self.i.ZERO

    def _transfer(self, api: str, args: list) -> Any:
        """``queue.enqueueReadBuffer(buf, blocking, offset, size, ptr)`` and the like, as the C
        call with the queue first."""
        return self.i.c_api(api, self.node, list(args))

    def m_CommandQueue_enqueueReadBuffer(self, args: list) -> Any:
        return self._transfer("clEnqueueReadBuffer", args)

    def m_CommandQueue_enqueueWriteBuffer(self, args: list) -> Any:
        return self._transfer("clEnqueueWriteBuffer", args)

    def m_CommandQueue_enqueueCopyBuffer(self, args: list) -> Any:
        return self._transfer("clEnqueueCopyBuffer", args)

    def m_CommandQueue_enqueueMapBuffer(self, args: list) -> Any:
        return self._transfer("clEnqueueMapBuffer", args)

    def m_CommandQueue_enqueueFillBuffer(self, args: list) -> Any:
        # (buffer, pattern, offset, size): the C call has the pattern size in between
        a = list(args) + [self.i.UNK] * 5
        return self.i.c_api("clEnqueueFillBuffer", self.node,
                            [a[0], a[1], a[2], self.i.UNK, a[3], a[4]])

    def m_enqueueReadBuffer(self, args: list) -> Any:
        return self._transfer("clEnqueueReadBuffer", [self.i.Handle("queue")] + args)

    def m_enqueueWriteBuffer(self, args: list) -> Any:
        return self._transfer("clEnqueueWriteBuffer", [self.i.Handle("queue")] + args)

    def m_CommandQueue_finish(self, args: list) -> Any:
        return self.i.c_api("clFinish", self.node, args)

    m_finish = m_CommandQueue_finish
    m_Event_wait = m_CommandQueue_finish
    m_Event_waitForEvents = m_CommandQueue_finish
    m_WaitForEvents = m_CommandQueue_finish

    def _info(self, api: str, args: list) -> Any:
        """``getInfo<CL_...>()`` (the query named last): the verifying device's answer, a
        number or a string, as the call's value; a query it does not answer is not handled."""
        i = self.i
        code = opencl_api.query_code(args[-1].s) if isinstance(args[-1], i.Str) else None
        if code is None or code == 0x1005 or i.device_answers() is None:
            return _NOT_HANDLED  # (work-item sizes: a vector)
        out = i.temp_ref(i.UNK)
        i.info_query(api, self.node,
                     args[:-1] + [i.Num(sympy.Integer(code)), i.UNK, out, i.ZERO])
        text = i.string_at(out)
        value = i.Str(text) if text is not None else i.read(out)
        # not answered: a run-time value named after the variable it is stored in, as before
        return value if isinstance(value, (i.Str, i.Num)) else _NOT_HANDLED

    def m_Device_getInfo(self, args: list) -> Any:
        """``device.getInfo(CL_DEVICE_..., &value)``: ``clGetDeviceInfo``."""
        if len(args) == 2:
            return self._info("clGetDeviceInfo", args)
        if len(args) != 3:
            return _NOT_HANDLED
        return self.i.c_api("clGetDeviceInfo", self.node,
                            [args[0], args[1], self.i.UNK, args[2], self.i.ZERO])

    def m_Platform_get(self, args: list) -> Any:
        """``cl::Platform::get(&platforms)``: with a device that answers queries, the program
        is analysed as it runs there: one platform, that device's (said in a warning)."""
        i = self.i
        vec = self.vec_of(args[0]) if len(args) == 1 else None
        queries = i.device_answers()
        if vec is None or queries is None or not isinstance(args[0], i.Ref):
            return _NOT_HANDLED
        i.warn(f"cl::Platform::get answered by the device that verifies the program "
               f"({queries.name}): its platform", self.node)
        i.write(args[0], Vec(sympy.Integer(1), vec.elem, (i.Handle("cl::Platform"),)))
        return i.ZERO

    def m_Platform_getDevices(self, args: list) -> Any:
        """``platform.getDevices(type, &devices)`` of the platform :meth:`m_Platform_get`
        gave (an element of that vector, possibly not told apart in a symbolic loop): the
        verifying device where its type is asked for, else none."""
        i = self.i
        vec = self.vec_of(args[2]) if len(args) == 3 else None
        queries = i.device_answers()
        if vec is None or queries is None or not isinstance(args[2], i.Ref) or \
                (isinstance(args[0], i.Handle) and args[0].kind != "cl::Platform") or \
                not (isinstance(args[1], i.Num) and args[1].e.is_Integer):
            return _NOT_HANDLED
        asked, kind = int(args[1].e), queries.device_info(0x1000)  # CL_DEVICE_TYPE
        if not isinstance(kind, int):
            return _NOT_HANDLED
        # CL_DEVICE_TYPE_DEFAULT (1) is the platform's first device, which is the only one
        n = 1 if asked == 1 or asked & kind else 0
        i.warn(f"cl::Platform::getDevices answered by the device that verifies the program "
               f"({queries.name}): {n} device(s) of type {asked:#x}", self.node)
        i.write(args[2], Vec(sympy.Integer(n), vec.elem, (i.Handle("cl::Device"),) * n))
        return i.ZERO

    def m_Kernel_getWorkGroupInfo(self, args: list) -> Any:
        """``kernel.getWorkGroupInfo(device, CL_KERNEL_..., &value)``:
        ``clGetKernelWorkGroupInfo``."""
        if len(args) == 3:
            return self._info("clGetKernelWorkGroupInfo", args)
        if len(args) != 4:
            return _NOT_HANDLED
        return self.i.info_query("clGetKernelWorkGroupInfo", self.node,
                                 [args[0], args[1], args[2], self.i.UNK, args[3], self.i.ZERO])

    def m_CommandQueue_enqueueUnmapMemObject(self, args: list) -> Any:
        return self.i.ZERO

    def m_copy(self, args: list) -> Any:
        """``cl::copy([queue,] begin, end, buffer)`` writes the buffer, ``cl::copy([queue,]
        buffer, begin, end)`` reads it; both block until done."""
        i = self.i
        bufs = [k for k, a in enumerate(args) if isinstance(a, i.BufRef)]
        if len(bufs) != 1:
            raise self.error("cl::copy: cannot tell which buffer is copied")
        k = bufs[0]
        queue = i.Handle("queue")
        rest = [a for n, a in enumerate(args) if n != k and not isinstance(a, i.Handle)]
        size: Any = i.UNK
        iters = [a for a in rest if isinstance(a, Iter)]
        if len(iters) == 2 and iters[0].vec is not None and iters[0].vec.elem and \
                iters[1].pos is not None:
            size = i.Num((iters[1].pos - iters[0].pos) * iters[0].vec.elem)
        offset = i.ZERO if size is not i.UNK else i.UNK
        api = "clEnqueueWriteBuffer" if k == len(args) - 1 else "clEnqueueReadBuffer"
        i.c_api(api, self.node, [queue, args[k], i.ONE, offset, size, i.UNK])
        return i.ZERO


#: elements of one ``resize`` that are followed one by one
_MAX_RESIZED = 64


def _element(i: Any, v: Any) -> bool:
    """A value a container keeps by copy and polyfuse can follow: a handle or a number
    (strings and records have members that may change it in place)."""
    return isinstance(v, (i.Num, i.KObj, i.ProgObj, i.BufRef, i.Handle))


def _index(i: Any, v: Any, n: int) -> Optional[int]:
    """A known index into ``n`` elements, else None."""
    if isinstance(v, i.Num) and v.e.is_Integer and 0 <= int(v.e) < n:
        return int(v.e)
    return None


def _key(i: Any, v: Any) -> Any:
    """A map key polyfuse can compare: a string's text or an integer, else None."""
    if isinstance(v, i.Ref):
        v = i.read(v)
    if isinstance(v, i.Str):
        return ("s", v.s)
    if isinstance(v, i.Num) and v.e.is_Integer:
        return ("i", int(v.e))
    return None


#: a map iterator's ``->`` and ``*`` (libstdc++'s tree and hash-node iterators)
_MAP_ITER_OPS = {
    f"{cls}__{op}" for cls in ("_Rb_tree_iterator", "_Rb_tree_const_iterator", "_Node_iterator",
                               "_Node_const_iterator") for op in ("operator->", "operator*")
}


def arg0(args: list) -> Any:
    return args[0] if args else values.UNK


_VECTOR = {
    "__polyfuse_vector", "begin", "end", "cbegin", "cend", "vector__begin", "vector__end",
    "vector__cbegin", "vector__cend", "vector__size", "vector__empty", "vector__resize",
    "vector__push_back", "vector__emplace_back", "vector__clear", "vector__assign",
    "vector__insert", "vector__pop_back", "vector__data", "vector__operator[]", "vector__at",
    "vector__front", "vector__back", "vector__set", "vector__vector", "vector__element",
    "vector__element_front", "vector__element_back", "__polyfuse_vector_size",
    "__polyfuse_vector_item", "__polyfuse_vector_at",
}
