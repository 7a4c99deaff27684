"""The host's memory along one path: variables, what they hold, and the OpenCL objects made.

A variable is a slot (:class:`Slot`: name, C type, value); a pointer is a
:class:`~.values.Ref` to a slot and a path inside it.  :class:`State` is everything one path
through the host program changes (slots, buffers, kernel objects, the operations recorded,
the facts learnt, the text written into char buffers); it is cloned to explore both sides of a
condition.  :class:`Memory` owns the current state, the call frames and their scopes."""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from typing import Any, Optional

from pycparser import c_ast

from polyfuse.core.program import Buffer, Operation
from polyfuse.frontend.host.context import Context
from polyfuse.frontend.host.params import Params
from polyfuse.frontend.host.signals import NeedUnroll
from polyfuse.frontend.host.symbolic import free_syms
from polyfuse.frontend.host.values import (
    RUNTIME,
    TRACKED,
    UNK,
    UNK_TYPE,
    Arr,
    Box,
    CType,
    Handle,
    Num,
    Poison,
    Rec,
    Ref,
    Runtime,
    Str,
    SymIndex,
    Unknown,
    Value,
    join_unknown,
    src_of,
)

_WRITES = itertools.count(1)


@dataclass(frozen=True)
class Slot:
    name: str
    ctype: CType
    value: Any


class Slots(dict):
    """Slot id -> :class:`Slot`, with a log of the writes (``(number, slot id, earlier
    log)``, shared by the clones), so that what a path wrote since an earlier state is read
    from the log (:func:`written_slots`) instead of by comparing every variable: a host holds
    thousands of them, and a loop nest run one iteration at a time asks after each of its
    inner loops and branches."""

    log: Optional[tuple] = None

    def __setitem__(self, k: int, v: Slot) -> None:
        dict.__setitem__(self, k, v)
        self.log = (next(_WRITES), k, self.log)

    def copy(self) -> Slots:
        out = Slots(self)
        out.log = self.log
        return out


@dataclass(frozen=True)
class KState:
    """A ``cl_kernel`` object: the variable it was created in, its kernel and its bindings."""

    var: str
    kernel: str
    bindings: tuple = ()  # ((index, ArgBinding | Poison), ...)

    def bound(self) -> dict[int, Any]:
        return dict(self.bindings)

    def bind(self, index: int, b: Any) -> KState:
        d = self.bound()
        d[index] = b
        return dataclasses.replace(self, bindings=tuple(sorted(d.items())))


class State:
    """Everything a path through the host program changes; cloned to explore both branches."""

    def __init__(self) -> None:
        self.slots = Slots()
        self.buffers: dict[str, Buffer] = {}
        self.kobjs: dict[int, KState] = {}
        self.ops: list[Operation] = []
        self.facts: list[Any] = []
        self.uncertain_break: Optional[c_ast.Node] = None
        self.texts: dict[int, str] = {}  # char buffer slot -> the text written into it
        self.text_why: dict[int, str] = {}  # char buffer slot -> why its text is not known
        self.file_pos: dict[str, int] = {}  # data file handle -> where fscanf reads next

    def clone(self) -> State:
        s = State()
        s.slots = self.slots.copy()
        s.buffers = dict(self.buffers)
        s.kobjs = dict(self.kobjs)
        s.ops = list(self.ops)
        s.facts = list(self.facts)
        s.uncertain_break = self.uncertain_break
        s.texts = dict(self.texts)
        s.text_why = dict(self.text_why)
        s.file_pos = dict(self.file_pos)
        return s


def written_slots(old: State, new: State) -> list[int]:
    """The slots (ids, ascending) that ``new`` made or wrote since ``old``, a state it
    descends from (a clone taken on its way, not written since): O(writes since)."""
    top = old.slots.log[0] if old.slots.log else 0
    out = set()
    log = new.slots.log
    while log is not None and log[0] > top:
        out.add(log[1])
        log = log[2]
    return sorted(out)


def changed_slots(old: State, new: State) -> list[int]:
    """The slots of ``old`` whose value ``new``, a state that descends from it, changed."""
    olds, news = old.slots, new.slots
    return [k for k in written_slots(old, new)
            if k in olds and olds[k] is not news[k] and olds[k].value != news[k].value]


@dataclass
class Frame:
    name: str
    scopes: list = field(default_factory=list)
    cond_returns: list = field(default_factory=list)
    func: int = 0  # id of the FuncDef running (C++ overloads share a name)
    cond_states: list = field(default_factory=list)  # the state each of cond_returns left


#: the most elements of a host array whose entries a loop fills that polyfuse keeps known by
#: running the loop (a table of sizes); larger arrays are data
_TABLE = 1024


