"""Symbolic counts (launch counts, feature counts) as a reader writes them.

A count over symbolic sizes is a sympy expression, often a ``Piecewise``; its ``str`` is exact
but hard to read (``Piecewise((2*iters + 4, (iters >= 1) & (n >= 1)), (4, True))``).  Reports
and tables print :func:`readable` instead (``2·iters + 4 for iters ≥ 1 and n ≥ 1, otherwise
4``); JSON keeps the exact ``str`` beside it, which :func:`parse_count` reads back.
"""

from __future__ import annotations

import re
from tokenize import TokenError
from typing import Any, Union

import sympy
from sympy.printing.str import StrPrinter

#: names in a count's ``str`` that are sympy's own, not sizes of the program
_SYMPY_NAMES = frozenset({"Piecewise", "floor", "ceiling", "Max", "Min", "Mod", "Abs", "Eq",
                          "Ne", "And", "Or", "Not", "True", "False", "oo", "nan", "zoo",
                          "Rational", "Integer"})
_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
_RELATIONS = {">=": "≥", "<=": "≤", ">": ">", "<": "<", "==": "=", "!=": "≠"}


def parse_count(value: Union[int, str, sympy.Expr]) -> sympy.Expr:
    """A count as sympy: an ``int``, a sympy expression, or the exact ``str`` of one (every
    other name is a size, so a size called ``N`` or ``S`` stays a symbol)."""
    if isinstance(value, sympy.Basic):
        return value
    if isinstance(value, int):
        return sympy.Integer(value)
    names = set(re.findall(r"[A-Za-z_]\w*", value)) - _SYMPY_NAMES
    return sympy.parse_expr(value, local_dict={n: sympy.Symbol(n, integer=True) for n in names})


class _Printer(StrPrinter):
    """sympy's ``str`` with ``·`` for products, superscript powers, ``≥``/``≤``, ``and``/``or``,
    floor and ceiling brackets, and a ``Piecewise`` read as cases."""

    def _print_Mul(self, expr: sympy.Mul) -> str:
        return super()._print_Mul(expr).replace("*", "·")

    def _print_Pow(self, expr: sympy.Pow, rational: bool = False) -> str:
        base, exp = expr.as_base_exp()
        if exp.is_Integer and 2 <= int(exp) <= 9:
            b = self._print(base)
            if not (base.is_Symbol or base.is_Integer and int(base) >= 0):
                b = f"({b})"
            return b + str(int(exp)).translate(_SUPERSCRIPT)
        return super()._print_Pow(expr, rational).replace("**", "^")

    def _print_Relational(self, expr: Any) -> str:
        op = _RELATIONS.get(expr.rel_op, expr.rel_op)
        return f"{self._print(expr.lhs)} {op} {self._print(expr.rhs)}"

    def _print_And(self, expr: Any) -> str:
        return " and ".join(self._cond(a) for a in expr.args)

    def _print_Or(self, expr: Any) -> str:
        return " or ".join(self._cond(a) for a in expr.args)

    def _cond(self, arg: Any) -> str:
        text = self._print(arg)
        return f"({text})" if isinstance(arg, (sympy.And, sympy.Or)) else text

    def _print_floor(self, expr: Any) -> str:
        return f"⌊{self._print(expr.args[0])}⌋"

    def _print_ceiling(self, expr: Any) -> str:
        return f"⌈{self._print(expr.args[0])}⌉"

    def _print_Piecewise(self, expr: sympy.Piecewise) -> str:
        cases, otherwise = [], None
        for value, cond in expr.args:
            if cond is sympy.true:
                otherwise = self._print(value)
                break
            cases.append(f"{self._print(value)} for {self._print(cond)}")
        if otherwise is None:
            return "; ".join(cases) + "; undefined otherwise" if cases else "undefined"
        return "; ".join(cases) + f", otherwise {otherwise}" if cases else otherwise


def readable(value: Union[int, str, sympy.Expr]) -> str:
    """A count in compact mathematical form: ``2·iters + 4 for iters ≥ 1, otherwise 4``
    (an ``int`` or a constant stays as it is written)."""
    if isinstance(value, int):
        return str(value)
    try:
        expr = parse_count(value)
    except (SyntaxError, TokenError, TypeError, ValueError, sympy.SympifyError):
        return str(value)  # not a count sympy reads: shown as given
    return _Printer().doprint(expr)


__all__ = ["parse_count", "readable"]
