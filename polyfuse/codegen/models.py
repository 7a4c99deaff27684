"""Polyhedral models of the fused kernels, each distinct kernel modelled once.

The fused kernel's model (the :class:`~polyfuse.core.program.Kernel` record the runtime, perf
counts, verification and the post-fusion optimizations use) is extracted from the printed kernel by
the same front-end as the user's kernels (:func:`polyfuse.frontend.opencl.parse_kernels`): what the
device compiles is what is modelled.  Models identical layers would repeat are shared:

* a fused kernel's text is keyed by its canonical form (:func:`canonical`: its name and the
  comment lines codegen writes, naming launch ids and source lines, blanked), so the 12 identical
  layers of a transformer are parsed and modelled once each; a kernel whose text repeats another
  one gets the first one's model renamed and moved to its own lines (:func:`_moved`), which is
  what parsing it would give (the oracle test checks this on the bundled programs);
* isl answers about one shared model (``memo``) are asked once.

Building the model from the fragments' own models and their re-indexing maps instead of
re-parsing is not exact: the extractor models the printed control flow (guards as C ``if``,
merged bodies after code motion, private copies, forwarded loads), so a composed model could
differ in statement split, order and exactness from what the device compiles and the checks rely
on.  Re-parsing once per distinct kernel keeps it exact at the cost of one parse per layer kind.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Optional, TypeVar

from polyfuse.core.program import Access, Kernel, KernelContext, SourceLoc, Statement
from polyfuse.frontend import opencl

#: a comment line codegen writes (``/* fragment 2: launch #17 ... */``): names launch ids and
#: source lines, which differ between identical layers but not in what the parser sees
_COMMENT_LINE = re.compile(r"^([ \t]*)/\*.*\*/[ \t]*$", re.M)
_AT_LINE = re.compile(r"\bat line (\d+)")
_PLACEHOLDER = "pf__kernel__"


def canonical(text: str, name: str) -> Optional[str]:
    """``text`` (one printed fused kernel named ``name``) with its name and codegen's comment
    lines blanked: two kernels with the same canonical text parse to the same model up to the
    name and the lines; None when the name occurs more than once (no sharing then)."""
    if len(re.findall(rf"\b{re.escape(name)}\b", text)) != 1:
        return None
    head = f"__kernel void {name}("
    if head not in text:
        return None
    return _COMMENT_LINE.sub(r"\1/**/", text).replace(head, f"__kernel void {_PLACEHOLDER}(")


def _moved(kernel: Kernel, name: str, delta: int, lines: tuple[int, int], filename: str
           ) -> Kernel:
    """``kernel`` (parsed at ``lines`` of ``filename``) renamed, with the places inside those
    lines moved ``delta`` lines down: the model its repeat at another place of the file has.
    Places outside (helper functions the kernel calls, in the file's head) stay.  The places
    the front-end writes into notes and reasons ("loop at line 12") move alike."""
    first, last = lines

    def mv(loc: Optional[SourceLoc]) -> Optional[SourceLoc]:
        if loc is None or loc.file != filename or not first <= loc.line <= last:
            return loc
        return SourceLoc(loc.file, loc.line + delta, loc.column)

    def note(text: str) -> str:
        def shift(m: re.Match) -> str:
            n = int(m.group(1))
            return f"at line {n + delta if first <= n <= last else n}"
        return _AT_LINE.sub(shift, text)

    k = opencl.renamed(kernel, name, filename) if name != kernel.name else kernel
    statements = tuple(
        _copied(s, loc=mv(s.loc), accesses=tuple(
            _copied(a, loc=mv(a.loc), reason=a.reason and note(a.reason)) for a in s.accesses))
        for s in k.statements)
    return replace(k, statements=statements,
                   barriers=tuple(replace(b, loc=mv(b.loc)) for b in k.barriers),
                   arrays=tuple(replace(a, loc=mv(a.loc)) for a in k.arrays),
                   notes=tuple(note(n) for n in k.notes), loc=mv(k.loc))


_Record = TypeVar("_Record", Statement, Access)


def _copied(record: _Record, **fields: Any) -> _Record:
    """``dataclasses.replace(record, **fields)`` without running the constructor again, for
    the records :func:`_moved` copies by the hundred thousand (every statement and access of
    each repeated layer kernel); statements and accesses have no checks to re-run."""
    new = object.__new__(type(record))
    new.__dict__.update(record.__dict__)
    new.__dict__.update(fields)
    return new


@dataclass
class KernelModels:
    """The models of one :func:`~polyfuse.codegen.fuse.generate_fused` run, shared by canonical
    text, and a memo of isl answers about them (keys hold the shared records' ids, which stay alive
    as long as this object)."""

    _texts: dict[tuple[str, KernelContext], Kernel] = field(default_factory=dict)
    _answers: dict[Hashable, Any] = field(default_factory=dict)
    #: every model handed out, kept alive so that ids in ``_answers`` keys are never reused
    _alive: list[Kernel] = field(default_factory=list)

    def answer(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """``compute()``, once per ``key`` (a question about shared models)."""
        if key not in self._answers:
            self._answers[key] = compute()
        return self._answers[key]

    def model(self, head: str, text: str, name: str, filename: str,
              context: KernelContext) -> Kernel:
        """The model of kernel ``name`` printed as ``text`` after ``head`` (helper functions),
        extracted with ``context``; kernels with the same canonical text share one record,
        named after the first of them (callers match statements to their own tree by shape).
        Errors are :class:`~polyfuse.core.program.PolyfuseError` as from ``parse_kernels``."""
        key_text = canonical(text, name)
        key = (head + key_text, context) if key_text is not None else None
        if key is not None and key in self._texts:
            return self._texts[key]
        k = opencl.parse_kernels(head + text, filename, context=context)[name]
        self._alive.append(k)
        if key is not None:
            self._texts[key] = k
        return k

    def program(self, head: str, texts: Sequence[tuple[str, str]], tail: str, filename: str,
                options: Sequence[str]) -> dict[str, Kernel]:
        """The models of a whole fused source ``head`` + the kernels ``texts`` ((name, text),
        in order) + ``tail``, as ``parse_kernels`` of that source gives them (same order,
        names, places and helper table), each distinct kernel text parsed once."""
        line = head.count("\n") + 1
        firsts: dict[str, tuple[str, int, int]] = {}  # canonical text -> (name, first, last)
        parts = [head]
        placed: list[tuple[str, Optional[str], int]] = []
        for name, text in texts:
            n = text.count("\n")
            key = canonical(text, name)
            if key is None or key not in firsts:
                if key is not None:
                    firsts[key] = (name, line, line + n - 1)
                parts.append(f'# {line} "{filename}"\n{text}')
                placed.append((name, None, line))
            else:
                placed.append((name, key, line))
            line += n
        if tail:
            parts.append(f'# {line} "{filename}"\n{tail}')
        parsed = opencl.parse_kernels("".join(parts), filename, options=options)
        out: dict[str, Kernel] = {}
        for name, key, at in placed:
            if key is None:
                out[name] = parsed[name]
            else:
                first, lo, hi = firsts[key]
                out[name] = _moved(parsed[first], name, at - lo, (lo, hi), filename)
        for name, k in parsed.items():
            out.setdefault(name, k)
        return _with_helpers(out, parsed, [n for n, _ in texts])


def _with_helpers(kernels: dict[str, Kernel], parsed: Mapping[str, Kernel],
                  order: Sequence[str]) -> dict[str, Kernel]:
    """Every record with the file's whole function table (helpers, then every kernel in source
    order), as one parse of the whole file gives it."""
    if not parsed:
        return kernels
    some = next(iter(parsed.values()))
    table = {n: f for n, f in some.helpers.items() if n not in parsed}
    for n in list(order) + [n for n in parsed if n not in order]:
        table[n] = kernels[n].ast
    return {n: replace(k, helpers=table) for n, k in kernels.items()}
