"""Host parameters: values read at run time, named after the variable they are stored in.

``atoi(argv[1])`` stored into ``n`` becomes the symbol ``n`` (``n_1`` for a second one);
``--param n=1024`` fixes it.  The names the host reads are kept for ``check_params``."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, Union

import sympy

from polyfuse.core.program import PolyfuseError
from polyfuse.frontend.host.context import Context
from polyfuse.frontend.host.values import (
    UNK,
    Cond,
    CType,
    Num,
    Runtime,
    Source,
    Unknown,
    float_to_int,
    var_name,
)


class Params:
    """The host parameters of one interpretation, and the ``--param`` values given."""

    def __init__(self, ctx: Context, values: Mapping[str, Union[int, float]]) -> None:
        self.ctx = ctx
        self.values = values
        self.symbols: dict[str, sympy.Symbol] = {}  # name -> symbol, in creation order
        self.names_used: set[str] = set()
        self.name_suffix: dict[str, int] = {}  # parameter base name -> next suffix to try
        self.applied: set[str] = set()  # --param names the host read
        self.float_names: set[str] = set()  # floating values read at run time, by name
        self.int_params: set[str] = set()  # parameters stored in integer variables
        self.data_names: set[str] = set()  # values computed from data, by name (--param binds)
        self.origins: dict[str, Source] = {}  # parameter -> the data read that gave it

    def taken(self, name: str) -> bool:
        """Whether ``name`` is a parameter's or a reserved name."""
        return name in self.names_used

    def reserve(self, name: str) -> None:
        """Keep ``name`` (a host loop's iterator) from ever naming a parameter."""
        self.names_used.add(name)

    def known(self) -> set[str]:
        """The names ``--param`` may bind besides the program's parameters."""
        return self.int_params | self.applied | self.float_names | \
            self.data_names

    def coerce(self, value: Any, ctype: CType, name: str, path: tuple = ()) -> Any:
        """Adapt a value stored into a variable of ``ctype``; run-time values become params."""
        if isinstance(value, Runtime):
            pname = re.sub(r"\W", "_", var_name(name, path))
            src = dataclasses.replace(value.src, name=pname) if value.src else None
            if ctype.kind == "float" and (not self.ctx.varies() or src is not None):
                self.float_names.add(pname)
                if pname in self.values:
                    self.applied.add(pname)
                    return Num(sympy.Float(float(self.values[pname])), True)
            if self.ctx.varies() and src is not None and ctype.kind == "int":
                self.data_names.add(pname)
                if pname in self.values:  # fixed by the user for every iteration
                    return self.new(pname)
            if self.ctx.varies() or ctype.kind == "float":
                return Unknown(ctype.kind == "float", src)
            value = self.new(var_name(name, path))
            if ctype.kind == "int" and isinstance(value.e, sympy.Symbol):
                self.int_params.add(str(value.e))
                if src is not None:
                    self.origins[str(value.e)] = dataclasses.replace(src, name=str(value.e))
            return value
        if isinstance(value, Cond):
            return UNK
        if isinstance(value, Num):
            if ctype.kind == "float":
                return Num(value.e, True)
            if ctype.kind == "int" and value.flt:
                return float_to_int(value.e)
        if isinstance(value, Unknown) and ctype.kind == "float":
            return Unknown(True, value.src)
        return value

    def derive(self, param: Any, exprs: list) -> None:
        """``param`` (a value that differs between the paths of a condition) comes from the
        data read that gave the parameters of ``exprs``, if one did."""
        deps = [self.origins[str(s)] for e in exprs for s in getattr(e, "free_symbols", ())
                if str(s) in self.origins]
        if deps and isinstance(param, sympy.Symbol):
            self.origins[str(param)] = Source(f"computed from '{deps[0].name}' ({deps[0].what})",
                                              deps[0].loc, str(param))

    def hint(self, expr: Any) -> str:
        """Which host parameters ``expr`` depends on, where each is read, and the ``--param``
        that fixes it: what a refusal of a symbolic value tells the user."""
        names = sorted(str(s) for s in getattr(expr, "free_symbols", ()) if str(s) in self.symbols)
        if not names:
            return ""
        said = ", ".join(self.origins[n].describe() if n in self.origins else
                         f"'{n}', read at run time" for n in names)
        fix = " ".join(f"--param {n}=VALUE" for n in names)
        return f"; it depends on {said}: pass {fix} to analyse the program with that value"

    def new(self, name: str) -> Num:
        """A new parameter named after ``name`` (its ``--param`` value when given)."""
        name = re.sub(r"\W", "_", name) or "p"
        if name in self.values:
            self.applied.add(name)
            value = self.values[name]
            if isinstance(value, float) and not value.is_integer():
                raise PolyfuseError(f"--param {name}={value}: '{name}' is an integer in the "
                                    "host program", self.ctx.filename)
            return Num(sympy.Integer(int(value)))
        k = self.name_suffix.get(name, 0)  # the suffixes below k are taken: O(1) per name
        unique = f"{name}_{k}" if k else name
        while unique in self.names_used:
            k += 1
            unique = f"{name}_{k}"
        self.name_suffix[name] = k + 1
        self.names_used.add(unique)
        sym = sympy.Symbol(unique)
        self.symbols[unique] = sym
        return Num(sym)
