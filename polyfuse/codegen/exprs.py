"""isl objects and host expressions → C expressions (pycparser nodes) for fused kernels.

Code generation needs C for three kinds of values, all computed by isl so they are exact and
simplified against what is known where the code runs:

* the components of a fragment's re-indexing map (original work-item ids as functions of the
  fused ones), generated with ``isl.AstBuild.expr_from_pw_aff`` under the fragment's guard as
  context, so constraints that hold there (``g0 >= 4`` in a horizontal branch) simplify the
  expression;
* guards (``expr_from_set``), simplified against the fused NDRange box;
* host expressions (original global sizes, group counts) that stay symbolic.

isl's AST builder works on the build's parameters, so every work-item dimension of the fused
space is moved into the parameters under a reserved name (``F_h0``, ``F_g0``, ``F_l0``) first.
The resulting :class:`isl.AstExpr` is converted node by node (not via ``to_C_str``) so that
ids become real C: ``F_g0`` → ``(int)get_group_id(0)`` (a signed value: isl expressions subtract,
and ``size_t`` arithmetic would wrap), host parameters → the fused kernel's scalar parameters,
and ``floord``/``min``/``max`` → OpenCL C that needs no macros.
"""

from __future__ import annotations

from collections.abc import Callable

import islpy as isl
import sympy
from pycparser import c_ast

from polyfuse.core.program import host_expr_to_isl

#: names of the fused work-item dimensions while they are isl parameters
H_PREFIX, G_PREFIX, L_PREFIX = "F_h", "F_g", "F_l"

_BINOPS = {
    isl.ast_expr_op_type.and_: "&&",
    isl.ast_expr_op_type.and_then: "&&",
    isl.ast_expr_op_type.or_: "||",
    isl.ast_expr_op_type.or_else: "||",
    isl.ast_expr_op_type.add: "+",
    isl.ast_expr_op_type.sub: "-",
    isl.ast_expr_op_type.mul: "*",
    isl.ast_expr_op_type.div: "/",
    isl.ast_expr_op_type.pdiv_q: "/",
    isl.ast_expr_op_type.pdiv_r: "%",
    isl.ast_expr_op_type.zdiv_r: "%",
    isl.ast_expr_op_type.eq: "==",
    isl.ast_expr_op_type.le: "<=",
    isl.ast_expr_op_type.lt: "<",
    isl.ast_expr_op_type.ge: ">=",
    isl.ast_expr_op_type.gt: ">",
}

IdMapper = Callable[[str], c_ast.Node]


def int_const(v: int) -> c_ast.Node:
    """An ``int`` literal (negative values as unary minus, as C has no negative literals)."""
    if v < 0:
        return c_ast.UnaryOp("-", c_ast.Constant("int", str(-v)))
    return c_ast.Constant("int", str(v))


def work_item_call(func: str, d: int) -> c_ast.Node:
    """``(int)func(d)``: work-item functions return ``size_t``; isl expressions are signed."""
    call = c_ast.FuncCall(c_ast.ID(func), c_ast.ExprList([c_ast.Constant("int", str(d))]))
    return c_ast.Cast(c_ast.Typename(None, [], None, c_ast.TypeDecl(
        None, [], None, c_ast.IdentifierType(["int"]))), call)


def cast(type_name: str, expr: c_ast.Node) -> c_ast.Node:
    """``(type_name)(expr)``."""
    return c_ast.Cast(c_ast.Typename(None, [], None, c_ast.TypeDecl(
        None, [], None, c_ast.IdentifierType(type_name.split()))), expr)


