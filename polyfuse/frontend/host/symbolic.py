"""Symbolic helpers of the host front-end: free symbols of values and operations, and host
relations as isl constraints (context facts, guard loops)."""

from __future__ import annotations

from typing import Any, Optional

import sympy

from polyfuse.core.program import Launch, Operation, host_expr_to_isl


def free_syms(*exprs: Any) -> set:
    out: set = set()
    for e in exprs:
        if e is not None and hasattr(e, "free_symbols"):
            out |= set(e.free_symbols)
    return out


def op_syms(op: Operation) -> set[str]:
    exprs: list = []
    for lp in op.loops:
        exprs += [lp.lower, lp.upper]
    if isinstance(op, Launch):
        exprs += list(op.global_size) + list(op.local_size or ()) + list(op.global_offset or ())
        for a in op.args:
            exprs += [a.value, a.local_bytes]
    else:
        for r in op.reads + op.writes:
            exprs += [r.offset, r.size]
    iters = {lp.iterator for lp in op.loops}
    return {str(s) for s in free_syms(*exprs)} - iters


def exact_rational(e: Any) -> Any:
    """A float host value with its float constants as rationals (``n * 0.03125`` → ``n/32``)."""
    return sympy.nsimplify(e, rational=True) if e.atoms(sympy.Float) else e


def no_ceiling(e: Any) -> Any:
    """``ceiling(x)`` as ``-floor(-x)``: isl reads floors."""
    return e.replace(lambda x: isinstance(x, sympy.ceiling), lambda x: -sympy.floor(-x.args[0]))


def subs_value(e: Any, sym: sympy.Symbol, value: Any) -> Any:
    return e.subs(sym, value) if e is not None and hasattr(e, "subs") else e


def affine_bounds(rel: Any) -> Optional[list]:
    """``rel`` as integer affine expressions that are all ``>= 0`` exactly when it holds; None
    when it is no such conjunction."""
    if isinstance(rel, sympy.And):
        out: list = []
        for a in rel.args:
            part = affine_bounds(a)
            if part is None:
                return None
            out += part
        return out
    diffs = {sympy.StrictLessThan: lambda a, b: [b - a - 1], sympy.LessThan: lambda a, b: [b - a],
             sympy.StrictGreaterThan: lambda a, b: [a - b - 1],
             sympy.GreaterThan: lambda a, b: [a - b],
             sympy.Equality: lambda a, b: [a - b, b - a]}
    make = diffs.get(type(rel))
    if make is None:
        return None
    out = [sympy.expand(_mod_free(d)) for d in make(rel.lhs, rel.rhs)]
    try:
        for d in out:
            host_expr_to_isl(d)
    except (ValueError, TypeError):
        return None
    return out


def fact_to_isl(rel: Any) -> Optional[str]:
    """isl constraint text of a sympy relation over parameters, or None if it has none."""
    try:
        if isinstance(rel, sympy.And):
            parts = [fact_to_isl(a) for a in rel.args]
            return " and ".join(f"({p})" for p in parts if p) or None
        if isinstance(rel, sympy.Or):
            parts = [fact_to_isl(a) for a in rel.args]
            if any(p is None for p in parts):
                return None
            return " or ".join(f"({p})" for p in parts)
        if isinstance(rel, sympy.Not):
            inner = rel.args[0]
            if isinstance(inner, sympy.Eq):
                rel = sympy.Ne(*inner.args)
            else:
                return None
        ops = {sympy.StrictLessThan: "<", sympy.LessThan: "<=", sympy.StrictGreaterThan: ">",
               sympy.GreaterThan: ">=", sympy.Equality: "="}
        if isinstance(rel, sympy.Unequality):
            d = _mod_free(rel.lhs - rel.rhs)
            t = host_expr_to_isl(d)
            return f"({t}) < 0 or ({t}) > 0"
        op = ops.get(type(rel))
        if op is None:
            return None
        return f"{host_expr_to_isl(_mod_free(rel.lhs - rel.rhs))} {op} 0"
    except (ValueError, TypeError, AttributeError):
        return None


def _mod_free(e: Any) -> Any:
    """Rewrite ``Mod(a, c)`` as ``a - c*floor(a/c)`` (isl reads floor)."""
    return e.replace(lambda x: isinstance(x, sympy.Mod) and x.args[1].is_Integer,
                     lambda x: x.args[0] - x.args[1] * sympy.floor(x.args[0] / x.args[1]))