class Memory:
    """Host memory: the current path's :class:`State`, call frames, and char buffers' text."""

    def __init__(self, ctx: Context, params: Params) -> None:
        self.ctx = ctx
        self.params = params
        self.state = State()
        self.frames: list[Frame] = []
        self.globals: dict[str, int] = {}
        self.next_slot = 0
        self.file_texts: dict[int, str] = {}  # heap slot -> path of the file read into it

    @property
    def texts(self) -> dict[int, str]:
        """The text written into char buffers (``sprintf``, ``strcpy``...) on this path: a
        buffer written differently on two paths of an open condition holds no known text."""
        return self.state.texts

    def set_text(self, slot: int, text: Optional[str], why: str = "") -> None:
        """The text a char buffer now holds, or (None) why it is not known."""
        if text is None:
            self.state.texts.pop(slot, None)
            self.state.text_why[slot] = why
        else:
            self.state.texts[slot] = text
            self.state.text_why.pop(slot, None)

    def new_slot(self, name: str, ctype: CType, value: Value) -> int:
        """A new variable (not in any scope) holding ``value``; its slot id."""
        sid = self.next_slot
        self.next_slot += 1
        value = self.params.coerce(value, ctype, name)
        self.state.slots[sid] = Slot(name, ctype, self._own(value, (sid,)))
        return sid

    def new_box(self, value: Value, owner: tuple) -> Box:
        """A container element of class type, held by the container at ``owner``."""
        sid = self.next_slot
        self.next_slot += 1
        self.state.slots[sid] = Slot("element", CType("struct", 0), value)
        return Box(sid, owner)

    def _own(self, v: Any, at: tuple) -> Any:
        """``v`` stored at (slot, path) ``at``: the boxes of a container copied there are
        copied (a container's elements are values, not shared with the one copied)."""
        if isinstance(v, Rec):
            fields = tuple((k, self._own(e, at + (k,))) for k, e in v.fields)
            return v if all(a is b for (_, a), (_, b) in zip(fields, v.fields)) else Rec(fields)
        items = getattr(v, "items", None)
        if not isinstance(items, tuple) or not dataclasses.is_dataclass(v):
            return v
        owner = (at[0], at[1:])
        new = tuple(self._own_item(e, owner) for e in items)
        return v if all(a is b for a, b in zip(new, items)) else \
            dataclasses.replace(v, items=new)

    def _own_item(self, e: Any, owner: tuple) -> Any:
        if isinstance(e, tuple) and len(e) == 2:  # a map's (key, value)
            v = self._own_item(e[1], owner)
            return e if v is e[1] else (e[0], v)
        if isinstance(e, Box) and e.owner != owner:
            slot = self.state.slots.get(e.slot)
            box = self.new_box(UNK, owner)
            value = self._own(slot.value, (box.slot,)) if slot is not None else UNK
            self.state.slots[box.slot] = Slot("element", CType("struct", 0), value)
            return box
        return e

    def declare(self, name: str, ctype: CType, value: Value) -> int:
        """A new variable ``name`` in the innermost scope; its slot id."""
        sid = self.new_slot(name, ctype, value)
        self.frames[-1].scopes[-1][name] = sid
        return sid

    def lookup(self, name: str) -> Optional[int]:
        """The slot of the variable ``name`` seen from the current scope, else None."""
        for scope in reversed(self.frames[-1].scopes):
            if name in scope:
                return scope[name]
        return self.globals.get(name)

    def read(self, ref: Ref) -> Value:
        """The value ``ref`` points to (unknown where memory is not tracked)."""
        slot = self.state.slots.get(ref.slot)
        if slot is None:
            return UNK
        v = slot.value
        for p in ref.path:
            if isinstance(v, Arr) and isinstance(p, int):
                v = v.get(p)
            elif isinstance(v, Rec) and isinstance(p, str):
                v = v.get(p)
            elif isinstance(p, int) and p == 0 and not isinstance(v, (Arr, Rec)):
                continue
            else:
                return UNK
        return v

    def write(self, ref: Ref, value: Value) -> None:
        """Store ``value`` where ``ref`` points, converted to the C type stored there."""
        slot = self.state.slots.get(ref.slot)
        if slot is None:
            return
        ctype = slot.ctype
        for p in ref.path:
            ctype = (ctype.elem if isinstance(p, int) else ctype.field(p)) or UNK_TYPE
        value = self._own(self.params.coerce(value, ctype, slot.name, ref.path),
                          (ref.slot,) + ref.path)
        new = self._update(slot.value, ref.path, value)
        self.state.slots[ref.slot] = dataclasses.replace(slot, value=new)
        if ref.path and ref.slot in self.state.texts:  # name[0] = 'x' changes its text
            self.set_text(ref.slot, None, "its characters are written one by one")

    def _update(self, cur: Any, path: tuple, value: Any) -> Any:
        if not path:
            return value
        p, rest = path[0], path[1:]
        if isinstance(cur, Arr) and isinstance(p, int):
            return cur.set(p, self._update(cur.get(p), rest, value))
        if isinstance(cur, Rec) and isinstance(p, str):
            return cur.set(p, self._update(cur.get(p), rest, value))
        if isinstance(p, int) and p == 0 and not isinstance(cur, (Arr, Rec)):
            return self._update(cur, rest, value)
        if isinstance(p, str):
            return Rec(((p, self._update(UNK, rest, value)),))
        return Arr(None, ((p, self._update(UNK, rest, value)),), UNK)

    def index(self, base: Ref, idx: Any) -> Any:
        """The element ``base[idx]`` of an array (or of the array a pointer points into)."""
        target = self.read(base)
        if isinstance(idx, Num) and idx.e.is_Integer:
            i = int(idx.e)
            if isinstance(target, Arr):
                return Ref(base.slot, base.path + (i,))
            if base.path and isinstance(base.path[-1], int):
                return Ref(base.slot, base.path[:-1] + (base.path[-1] + i,))
            if i == 0:
                return base
            return None
        loop = isinstance(idx, Num) and bool(free_syms(idx.e) & self.ctx.loop_syms)
        if isinstance(target, Arr):
            return SymIndex(base.slot, base.path, loop)
        if base.path and isinstance(base.path[-1], int):
            return SymIndex(base.slot, base.path[:-1], loop)
        return None

    def deref(self, ref: Ref) -> Value:
        """``*ref`` as an rvalue: an array decays to the pointer to it."""
        v = self.read(ref)
        slot = self.state.slots.get(ref.slot)
        if slot is not None:
            t = slot.ctype
            for p in ref.path:
                t = (t.elem if isinstance(p, int) else t.field(p)) or UNK_TYPE
            if t.kind == "array":
                return ref
        return v

    def store(self, ref: Ref, value: Value, node: c_ast.Node) -> None:
        """An assignment through ``ref``; at an unknown index the whole array is affected."""
        if isinstance(ref, SymIndex):
            if isinstance(value, TRACKED) or isinstance(value, (Rec, Arr)):
                if ref.loop:
                    raise NeedUnroll("a handle is stored at an index that depends on a host "
                                     "loop iterator")
                value = Poison("stored at an unknown index")
            else:
                src = src_of(value)
                table = self.read(Ref(ref.slot, ref.path))
                # a table (sizes per level), not bulk host data: running the loop knows it
                if ref.loop and isinstance(table, Arr) and self._table(ref, table) and \
                        (not isinstance(value, (Unknown, Runtime)) or
                         (src is not None and src.loop_index)):
                    self.ctx.forgotten += 1
                value = Unknown(False, src_of(value))
            whole = Ref(ref.slot, ref.path)
            arr = self.read(whole)
            if isinstance(arr, Arr):
                new = Arr(arr.length, tuple((i, join_unknown(v, value)) for i, v in arr.elems),
                          join_unknown(arr.default, value))
                self.write(whole, new)
            return
        self.write(ref, value)

    def _table(self, ref: SymIndex, arr: Arr) -> bool:
        """Whether ``arr`` is a table of at most :data:`_TABLE` elements: its length says so,
        or it is heap memory (``malloc``) of at most that many bytes."""
        if arr.length is not None:
            return arr.length <= _TABLE
        slot = self.state.slots.get(ref.slot)
        return not ref.path and slot is not None and slot.ctype.kind == "array" and \
            slot.ctype.length is None and 0 < slot.ctype.size <= _TABLE

    def text(self, v: Value) -> Optional[str]:
        """The C string a value holds: a literal, or a buffer polyfuse wrote text into."""
        if isinstance(v, Str):
            return v.s
        if isinstance(v, Ref) and v.path in ((), (0,)):
            return self.texts.get(v.slot)
        return None

    def string(self, v: Value) -> Optional[str]:
        """The text a ``std::string``, a string literal or a written char buffer holds."""
        if isinstance(v, Ref) and v.slot not in self.texts:
            v = self.read(v)
        return self.text(v)

    def overwrite_with_data(self, ref: Ref, src: Any) -> None:
        """Bytes read from a file into a variable, a struct or an array (``fread`` of a
        header): every number in it becomes a run-time value from ``src`` (named after its
        field, so ``--param`` binds it), anything else cannot be followed."""
        def leaves(v: Any, path: tuple) -> None:
            if isinstance(v, Rec):
                for k, x in v.fields:
                    leaves(x, path + (k,))
            elif isinstance(v, Arr):
                self.write(Ref(ref.slot, path), Arr(v.length, (), Unknown(False, src)))
            elif isinstance(v, (Unknown, Num, Runtime)):
                self.write(Ref(ref.slot, path), Runtime(src))
            elif not isinstance(v, Str):
                self.write(Ref(ref.slot, path), Poison(f"overwritten by {src.describe()}"))

        leaves(self.read(ref), ref.path)

    def forget_through(self, args: list[Value], value: Value = RUNTIME) -> None:
        """Values an info query stores through its pointers are known only at run time
        (``value``: a :class:`Runtime` that may say where it comes from)."""
        for a in args:
            if isinstance(a, Ref):
                cur = self.read(a)
                if isinstance(cur, (Unknown, Num, Runtime)):
                    self.write(a, value)
                elif not isinstance(cur, (Arr, Rec)):
                    self.write(a, Handle("queried"))
