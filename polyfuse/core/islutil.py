"""Small guards around isl that every stage shares."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Optional, TypeVar

import islpy as isl
import sympy

from polyfuse.core.program import PolyfuseError

T = TypeVar("T")

#: isl's operation quota for one bounded computation.  Ordinary polyfuse relations need a few
#: thousand operations; the quota only stops the rare problem whose size explodes (large
#: constants in floor/mod subscripts), which would otherwise run for hours.
MAX_OPERATIONS = 200_000

_QUOTA_TEXT = "maximal number of operations exceeded"


class IslQuotaExceeded(Exception):
    """An isl computation hit its operation quota; the caller falls back to a safe answer."""


def coalesce(obj: T) -> T:
    """``obj.coalesce()``, or ``obj`` unchanged when isl's coalescing fails.

    Coalescing only merges disjuncts of the same set; the result is equal either way.  isl
    (islpy 2026.2) can raise "total dimensionality changed unexpectedly" on some maps built in
    memory (the same map printed and parsed again coalesces fine), so a failure must not abort
    the analysis: the uncoalesced object is kept.  Under a quota (:func:`bounded`) an exceeded
    quota is re-raised, since the uncoalesced object would be as costly downstream.
    """
    try:
        return obj.coalesce()  # type: ignore[attr-defined]
    except isl.Error as err:
        if over_quota(err):
            raise IslQuotaExceeded(str(err)) from err
        return obj


def over_quota(err: isl.Error) -> bool:
    """Whether ``err`` came from an exhausted operation quota.

    isl reports the quota in the message, except where the failing call masks it (the parser
    says "syntax error"), so a tiny probe decides: under an exhausted quota it fails too.
    """
    if _QUOTA_TEXT in str(err):
        return True
    if not isl.DEFAULT_CONTEXT.get_max_operations():
        return False
    try:
        isl.Set("{ [i] : 0 <= i <= 1 }").is_empty()
    except isl.Error:
        return True
    return False


@contextmanager
def bounded(max_operations: Optional[int] = None) -> Iterator[None]:
    """Run the body under isl's operation quota; raise :class:`IslQuotaExceeded` when hit.

    Nested uses keep the outermost quota (its count is not reset), so a bounded helper called
    from a bounded caller cannot extend the caller's budget.
    """
    ctx = isl.DEFAULT_CONTEXT
    outer = ctx.get_max_operations()
    if not outer:
        ctx.set_max_operations(max_operations or MAX_OPERATIONS)
        ctx.reset_operations()
    try:
        yield
    except isl.Error as err:
        if over_quota(err):
            raise IslQuotaExceeded(str(err)) from err
        raise
    finally:
        if not outer:
            ctx.set_max_operations(0)
            ctx.reset_operations()


# isl -> sympy: counts and trip counts shown as formulas


def int_symbol(name: str) -> sympy.Symbol:
    """The sympy symbol of an integer isl parameter."""
    return sympy.Symbol(name, integer=True)


def val_to_sympy(v: isl.Val) -> sympy.Rational:
    """An isl value as an exact sympy rational; an infinite count is an error."""
    if v.is_nan() or v.is_infty() or v.is_neginfty():
        raise PolyfuseError(f"count is not finite ({v}): an unbounded set was counted")
    return sympy.Rational(str(v))


def _aff_to_sympy(aff: isl.Aff) -> sympy.Expr:
    e: sympy.Expr = val_to_sympy(aff.get_constant_val())
    for dt in (isl.dim_type.param, isl.dim_type.in_):
        for i in range(aff.dim(dt)):
            c = aff.get_coefficient_val(dt, i)
            if not c.is_zero():
                e += val_to_sympy(c) * int_symbol(aff.get_dim_name(dt, i) or f"_x{i}")
    for i in range(aff.dim(isl.dim_type.div)):
        c = aff.get_coefficient_val(isl.dim_type.div, i)
        if not c.is_zero():
            e += val_to_sympy(c) * floor_expr(_aff_to_sympy(aff.get_div(i)))
    return e


def floor_expr(e: sympy.Expr) -> sympy.Expr:
    """``floor(e)``, written ``ceiling(x/d)`` when ``e = (x + d - 1)/d`` with integer ``x``
    (isl's form of a ceiling), which reads better."""
    const, rest = e.as_coeff_Add()
    d = math.lcm(*[int(t.as_coeff_Mul()[0].q) for t in sympy.Add.make_args(rest)])
    if d > 1 and const.is_Rational and (const * d).is_Integer and (const * d) % d == d - 1:
        return sympy.floor(const) + sympy.ceiling(rest)
    return sympy.floor(e)


def _relation(e: sympy.Expr, equality: bool) -> Any:
    """``e >= 0`` (or ``e = 0``) as ``positive terms >= negative terms`` (``n >= 16``, not
    ``n - 16 >= 0``)."""
    lhs, rhs = sympy.Integer(0), sympy.Integer(0)
    for t in sympy.Add.make_args(e):
        if t.as_coeff_Mul()[0] < 0:
            rhs -= t
        else:
            lhs += t
    if lhs.is_number and not rhs.is_number:
        lhs, rhs = -rhs, -lhs  # 16 - n >= 0 -> -n >= -16 -> read as n <= 16
        return sympy.Eq(-lhs, -rhs) if equality else sympy.Le(-lhs, -rhs)
    return sympy.Eq(lhs, rhs) if equality else sympy.Ge(lhs, rhs)


def _set_to_sympy(s: isl.Set) -> Any:
    """A parameter set as a sympy boolean (disjunction of conjunctions of constraints)."""
    s = coalesce(s).compute_divs()
    ors = []
    for bs in s.get_basic_sets():
        ands = []
        for con in bs.get_constraints():
            e = _aff_to_sympy(con.get_aff())
            ands.append(_relation(e, con.is_equality()))
        ors.append(sympy.And(*ands))
    return sympy.Or(*ors)


def _qp_to_sympy(qp: isl.QPolynomial) -> sympy.Expr:
    space = qp.get_space()
    out: sympy.Expr = sympy.Integer(0)
    for term in qp.get_terms():
        e: sympy.Expr = val_to_sympy(term.get_coefficient_val())
        for i in range(term.dim(isl.dim_type.param)):
            k = term.get_exp(isl.dim_type.param, i)
            if k:
                e *= int_symbol(space.get_dim_name(isl.dim_type.param, i)) ** k
        for i in range(term.dim(isl.dim_type.div)):
            k = term.get_exp(isl.dim_type.div, i)
            if k:
                e *= floor_expr(_aff_to_sympy(term.get_div(i))) ** k
        out += e
    return out


def pwqp_to_sympy(pw: isl.PwQPolynomial, context: Optional[isl.Set] = None) -> sympy.Expr:
    """A ``PwQPolynomial`` over parameters as sympy (Piecewise, or a polynomial if one piece).

    ``context`` (a parameter set assumed to hold, e.g. sizes >= 1) only simplifies the display.
    """
    pw = coalesce(pw)
    if context is not None:
        plain = _pwqp_to_sympy(pw, None)
        gisted = coalesce(pw.gist_params(context.align_params(pw.get_space().params())))
        nicer = _pwqp_to_sympy(gisted, context)
        return nicer if len(str(nicer)) <= len(str(plain)) else plain
    return _pwqp_to_sympy(pw, None)


def _merge_pieces(pw: isl.PwQPolynomial, context: Optional[isl.Set]
                  ) -> list[tuple[isl.Set, isl.QPolynomial]]:
    """The pieces of ``pw``, a piece joined to another whose polynomial agrees with its own on
    its domain (``a*a`` where ``a = b`` joins ``a*b`` where ``a > b``), so fewer cases show;
    domains gisted by ``context``."""
    def finite(q: isl.QPolynomial) -> bool:
        return not (q.is_nan() or q.is_infty() or q.is_neginfty())

    def agrees(dom: isl.Set, mine: isl.QPolynomial, other: isl.QPolynomial) -> bool:
        return finite(mine) and finite(other) and isl.PwQPolynomial.alloc(dom, other).sub(
            isl.PwQPolynomial.alloc(dom, mine)).is_zero()

    groups = list(pw.get_pieces())
    merged = True
    while merged and len(groups) > 1:
        merged = False
        for i in range(len(groups)):
            for j in range(len(groups)):
                (di, qi), (dj, qj) = groups[i], groups[j]
                if i != j and agrees(dj, qj, qi):  # qi serves j's domain too
                    groups[i] = (coalesce(di.union(dj)), qi)
                    del groups[j]
                    merged = True
                    break
            if merged:
                break
    if context is not None:
        groups = [(coalesce(d.gist_params(context.align_params(d.get_space().params()))), q)
                  for d, q in groups]
    return groups


def _pwqp_to_sympy(pw: isl.PwQPolynomial, context: Optional[isl.Set]) -> sympy.Expr:
    pieces: list[tuple[sympy.Expr, isl.Set]] = []
    for dom, qp in _merge_pieces(pw, context):
        if qp.is_nan():
            e = sympy.nan
        elif qp.is_infty() or qp.is_neginfty():
            e = sympy.oo if qp.is_infty() else -sympy.oo
        else:
            e = sympy.expand(_qp_to_sympy(qp))
        for i, (pe, pd) in enumerate(pieces):
            if pe == e:  # both expanded: structural equality suffices
                pieces[i] = (pe, pd.union(dom))
                break
        else:
            pieces.append((e, dom))
    if not pieces:
        return sympy.Integer(0)
    if len(pieces) == 1:
        e, dom = pieces[0]
        universe = isl.Set.universe(dom.get_space())
        if context is not None:
            universe = universe.intersect_params(context.align_params(dom.get_space()))
            dom = dom.intersect_params(context.align_params(dom.get_space()))
        if universe.is_subset(dom):
            return e
    args = [(e, _set_to_sympy(d)) for e, d in pieces if e != 0]
    if not args:
        return sympy.Integer(0)
    return sympy.Piecewise(*args, (0, True))