def ast_expr_to_c(expr: isl.AstExpr, ids: IdMapper) -> c_ast.Node:
    """Convert an isl AST expression to a pycparser expression; ``ids`` maps isl ids to C."""
    t = expr.get_type()
    if t == isl.ast_expr_type.int:
        return int_const(int(expr.get_val().to_python()))
    if t == isl.ast_expr_type.id:
        return ids(expr.get_id().get_name())
    op = expr.get_op_type()
    args = [ast_expr_to_c(expr.get_op_arg(i), ids) for i in range(expr.get_op_n_arg())]
    if op in _BINOPS:
        out = args[0]
        for a in args[1:]:
            out = c_ast.BinaryOp(_BINOPS[op], out, a)
        return out
    if op == isl.ast_expr_op_type.minus:
        return c_ast.UnaryOp("-", args[0])
    if op in (isl.ast_expr_op_type.max, isl.ast_expr_op_type.min):
        name = "max" if op == isl.ast_expr_op_type.max else "min"
        out = args[0]
        for a in args[1:]:
            out = c_ast.FuncCall(c_ast.ID(name), c_ast.ExprList([out, a]))
        return out
    if op == isl.ast_expr_op_type.fdiv_q:
        # floor division by a positive constant: a >= 0 ? a / b : -((-a + b - 1) / b)
        a, b = args
        neg = c_ast.UnaryOp("-", c_ast.BinaryOp(
            "/", c_ast.BinaryOp("-", c_ast.BinaryOp("+", c_ast.UnaryOp("-", a), b),
                                int_const(1)), b))
        return c_ast.TernaryOp(c_ast.BinaryOp(">=", a, int_const(0)),
                               c_ast.BinaryOp("/", a, b), neg)
    if op in (isl.ast_expr_op_type.cond, isl.ast_expr_op_type.select):
        return c_ast.TernaryOp(args[0], args[1], args[2])
    raise ValueError(f"isl expression operator {op} has no C translation")


def dims_to_params(obj: isl.Set | isl.Map | isl.PwAff, n_in: int, names: list[str],
                   dtype: isl.dim_type = isl.dim_type.set) -> isl.Set | isl.PwAff:
    """Name the first ``n_in`` dims ``names`` and move them into the parameters."""
    for i, name in enumerate(names):
        obj = obj.set_dim_id(dtype, i, isl.Id(name))
    nparam = obj.dim(isl.dim_type.param)
    return obj.move_dims(isl.dim_type.param, nparam, dtype, 0, n_in)


def build_for(context: isl.Set) -> isl.AstBuild:
    """An AST build whose context is a parameter set (the fused dims already moved there)."""
    return isl.AstBuild.from_context(context)


def pw_aff_to_c(pa: isl.PwAff, context: isl.Set, ids: IdMapper) -> c_ast.Node:
    """C for a parameter-only PwAff, simplified under the parameter set ``context``."""
    ctx = context.align_params(pa.get_space())
    pa = pa.align_params(ctx.get_space())
    pa = pa.gist_params(ctx)
    expr = build_for(ctx).expr_from_pw_aff(pa)
    return ast_expr_to_c(expr, ids)


def set_to_c(s: isl.Set, context: isl.Set, ids: IdMapper) -> c_ast.Node | None:
    """C condition for a parameter-only set under ``context``; None when it always holds."""
    ctx = context.align_params(s.get_space())
    s = s.align_params(ctx.get_space())
    g = s.gist_params(ctx)
    if g.plain_is_universe() or ctx.is_subset(s):
        return None
    expr = build_for(ctx).expr_from_set(g)
    return ast_expr_to_c(expr, ids)


def host_to_pw_aff(expr: sympy.Expr, ctx: isl.Context | None = None) -> isl.PwAff:
    """A host expression (sympy, affine or floor-divided) as a parameter-only PwAff."""
    text = host_expr_to_isl(expr)
    names = sorted(str(s) for s in sympy.sympify(expr).free_symbols)
    return isl.PwAff(f"[{', '.join(names)}] -> {{ [({text})] }}")


def _val(v: isl.Val) -> sympy.Rational:
    return sympy.Rational(v.to_str())


def aff_to_sympy(aff: isl.Aff) -> sympy.Expr:
    """A parameter-only quasi-affine isl expression as sympy (floor divisions kept)."""
    out: sympy.Expr = _val(aff.get_constant_val())
    for i in range(aff.dim(isl.dim_type.param)):
        c = _val(aff.get_coefficient_val(isl.dim_type.param, i))
        if c:
            out += c * sympy.Symbol(aff.get_dim_name(isl.dim_type.param, i))
    for i in range(aff.dim(isl.dim_type.div)):
        c = _val(aff.get_coefficient_val(isl.dim_type.div, i))
        if c:
            out += c * sympy.floor(aff_to_sympy(aff.get_div(i)))
    return out


def pw_aff_to_sympy(pa: isl.PwAff, context: isl.Set) -> sympy.Expr:
    """A parameter-only PwAff as sympy; only single-piece values (under ``context``) are taken."""
    pa = pa.gist_params(context.align_params(pa.get_space()))
    pieces: list[tuple[isl.Set, isl.Aff]] = []
    pa.foreach_piece(lambda s, a: pieces.append((s, a)))
    if len(pieces) != 1:
        raise ValueError(f"{pa} has {len(pieces)} pieces")
    return aff_to_sympy(pieces[0][1])
