"""Exact symbolic kernel feature counts (Stevens & Klöckner; docs/performance.md).

Every count is a barvinok count (``Set.card()`` through islpy) of an isl set derived from the
kernel model of :mod:`polyfuse.frontend.opencl`, so it is exact for every value of the kernel's
parameters and launch geometry (``_gs<d>``/``_ls<d>``), and is shown as a sympy expression.

Conventions:

* **Totals over one launch at a granularity** (as loopy's ``get_op_map``): a count is the number
  of (unit, statement instance) pairs in which at least one work-item of the unit executes the
  instance, where the unit is a ``work-item``, a ``sub-group`` or a ``work-group``.  Work-items of
  a sub-group are consecutive in the linearized local id ``l0 + L0*l1 + L0*L1*l2`` (chunks of the
  sub-group size).  So a ``work-item`` count is the launch total; :meth:`KernelCounts.per_work_item`
  divides by the number of work-items.  Default granularities (``granularity=None``) follow
  Stevens & Klöckner: float ops and ``__local`` accesses per sub-group; a global access per
  sub-group when it is uniform across a sub-group (local-id strides 0 in every dimension a
  sub-group spans), per work-item otherwise; barriers per work-item; launches per launch.
* **Ops** (see :mod:`polyfuse.perf.features`): float ops only, by op and numpy dtype; ``a*b+c``
  is one ``fma`` (not also a ``mul`` and an ``add``).
* **Memory**: one record per (space, array, dtype, direction, strides, exactness).  At work-item
  granularity a count is element accesses; at sub-group/work-group granularity it is how many
  times a unit executes the access (an instance counts once however many lanes take part).
  Strides are the coefficient of ``l_d``/``g_d`` in the flattened element index (row-major for
  multi-dimensional ``__local`` arrays), in elements; ``None`` when the index is not affine in
  that id (may-access, or a quasi-affine index whose floor/mod involves it).  When the model uses
  unit work-groups (local size unknown and unobserved), the local stride is the global-id
  coefficient and the group stride that times ``_ls<d>``.  The AFR is element accesses
  (work-item level) / distinct elements touched (``relation.range().card()``), 0 where nothing
  is accessed, ``None`` for may-accesses.  A may-access (``exact=False``) is counted over its
  guarded instances (the relation's domain) and flagged with its reason.
* **Sub-groups** are keyed by statement instance, i.e. by the values of the loop iterators: a
  loop whose iterator differs between lanes (``for (j = lid; ...)``) gives each lane its own
  instances at sub-group/work-group granularity.
* **Sync**: ``barrier_local``/``barrier_global`` (a barrier fencing both counts in both),
  ``kernel_launch`` (1 per launch).  :attr:`KernelCounts.geometry` holds work-items, work-groups and
  sub-groups.
* **sympy**: a ``PwQPolynomial`` becomes a ``Piecewise`` over its pieces' parameter sets (0
  elsewhere, as in isl) or a plain polynomial when one piece covers every parameter value; isl's
  ``floor(e/d)`` becomes ``sympy.floor``.  Values are computed by isl (``eval``), not by sympy.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, Optional, Union

import islpy as isl
import sympy

from polyfuse.core.islutil import (
    IslQuotaExceeded,
    bounded,
    coalesce,
    int_symbol,
    pwqp_to_sympy,
    val_to_sympy,
)
from polyfuse.core.mathtext import readable
from polyfuse.core.program import (
    GLOBAL_SIZE_PARAMS,
    LOCAL_SIZE_PARAMS,
    WORK_ITEM_DIMS,
    Access,
    Kernel,
    KernelContext,
    Launch,
    PolyfuseError,
    Program,
    Target,
)
from polyfuse.perf import features

__all__ = [
    "Count", "OpRecord", "MemRecord", "SyncRecord", "KernelCounts", "count_kernel",
    "count_program", "count_report", "format_count_table", "pwqp_to_sympy", "GRANULARITIES",
    "default_subgroup_size",
]

GRANULARITIES = ("work-item", "sub-group", "work-group")
_FALLBACK_SUBGROUP = 32
Number = Union[int, Fraction, float]


def _require_barvinok() -> None:
    """Counting needs barvinok; plain islpy lacks ``Set.card``: say how to fix it."""
    if not hasattr(isl.Set, "card") or not hasattr(isl.PwQPolynomial, "eval_with_dict"):
        raise PolyfuseError(
            "counting needs islpy built with barvinok (isl.Set.card is missing): "
            "pip uninstall islpy && pip install islpy-barvinok")


# ----------------------------------------------------------------------------------------------
# Records
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Count:
    """A count: isl ``qp`` (exact, evaluated by isl), its sympy ``expr``, and ``value``.

    The sympy form is built on first use (converting large piecewise counts is the slow part).
    """

    raw: Optional[sympy.Expr] = None
    qp: Optional[isl.PwQPolynomial] = field(default=None, compare=False, repr=False)
    value: Optional[Number] = None
    context: Optional[isl.Set] = field(default=None, compare=False, repr=False)

    @staticmethod
    def of(qp: isl.PwQPolynomial, context: Optional[isl.Set] = None) -> Count:
        return Count(None, qp, None, context)

    @property
    def expr(self) -> sympy.Expr:
        if self.raw is None:
            assert self.qp is not None
            object.__setattr__(self, "raw", pwqp_to_sympy(self.qp, self.context))
        return self.raw  # type: ignore[return-value]

    @property
    def unbounded(self) -> bool:
        """True when the model cannot bound the count (a loop it does not model exactly)."""
        if self.qp is not None:
            return any(q.is_infty() or q.is_nan() or q.is_neginfty()
                       for _, q in self.qp.get_pieces())
        return bool(self.expr.has(sympy.oo) or self.expr.has(sympy.nan))

    def evaluate(self, values: Mapping[str, int]) -> Count:
        """This count with ``value`` filled when ``values`` fixes every parameter it uses."""
        v: Optional[Number] = None
        if self.qp is not None:
            qp = self.qp.drop_unused_params()
            names = qp.get_space().get_var_names(isl.dim_type.param)
            if all(n in values for n in names) and not self.unbounded:
                v = _num(qp.eval_with_dict({n: int(values[n]) for n in names}))
        else:
            e = self.expr.subs({s: values[s.name] for s in self.expr.free_symbols
                                if s.name in values})
            if e.is_number and e.is_finite:
                v = _num(e)
        return replace(self, value=v)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"count": str(self.expr)}
        if self.unbounded:
            d["unbounded"] = True
        if self.value is not None:
            d["value"] = _json_num(self.value)
        return d


def _num(v: Any) -> Number:
    if isinstance(v, isl.Val):
        v = sympy.Rational(str(v))
    r = sympy.Rational(v) if not isinstance(v, (int, Fraction)) else v
    if isinstance(r, sympy.Rational):
        return int(r) if r.q == 1 else Fraction(int(r.p), int(r.q))
    return r


def _json_num(v: Number) -> Union[int, float]:
    return v if isinstance(v, int) else float(v)


@dataclass(frozen=True)
class OpRecord:
    """Float operations of one kind and dtype, totalled over the launch at ``granularity``."""

    op: str
    dtype: str
    granularity: str
    count: Count
    exact: bool = True
    notes: tuple[str, ...] = ()
    #: the ops of statements inside a loop of the kernel, per work-item (each work-item runs
    #: them one iteration after the other; straight-line ops a CPU compiler vectorizes across
    #: work-items); None: no such statement
    loop_count: Optional[Count] = None
    #: the part of ``loop_count`` in register blocks (:func:`register_block_domains`): a CPU
    #: compiler packs a block's like statements into vector instructions within the work-item
    block_count: Optional[Count] = None
    #: the same ops at the record's ``granularity`` (the part of ``count`` they are)
    block_total: Optional[Count] = None
    #: the part of ``loop_count`` in contiguous loops (:func:`contiguous_loop_domains`),
    #: which a CPU compiler vectorizes along the loop as it does straight-line code across
    #: work-items
    contiguous_count: Optional[Count] = None
    #: the part of ``block_count`` written as OpenCL vector operations (the blocked product's
    #: ``float16`` accumulators): vectors at their own width, where the compiler packs the
    #: scalar block's statements at the width its tuning prefers
    vector_count: Optional[Count] = None

    def to_json(self) -> dict[str, Any]:
        d = {"dtype": self.dtype, "op": self.op, "granularity": self.granularity,
             **self.count.to_json(), "exact": self.exact}
        if self.notes:
            d["notes"] = list(self.notes)
        return d


Stride = Union[int, sympy.Expr, None]


@dataclass(frozen=True)
class MemRecord:
    """Memory accesses of one class (Stevens & Klöckner's ``f_mem_access_...`` features)."""

    space: str  # global | constant | local
    array: str
    dtype: str
    direction: str  # load | store
    lid_strides: tuple[Stride, ...]
    gid_strides: tuple[Stride, ...]
    granularity: str
    count: Count
    #: element accesses at work-item granularity (the AFR numerator)
    accesses: Count
    footprint: Optional[Count]
    exact: bool = True
    reason: Optional[str] = None
    #: the part of ``accesses`` made by statements inside a loop of the kernel (a work-item
    #: repeating it), as opposed to straight-line code that a CPU compiler vectorizes across
    #: work-items; None: no such statement
    loop_accesses: Optional[Count] = None
    #: the iterations of the nest bodies whose first access this record holds, weighted by
    #: the work-item loops around them beyond the innermost one (a body three work-item loops
    #: deep counts twice), once per iteration however many accesses the body makes: the loop
    #: control and index arithmetic of a nest, which the float counts leave out; None: no
    #: such statement
    nested_loop_accesses: Optional[Count] = None
    #: the part of ``loop_accesses`` in register blocks (:func:`register_block_domains`)
    block_accesses: Optional[Count] = None
    #: the part of ``loop_accesses`` in contiguous loops (:func:`contiguous_loop_domains`)
    contiguous_accesses: Optional[Count] = None
    #: straight-line accesses of a work-item to consecutive elements, as a register block's
    #: stores (:func:`packed_accesses`): a compiler writes them as vectors
    packed: bool = False
    #: the distinct elements each work-item accesses, summed over the work-items (of accesses
    #: in work-item loops, counted within :data:`OWN_MAX_DIVS`; None otherwise): ``accesses``
    #: beyond it re-read what the same work-item read before (a row form's passes over its own
    #: row), the rest of the re-reads are other work-items' (:func:`own_pairs`)
    own_footprint: Optional[Count] = None
    #: the distinct cache lines of :data:`LINE_BYTES` that ``footprint`` lies in (arrays of
    #: one dimension, counted within :data:`OWN_MAX_DIVS`; None otherwise): what a strided
    #: access fetches from memory, a whole line for each element it uses (:func:`line_set`)
    footprint_lines: Optional[Count] = None

    @property
    def afr(self) -> Optional[sympy.Expr]:
        if self.footprint is None:
            return None
        if self.footprint.expr == 0:
            return None
        afr = sympy.piecewise_fold(self.accesses.expr / self.footprint.expr)
        if isinstance(afr, sympy.Piecewise):  # no footprint where nothing is accessed: AFR 0
            afr = sympy.Piecewise(*[(sympy.S.Zero if e is sympy.nan else e, c)
                                    for e, c in afr.args])
        return afr

    @property
    def afr_value(self) -> Optional[Number]:
        if self.footprint is None or self.footprint.value in (None, 0) \
                or self.accesses.value is None:
            return None
        return Fraction(self.accesses.value) / Fraction(self.footprint.value)

    def evaluate(self, values: Mapping[str, int]) -> MemRecord:
        return replace(self, count=self.count.evaluate(values),
                       accesses=self.accesses.evaluate(values),
                       footprint=self.footprint.evaluate(values) if self.footprint else None,
                       loop_accesses=(self.loop_accesses.evaluate(values)
                                      if self.loop_accesses else None),
                       nested_loop_accesses=(self.nested_loop_accesses.evaluate(values)
                                             if self.nested_loop_accesses else None),
                       block_accesses=(self.block_accesses.evaluate(values)
                                       if self.block_accesses else None),
                       contiguous_accesses=(self.contiguous_accesses.evaluate(values)
                                            if self.contiguous_accesses else None),
                       own_footprint=(self.own_footprint.evaluate(values)
                                      if self.own_footprint else None),
                       footprint_lines=(self.footprint_lines.evaluate(values)
                                        if self.footprint_lines else None))

    def to_json(self) -> dict[str, Any]:
        afr = self.afr
        d: dict[str, Any] = {
            "space": self.space, "array": self.array, "dtype": self.dtype,
            "direction": self.direction,
            "lid_strides": {str(i): _json_stride(s) for i, s in enumerate(self.lid_strides)},
            "gid_strides": {str(i): _json_stride(s) for i, s in enumerate(self.gid_strides)},
            "afr": None if afr is None else str(afr),
            "granularity": self.granularity, **self.count.to_json(),
            "footprint": None if self.footprint is None else str(self.footprint.expr),
            "exact": self.exact,
        }
        if self.afr_value is not None:
            d["afr_value"] = float(self.afr_value)
        if self.reason:
            d["reason"] = self.reason
        return d


def _json_stride(s: Stride) -> Union[int, str, None]:
    if s is None:
        return None
    if isinstance(s, int) or (isinstance(s, sympy.Expr) and s.is_Integer):
        return int(s)
    return str(s)


@dataclass(frozen=True)
class SyncRecord:
    """``barrier_local``, ``barrier_global`` or ``kernel_launch``."""

    kind: str
    granularity: str
    count: Count
    exact: bool = True
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        d = {"kind": self.kind, "granularity": self.granularity, **self.count.to_json(),
             "exact": self.exact}
        if self.notes:
            d["notes"] = list(self.notes)
        return d


@dataclass(frozen=True)
class KernelCounts:
    """All counts of one kernel (or one launch): ``ops``, ``mem``, ``sync`` and ``geometry``."""

    kernel: str
    subgroup_size: int
    ops: tuple[OpRecord, ...]
    mem: tuple[MemRecord, ...]
    sync: tuple[SyncRecord, ...]
    #: ``work_items``, ``work_groups``, ``sub_groups`` of the launch
    geometry: Mapping[str, Count]
    params: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    values: Mapping[str, int] = field(default_factory=dict)
    #: the work-group size per dimension where the launch fixes it (None: unknown)
    local_size: tuple[Optional[int], ...] = ()
    #: distinct elements of each global (and ``__constant``) array the launch touches, over
    #: every access to it (loads and stores, all stride classes); an array with an access
    #: that is not exact (or a footprint too costly to count) is left out
    array_footprints: Mapping[str, Count] = field(default_factory=dict)
    #: distinct elements of each global array one work-group (the first) touches, over every
    #: access to it (as ``array_footprints``): what a group walks of an array all groups read
    group_footprints: Mapping[str, Count] = field(default_factory=dict)
    #: iterations of register-block loop bodies (:func:`register_block_domains`) summed over
    #: the work-items: each carries its accumulators' dependence chains one step
    block_iterations: Optional[Count] = None
    #: runs of consecutive elements in ``group_footprints`` (:func:`run_starts`; arrays of one
    #: dimension, counted within :data:`OWN_MAX_DIVS`): ``group_footprints / group_runs`` is
    #: the mean run a work-group walks of the array
    group_runs: Mapping[str, Count] = field(default_factory=dict)

    def evaluate(self, values: Mapping[str, int]) -> KernelCounts:
        """The same counts with every ``value`` filled that ``values`` determines."""
        vals = {**self.values, **{k: int(v) for k, v in values.items()}}
        return replace(
            self,
            ops=tuple(replace(r, count=r.count.evaluate(vals),
                              loop_count=None if r.loop_count is None else
                              r.loop_count.evaluate(vals),
                              block_count=None if r.block_count is None else
                              r.block_count.evaluate(vals),
                              block_total=None if r.block_total is None else
                              r.block_total.evaluate(vals),
                              contiguous_count=None if r.contiguous_count is None else
                              r.contiguous_count.evaluate(vals),
                              vector_count=None if r.vector_count is None else
                              r.vector_count.evaluate(vals)) for r in self.ops),
            mem=tuple(r.evaluate(vals) for r in self.mem),
            sync=tuple(replace(r, count=r.count.evaluate(vals)) for r in self.sync),
            geometry={k: c.evaluate(vals) for k, c in self.geometry.items()},
            values=vals,
            array_footprints={k: c.evaluate(vals) for k, c in self.array_footprints.items()},
            block_iterations=None if self.block_iterations is None else
            self.block_iterations.evaluate(vals),
            group_footprints={k: c.evaluate(vals) for k, c in self.group_footprints.items()},
            group_runs={k: c.evaluate(vals) for k, c in self.group_runs.items()},
        )

    def per_work_item(self) -> KernelCounts:
        """Counts divided by the number of work-items (work-item-granularity averages)."""
        wi = self.geometry["work_items"]

        def div(c: Count) -> Count:
            v = None
            if c.value is not None and wi.value:
                v = _num(Fraction(c.value) / Fraction(wi.value))
            return Count(sympy.piecewise_fold(c.expr / wi.expr), None, v)

        return replace(
            self,
            ops=tuple(replace(r, count=div(r.count)) for r in self.ops),
            mem=tuple(replace(r, count=div(r.count)) for r in self.mem),
            sync=tuple(replace(r, count=div(r.count)) if r.kind != "kernel_launch" else r
                       for r in self.sync),
        )

    def op(self, op: str, dtype: str = "float32") -> Optional[OpRecord]:
        for r in self.ops:
            if r.op == op and r.dtype == dtype:
                return r
        return None

    def sync_count(self, kind: str) -> Optional[SyncRecord]:
        for r in self.sync:
            if r.kind == kind:
                return r
        return None

    def to_json(self, values: Optional[Mapping[str, int]] = None) -> dict[str, Any]:
        kc = self.evaluate(values) if values else self
        sync: dict[str, Any] = {}
        for r in kc.sync:
            sync[r.kind] = {k: v for k, v in r.to_json().items() if k != "kind"}
        return {
            "kernel": kc.kernel,
            "subgroup_size": kc.subgroup_size,
            "params": list(kc.params),
            "values": dict(kc.values),
            "ops": [r.to_json() for r in kc.ops],
            "mem": [r.to_json() for r in kc.mem],
            "sync": sync,
            "geometry": {k: c.to_json() for k, c in kc.geometry.items()},
            "notes": list(kc.notes),
        }


# ----------------------------------------------------------------------------------------------
# Geometry and granularity
# ----------------------------------------------------------------------------------------------


_SUBGROUP_CACHE: list[int] = []


def default_subgroup_size() -> int:
    """The sub-group size the default OpenCL device reports (32 when none can be queried)."""
    if not _SUBGROUP_CACHE:
        size = None
        try:
            from polyfuse.runtime.device import device_limits

            lim = device_limits()
            size = lim.sub_group_size or lim.preferred_work_group_size_multiple
        except Exception:  # noqa: BLE001 - no device / no pyopencl: use the common warp size
            size = None
        _SUBGROUP_CACHE.append(int(size) if size else _FALLBACK_SUBGROUP)
    return _SUBGROUP_CACHE[0]


@dataclass
class _Geometry:
    """What the kernel model says about the NDRange, per dimension."""

    active: list[bool]
    unit: list[bool]
    L: list[Any]  # int, or sympy symbol (unknown)
    G: list[Any]
    params: list[str]
    sg: int
    flags: dict[str, list[str]]

    @staticmethod
    def of(kernel: Kernel, sg: int) -> _Geometry:
        params: list[str] = []
        for dom in [s.domain for s in kernel.statements] + [b.domain for b in kernel.barriers]:
            for n in dom.get_space().get_var_names(isl.dim_type.param):
                if n not in params:
                    params.append(n)
        ctx = kernel.context
        active, unit, L, G = [], [], [], []
        for d in range(3):
            act = d < kernel.work_dims or ctx.global_size[d] is not None
            active.append(act)
            G.append(ctx.global_size[d] if ctx.global_size[d] is not None
                     else int_symbol(GLOBAL_SIZE_PARAMS[d]) if act else 1)
            if not act:
                L.append(1)
                unit.append(False)
            elif ctx.local_size[d] is not None:
                L.append(int(ctx.local_size[d]))
                unit.append(False)
            else:
                L.append(int_symbol(LOCAL_SIZE_PARAMS[d]))
                unit.append(LOCAL_SIZE_PARAMS[d] not in params)
        geo = _Geometry(active, unit, L, G, params, sg, {g: [] for g in GRANULARITIES})
        geo._flags()
        return geo

    def _flags(self) -> None:
        if any(self.unit):
            self.flags["work-group"].append(
                "local size unknown and unobserved by the kernel: the model uses unit "
                "work-groups, so work-group counts equal work-item counts")
        if not self._linear_known() and not (self.L[0] if isinstance(self.L[0], int) else 0) \
                % self.sg == 0:
            self.flags["sub-group"].append(
                f"local size unknown: sub-groups assumed to be {self.sg} consecutive work-items "
                "along dimension 0 (local size 0 a multiple of the sub-group size)")

    def _linear_known(self) -> bool:
        return not any(self.unit) and all(isinstance(x, int) for x in self.L)

    def n_ids(self) -> int:
        return sum(self.active)

    def key(self, gran: str, ndims: int) -> Optional[list[str]]:
        """Key expressions (over ``i0..``) identifying the unit executing an instance."""
        g = ["i0", "i1", "i2"]
        ll = ["i3", "i4", "i5"]
        loops = [f"i{k}" for k in range(6, ndims)]
        if gran == "work-item":
            return None
        if gran == "work-group":
            return g + loops
        sg = self.sg
        if self._linear_known():
            L = self.L
            lin = f"{ll[0]} + {L[0]}*{ll[1]} + {L[0] * L[1]}*{ll[2]}"
            return g + [f"floor(({lin})/{sg})"] + loops
        g0 = f"floor({g[0]}/{sg})" if self.unit[0] else g[0]
        return [g0, g[1], g[2], f"floor({ll[0]}/{sg})", ll[1], ll[2]] + loops

    def varies_in_subgroup(self) -> list[int]:
        """Dimensions whose local id may change inside one sub-group."""
        dims = [0]
        if isinstance(self.L[0], int) and self.L[0] < self.sg and self.active[1]:
            dims.append(1)
            if isinstance(self.L[1], int) and self.L[0] * self.L[1] < self.sg and self.active[2]:
                dims.append(2)
        return dims

    def counts(self) -> dict[str, Count]:
        wi = sympy.Integer(1)
        groups = sympy.Integer(1)
        lsz = sympy.Integer(1)
        for d in range(3):
            if self.active[d]:
                wi *= self.G[d]
                groups *= sympy.Integer(self.G[d]) / self.L[d] if isinstance(self.G[d], int) \
                    else self.G[d] / self.L[d]
                lsz *= self.L[d]
        return {"work_items": Count(sympy.sympify(wi)),
                "work_groups": Count(sympy.sympify(groups)),
                "sub_groups": Count(sympy.sympify(groups * sympy.ceiling(lsz / self.sg)))}


def _gran_map(s_space: isl.Space, key: list[str]) -> isl.Map:
    n = s_space.dim(isl.dim_type.set)
    name = s_space.get_tuple_name(isl.dim_type.set)
    dims = ", ".join(f"i{k}" for k in range(n))
    tup = f"{name}[{dims}]" if name else f"[{dims}]"
    m = isl.Map(f"{{ {tup} -> [{', '.join(key)}] }}")
    return m.align_params(s_space)


class _Counter:
    """Cached barvinok counts of sets and relations at each granularity.

    A count does not depend on the statement a set or relation belongs to, and the statements
    of one loop body (a register-blocked product's dozens of multiply-adds) share their
    domain: each is counted once per text, its statement name left out."""

    def __init__(self, geo: _Geometry):
        self.geo = geo
        self._counts: dict[tuple[str, str], isl.PwQPolynomial] = {}

    def instances(self, dom: isl.Set, gran: str) -> isl.PwQPolynomial:
        memo = (str(dom.reset_tuple_id()), gran)
        got = self._counts.get(memo)
        if got is None:
            key = self.geo.key(gran, dom.dim(isl.dim_type.set))
            got = dom.card() if key is None else \
                dom.apply(_gran_map(dom.get_space(), key)).card()
            self._counts[memo] = got
        return got

    def elements(self, rel: isl.Map) -> isl.PwQPolynomial:
        """Element accesses of an exact relation: (instance, element) pairs (vloads: several)."""
        memo = (str(rel.reset_tuple_id(isl.dim_type.in_)), "elements")
        got = self._counts.get(memo)
        if got is None:
            got = self._counts[memo] = rel.wrap().card()
        return got


def _sum(qps: Iterable[isl.PwQPolynomial]) -> Optional[isl.PwQPolynomial]:
    out = None
    for q in qps:
        out = q if out is None else out.add(q)
    return out


# ----------------------------------------------------------------------------------------------
# Strides
# ----------------------------------------------------------------------------------------------


def _flat_index(acc: Access, kernel: Kernel) -> Optional[isl.PwAff]:
    rel = acc.relation
    if not rel.is_single_valued():
        return None
    n_out = rel.dim(isl.dim_type.out)
    shape: tuple[int, ...] = ()
    for a in kernel.arrays:
        if a.name == acc.array:
            shape = a.shape
    if n_out > 1 and len(shape) != n_out:
        return None
    pma = isl.PwMultiAff.from_map(rel)
    flat = None
    for k in range(n_out):
        mult = math.prod(shape[k + 1:]) if n_out > 1 else 1
        pa = pma.get_pw_aff(k).scale_val(isl.Val(mult))
        flat = pa if flat is None else flat.add(pa)
    return flat


def _stride(flat: isl.PwAff, pos: int) -> Optional[int]:
    strides = set()
    for _, aff in flat.get_pieces():
        for i in range(aff.dim(isl.dim_type.div)):
            if not aff.get_coefficient_val(isl.dim_type.div, i).is_zero() and \
                    aff.get_div(i).involves_dims(isl.dim_type.in_, pos, 1):
                return None
        c = val_to_sympy(aff.get_coefficient_val(isl.dim_type.in_, pos))
        if c.q != 1:
            return None
        strides.add(int(c))
    return strides.pop() if len(strides) == 1 else None


def _strides(acc: Access, kernel: Kernel, geo: _Geometry
             ) -> tuple[tuple[Stride, ...], tuple[Stride, ...]]:
    dims = [d for d in range(3) if geo.active[d]]
    if not acc.exact:
        return tuple(None for _ in dims), tuple(None for _ in dims)
    flat = _flat_index(acc, kernel)
    lid: list[Stride] = []
    gid: list[Stride] = []
    for d in dims:
        if flat is None:
            lid.append(None)
            gid.append(None)
            continue
        sg, sl = _stride(flat, d), _stride(flat, 3 + d)
        if geo.unit[d]:
            lid.append(sg)
            gid.append(None if sg is None else (sg * geo.L[d] if sg else 0))
        else:
            lid.append(sl)
            gid.append(sg)
    return tuple(lid), tuple(gid)


# ----------------------------------------------------------------------------------------------
# Counting a kernel
# ----------------------------------------------------------------------------------------------


def _size_context(geo: _Geometry) -> Optional[isl.Set]:
    """What the model assumes of launch sizes (>= 1, multiples of a known local size)."""
    cons = []
    for d in range(3):
        for name, known in ((GLOBAL_SIZE_PARAMS[d], geo.L[d]), (LOCAL_SIZE_PARAMS[d], None)):
            if name in geo.params:
                cons.append(f"{name} >= 1")
                if isinstance(known, int) and known > 1:
                    cons.append(f"{name} mod {known} = 0")
        if GLOBAL_SIZE_PARAMS[d] in geo.params and LOCAL_SIZE_PARAMS[d] in geo.params:
            # OpenCL: the global size is a multiple of the local size, so never smaller
            cons.append(f"{LOCAL_SIZE_PARAMS[d]} <= {GLOBAL_SIZE_PARAMS[d]}")
    if not cons:
        return None
    return isl.Set(f"[{', '.join(geo.params)}] -> {{ : {' and '.join(cons)} }}")


def _loop_nest(domain: isl.Set) -> tuple[str, ...]:
    """The iterators of the kernel loops around a statement (its domain's dims after the ids),
    but loops of a single iteration (``for (bi = 0; bi < 1; bi++)``, as a generated kernel's
    block loops are at some shapes): a compiler removes them, their body is straight-line."""
    n = domain.dim(isl.dim_type.set)
    return tuple(domain.get_dim_name(isl.dim_type.set, i) or f"_{i}"
                 for i in range(len(WORK_ITEM_DIMS), n)
                 if domain.plain_get_val_if_fixed(isl.dim_type.set, i).is_nan())


def _loops_with_barriers(kernel: Kernel) -> set[tuple[str, ...]]:
    """Loop nests (as iterator tuples) that contain a barrier, every enclosing one included."""
    out: set[tuple[str, ...]] = set()
    for b in kernel.barriers:
        nest = _loop_nest(b.domain)
        out.update(nest[:i] for i in range(1, len(nest) + 1))
    return out


def _in_work_item_loop(domain: isl.Set, with_barrier: set[tuple[str, ...]]) -> bool:
    """Whether a statement sits in a loop each work-item runs on its own: its innermost
    enclosing loop holds no barrier (a loop around barriers runs in lockstep across the
    work-group, its body as straight-line code between them)."""
    nest = _loop_nest(domain)
    return bool(nest) and nest not in with_barrier


def _work_item_loop_depth(domain: isl.Set, with_barrier: set[tuple[str, ...]]) -> int:
    """How many of a statement's enclosing loops each work-item runs on its own (those inside
    the innermost loop that holds a barrier)."""
    nest = _loop_nest(domain)
    return sum(1 for i in range(1, len(nest) + 1) if nest[:i] not in with_barrier)


#: a work-item loop body with at least this many statements of float ops is a register block
REGISTER_BLOCK_STATEMENTS = 8


def repeated_loads(kernel: Kernel, with_barrier: set[tuple[str, ...]]
                   ) -> frozenset[tuple[str, int]]:
    """(statement id, access index) of straight-line loads that repeat an earlier one of the
    same elements by the same instances with no store in between (a register block's
    accumulators each initialized from ``bias[m]``): a compiler loads once and reuses the
    value, as :mod:`polyfuse.perf.features` counts a repeated subexpression once."""
    seen: set[tuple[str, str, str]] = set()
    out: set[tuple[str, int]] = set()
    for st in sorted(kernel.statements, key=lambda s: s.order):
        # a loop of one iteration is straight-line code (_loop_nest), but two of them are two
        # passes (a row form's mean and variance loops at a row shorter than its partials):
        # their loads are not one value
        looped = _in_work_item_loop(st.domain, with_barrier) or \
            st.domain.dim(isl.dim_type.set) > len(WORK_ITEM_DIMS) + len(_loop_nest(st.domain))
        for i, acc in enumerate(st.accesses):
            if acc.address_space == "private" or acc.direction != "read" or not acc.exact \
                    or looped:
                continue
            key = (acc.address_space, acc.array,
                   str(acc.relation.reset_tuple_id(isl.dim_type.in_)))
            if key in seen:
                out.add((st.id, i))
            seen.add(key)
        if any(acc.address_space != "private" and acc.direction != "read"
               for acc in st.accesses):
            seen.clear()
    return frozenset(out)


def packed_accesses(kernel: Kernel, with_barrier: set[tuple[str, ...]]
                    ) -> frozenset[tuple[str, int]]:
    """(statement id, access index) of straight-line accesses that a work-item makes to
    consecutive elements: statements of one domain accessing one array at constant offsets
    from each other that form runs of :data:`REGISTER_BLOCK_STATEMENTS` or more (a register
    block's stores ``y[base + i * pitch + j] = acc_i_j``).  A compiler packs them into vector
    accesses, whatever the stride between work-items."""
    groups: dict[tuple[str, str, str], list[tuple[str, int, isl.PwAff]]] = {}
    for st in kernel.statements:
        if _in_work_item_loop(st.domain, with_barrier):
            continue
        for i, acc in enumerate(st.accesses):
            if acc.address_space == "private" or not acc.exact:
                continue
            flat = _flat_index(acc, kernel)
            if flat is not None:
                key = (acc.array, acc.direction, _domain_key(st.domain))
                groups.setdefault(key, []).append((st.id, i, flat))
    out: set[tuple[str, int]] = set()
    for members in groups.values():
        if len(members) < REGISTER_BLOCK_STATEMENTS:
            continue
        base = members[0][2].reset_tuple_id(isl.dim_type.in_)
        offsets = []
        for _, _, flat in members:
            diff = flat.reset_tuple_id(isl.dim_type.in_).sub(base)
            pieces = diff.get_pieces()
            if not diff.is_cst() or len(pieces) != 1:
                break
            offsets.append(int(str(pieces[0][1].get_constant_val())))
        else:
            values = sorted(set(offsets))
            # split into runs of consecutive offsets: each as long as a register block's row
            starts = [v for k, v in enumerate(values) if k == 0 or values[k - 1] != v - 1]
            ends = [v for k, v in enumerate(values)
                    if k == len(values) - 1 or values[k + 1] != v + 1]
            if min(e - b + 1 for b, e in zip(starts, ends)) >= REGISTER_BLOCK_STATEMENTS:
                out.update((sid, i) for sid, i, _ in members)
    return frozenset(out)


def own_pairs(relation: isl.Map) -> isl.Map:
    """Work-item -> the elements it accesses, of an access relation: its statement
    instances' loop dimensions projected out, the work-item ids (:data:`WORK_ITEM_DIMS`, the
    domain's first dimensions) kept.  The number of pairs is what every work-item accesses
    once, summed over the work-items (:attr:`MemRecord.own_footprint`)."""
    n = relation.dim(isl.dim_type.in_)
    k = len(WORK_ITEM_DIMS)
    rel = relation.reset_tuple_id(isl.dim_type.in_)
    if n > k:
        rel = rel.project_out(isl.dim_type.in_, k, n - k)
    return rel


def run_starts(elements: isl.Set) -> Optional[isl.Set]:
    """The elements of a one-dimensional array's ``elements`` that start a run of consecutive
    ones (the element before is not among them); None for an array of several dimensions.
    Their number over the first work-group's footprint is the runs a group walks
    (:attr:`KernelCounts.group_runs`): a CPU's prefetchers follow a long run as a stream,
    many short ones are scattered lines."""
    if elements.dim(isl.dim_type.set) != 1:
        return None
    name = elements.get_tuple_name() or ""
    step = isl.Map(f"{{ {name}[e] -> {name}[e + 1] }}")
    return elements.subtract(elements.apply(step))


#: bytes of a cache line (x86 CPUs and most GPUs' L2)
LINE_BYTES = 64


def line_set(elements: isl.Set, element_bytes: int) -> Optional[isl.Set]:
    """The cache lines of :data:`LINE_BYTES` that a one-dimensional array's ``elements`` lie
    in (the array's start at a line's); None for an array of several dimensions or elements
    that do not tile a line.  A strided access fetches a whole line for each element it uses:
    ``strided`` at a local-id stride of 16 floats touches 16 times the lines of a unit
    stride, at 4 four times (:attr:`MemRecord.footprint_lines`)."""
    if elements.dim(isl.dim_type.set) != 1 or element_bytes <= 0 \
            or LINE_BYTES % element_bytes:
        return None
    name = elements.get_tuple_name() or ""
    per = LINE_BYTES // element_bytes
    to_line = isl.Map(f"{{ {name}[e] -> line[floor(e / {per})] }}")
    return elements.apply(to_line.align_params(elements.get_space()))


def _first_group(domain: isl.Set) -> isl.Set:
    """``domain``'s instances in the first work-group (group ids 0: its first dimensions)."""
    space = domain.get_space()
    fix = isl.Set.universe(space)
    for d in range(len(WORK_ITEM_DIMS) // 2):
        fix = fix.fix_val(isl.dim_type.set, d, isl.Val(0))
    return domain.intersect(fix)


def _domain_key(domain: isl.Set) -> str:
    return str(domain.reset_tuple_id())


def register_block_domains(kernel: Kernel, env: Optional[features.TypeEnv],
                           with_barrier: set[tuple[str, ...]]) -> frozenset[str]:
    """The iteration domains (statement names left out) of the work-item loop bodies that are
    register blocks: :data:`REGISTER_BLOCK_STATEMENTS` or more statements with float ops in
    one body (a register-blocked product's ``acc_i_j += a_i * b_j``).  A CPU compiler packs
    such a body's like statements into vector instructions of one work-item (SLP), where the
    statement of a plain loop runs scalar, one iteration after the other."""
    if env is None:
        return frozenset()
    per_body: dict[str, int] = {}
    for st in kernel.statements:
        if st.node is None or not _in_work_item_loop(st.domain, with_barrier):
            continue
        if features.statement_ops(st.node, env).ops:
            key = _domain_key(st.domain)
            per_body[key] = per_body.get(key, 0) + 1
    return frozenset(k for k, n in per_body.items() if n >= REGISTER_BLOCK_STATEMENTS)


def contiguous_loop_domains(kernel: Kernel, with_barrier: set[tuple[str, ...]]
                            ) -> frozenset[str]:
    """The iteration domains (statement names left out) of work-item loop bodies that walk
    memory along their innermost loop: every ``__global``/``__local`` access of the body
    moves by at most one element per iteration, and a store moves by one (an element-wise
    walk along a row of a block).  A CPU compiler vectorizes such a loop within the
    work-item; a loop walking a column, or reducing into a private accumulator (a float sum
    it may not reorder), runs scalar, one iteration after the other."""
    ok: dict[str, bool] = {}
    stores: set[str] = set()
    vectors: set[str] = set()
    for st in kernel.statements:
        if not _in_work_item_loop(st.domain, with_barrier):
            continue
        key = _domain_key(st.domain)
        inner = st.domain.dim(isl.dim_type.set) - 1
        good = ok.get(key, True)
        for acc in st.accesses:
            if acc.address_space == "private":
                continue
            if _vector_walk(acc, inner):
                vectors.add(key)
                continue
            flat = _flat_index(acc, kernel) if acc.exact else None
            stride = _stride(flat, inner) if flat is not None else None
            good = good and stride in (-1, 0, 1)
            if acc.direction != "read" and stride in (-1, 1):
                stores.add(key)
        ok[key] = good
    return frozenset(k for k, good in ok.items() if good and (k in stores or k in vectors))


def _vector_walk(acc: Access, pos: int) -> bool:
    """Whether ``acc`` is an OpenCL vector access (``vload<n>``/``vstore<n>``: each instance
    ``n`` consecutive elements of a one-dimensional array) that moves by its own width along
    loop dimension ``pos``: a walk in vectors, as a loop over the row in ``float16`` is.  Its
    loop is vectorized whatever it does with the vectors, a reduction into a private vector
    included (the lanes are the program's own, not the compiler's to reorder)."""
    rel = acc.relation
    if not acc.exact or rel.is_single_valued() or rel.dim(isl.dim_type.out) != 1:
        return False
    first = isl.PwMultiAff.from_map(rel.lexmin()).get_pw_aff(0)
    last = isl.PwMultiAff.from_map(rel.lexmax()).get_pw_aff(0)
    spans = {val_to_sympy(aff.get_constant_val()) if aff.is_cst() else None
             for _, aff in last.sub(first).get_pieces()}
    if len(spans) != 1 or None in spans:
        return False
    width = int(spans.pop()) + 1
    return width > 1 and _stride(first, pos) in (width, -width)


def count_kernel(kernel: Kernel, *, subgroup_size: Optional[int] = None,
                 granularity: Optional[str] = None,
                 target: Optional[Target] = None) -> KernelCounts:
    """Exact symbolic counts of one kernel launch (totals over all its work-items).

    ``granularity`` None uses the default granularities per feature (see the module docstring);
    ``"work-item"``, ``"sub-group"`` or ``"work-group"`` applies one to every op, memory and
    barrier record.  ``subgroup_size`` defaults to ``target``'s SIMD width, without a target
    to what the default OpenCL device reports.
    """
    _require_barvinok()
    if granularity is not None and granularity not in GRANULARITIES:
        raise PolyfuseError(f"unknown granularity {granularity!r} (one of "
                            f"{', '.join(GRANULARITIES)})")
    if subgroup_size:
        sg = int(subgroup_size)
    elif target is not None:
        sg = target.simd_width or _FALLBACK_SUBGROUP
    else:
        sg = default_subgroup_size()
    if sg < 1:
        raise PolyfuseError(f"sub-group size must be positive, got {sg}")
    geo = _Geometry.of(kernel, sg)
    counter = _Counter(geo)
    ctx = _size_context(geo)
    notes: list[str] = list(kernel.notes)

    def gflags(gran: str) -> tuple[str, ...]:
        return tuple(geo.flags.get(gran, ()))

    # -- ops
    env = None
    if kernel.ast is not None:
        env = features.TypeEnv(kernel.ast, features.helper_defs(kernel))
    op_gran = granularity or "sub-group"
    op_parts: dict[tuple[str, str], list[isl.PwQPolynomial]] = {}
    op_exact: dict[tuple[str, str], bool] = {}
    op_notes: dict[tuple[str, str], list[str]] = {}
    op_loop: dict[tuple[str, str], list[isl.PwQPolynomial]] = {}
    op_block: dict[tuple[str, str], list[isl.PwQPolynomial]] = {}
    op_block_total: dict[tuple[str, str], list[isl.PwQPolynomial]] = {}
    op_contiguous: dict[tuple[str, str], list[isl.PwQPolynomial]] = {}
    op_vector: dict[tuple[str, str], list[isl.PwQPolynomial]] = {}
    with_barrier = _loops_with_barriers(kernel)
    blocks = register_block_domains(kernel, env, with_barrier)
    along = contiguous_loop_domains(kernel, with_barrier) - blocks
    contiguous = frozenset(st.id for st in kernel.statements
                           if _domain_key(st.domain) in along)
    for st in kernel.statements:
        if env is None or st.node is None:
            continue
        sops = features.statement_ops(st.node, env)
        if not sops.ops:
            continue
        card = counter.instances(st.domain, op_gran)
        looped = _in_work_item_loop(st.domain, with_barrier)
        per_item = counter.instances(st.domain, "work-item") if looped else None
        in_block = looped and _domain_key(st.domain) in blocks
        for key, n in sops.ops.items():
            op_parts.setdefault(key, []).append(card.scale_val(isl.Val(n)))
            if per_item is not None:
                op_loop.setdefault(key, []).append(per_item.scale_val(isl.Val(n)))
                if in_block:
                    op_block.setdefault(key, []).append(per_item.scale_val(isl.Val(n)))
                    op_block_total.setdefault(key, []).append(card.scale_val(isl.Val(n)))
                    if sops.vector_ops.get(key):
                        op_vector.setdefault(key, []).append(
                            per_item.scale_val(isl.Val(sops.vector_ops[key])))
                if st.id in contiguous:
                    op_contiguous.setdefault(key, []).append(per_item.scale_val(isl.Val(n)))
            ex = sops.exact and st.exact_domain
            op_exact[key] = op_exact.get(key, True) and ex
            lst = op_notes.setdefault(key, [])
            for msg in sops.notes + ([] if st.exact_domain else
                                     [f"{st.id} ({st.loc}): domain over-approximated"]):
                if msg not in lst:
                    lst.append(msg)
    if env is not None and kernel.ast is not None:
        notes += features.uncounted_conditions(kernel.ast, [s.node for s in kernel.statements],
                                               env)
    ops = []
    for key in sorted(op_parts):
        qp = _sum(op_parts[key])
        assert qp is not None
        c = Count.of(qp, ctx)
        loop = _sum(op_loop[key]) if key in op_loop else None
        block = _sum(op_block[key]) if key in op_block else None
        block_total = _sum(op_block_total[key]) if key in op_block_total else None
        contig = _sum(op_contiguous[key]) if key in op_contiguous else None
        vector = _sum(op_vector[key]) if key in op_vector else None
        ops.append(OpRecord(key[0], key[1], op_gran, c, op_exact[key] and not c.unbounded,
                            tuple(op_notes[key]) + gflags(op_gran),
                            Count.of(loop, ctx) if loop is not None else None,
                            Count.of(block, ctx) if block is not None else None,
                            Count.of(block_total, ctx) if block_total is not None else None,
                            Count.of(contig, ctx) if contig is not None else None,
                            Count.of(vector, ctx) if vector is not None else None))

    # -- memory
    mem_groups: dict[tuple, dict[str, Any]] = {}
    #: per global array, the union of its exact access ranges (None once one is not exact)
    array_ranges: dict[str, Optional[isl.Set]] = {}
    #: the same of the first work-group's accesses
    group_ranges: dict[str, Optional[isl.Set]] = {}
    repeated = repeated_loads(kernel, with_barrier)
    packed = packed_accesses(kernel, with_barrier)
    #: the iteration domains of nested work-item loops already charged (``nested``)
    nested_domains: set[str] = set()
    for st in kernel.statements:
        for i, acc in enumerate(st.accesses):
            if acc.address_space == "private" or (st.id, i) in repeated:
                continue
            lid, gid = _strides(acc, kernel, geo)
            space = acc.address_space
            if granularity is not None:
                gran = granularity
            elif space == "local":
                gran = "sub-group"
            else:
                uniform = all(d < len(lid) and lid[d] == 0 for d in geo.varies_in_subgroup())
                gran = "sub-group" if uniform else "work-item"
            direction = "load" if acc.direction == "read" else "store"
            # a vload/vstore (one instance, several elements) is a vector access as the
            # register block's packed scalars are
            vector = acc.exact and not acc.relation.is_single_valued()
            key = (space, acc.array, features.numpy_dtype(acc.dtype), direction, lid, gid,
                   acc.exact, gran, (st.id, i) in packed or vector)
            grp = mem_groups.setdefault(key, {"count": [], "wi": [], "ranges": None,
                                              "reason": acc.reason, "loop": [],
                                              "nested": [], "block": [],
                                              "contiguous": [], "own": None})
            dom = acc.relation.domain()
            if acc.exact:
                wi = counter.elements(acc.relation)
                rng = acc.relation.range()
                grp["ranges"] = rng if grp["ranges"] is None else grp["ranges"].union(rng)
                if grp["own"] is not False:
                    grp["own"] = (grp["own"] or []) + [acc.relation]
                if space in ("global", "constant"):
                    prev = array_ranges.get(acc.array, rng)
                    array_ranges[acc.array] = None if prev is None else \
                        (rng if prev is rng else prev.union(rng))
                    first = acc.relation.intersect_domain(_first_group(dom)).range()
                    before = group_ranges.get(acc.array, first)
                    group_ranges[acc.array] = None if before is None else \
                        (first if before is first else before.union(first))
            else:
                if space in ("global", "constant"):
                    array_ranges[acc.array] = None
                    group_ranges[acc.array] = None
                grp["own"] = False
                wi = counter.instances(dom, "work-item")
            grp["wi"].append(wi)
            if _in_work_item_loop(dom, with_barrier):
                grp["loop"].append(wi)
                if _domain_key(st.domain) in blocks:
                    grp["block"].append(wi)
                elif st.id in contiguous:
                    grp["contiguous"].append(wi)
                depth = _work_item_loop_depth(dom, with_barrier)
                # a nest's loop control and index arithmetic are paid per iteration, once
                # for all the accesses of its body (they share the address computation)
                body = _domain_key(dom) if depth > 1 else None
                if body is not None and body not in nested_domains:
                    nested_domains.add(body)
                    grp["nested"].append(counter.instances(dom, "work-item")
                                         .scale_val(isl.Val(depth - 1)))
            grp["count"].append(wi if gran == "work-item" else counter.instances(dom, gran))
    mem = []
    for key, grp in mem_groups.items():
        space, array, dtype, direction, lid, gid, exact, gran, in_run = key
        footprint = None
        if exact and grp["ranges"] is not None and grp["ranges"].is_bounded():
            footprint = _footprint(grp["ranges"], ctx)
        c = Count.of(_sum(grp["count"]), ctx)
        reason = None if exact else grp["reason"]
        if c.unbounded:
            reason = reason or "unbounded: an enclosing loop is not modelled exactly"
        loop = _sum(grp["loop"]) if grp["loop"] else None
        nested = _sum(grp["nested"]) if grp["nested"] else None
        block = _sum(grp["block"]) if grp["block"] else None
        contig = _sum(grp["contiguous"]) if grp["contiguous"] else None
        own = None
        if loop is not None and space in ("global", "constant") and gran == "work-item" \
                and grp["own"]:
            own = _own_footprint(grp["own"], ctx)
        lines = None
        if footprint is not None and space in ("global", "constant"):
            lines = _lines(grp["ranges"], _element_bytes(dtype), ctx)
        mem.append(MemRecord(space, array, dtype, direction, lid, gid, gran, c,
                             Count.of(_sum(grp["wi"]), ctx), footprint,
                             exact and not c.unbounded, reason,
                             Count.of(loop, ctx) if loop is not None else None,
                             Count.of(nested, ctx) if nested is not None else None,
                             Count.of(block, ctx) if block is not None else None,
                             Count.of(contig, ctx) if contig is not None else None,
                             in_run, own, lines))
    mem.sort(key=lambda r: ({"global": 0, "constant": 1, "local": 2}.get(r.space, 3), r.array,
                            r.direction, str(r.lid_strides)))
    array_fp: dict[str, Count] = {}
    for array, rng in sorted(array_ranges.items()):
        fp = _footprint(rng, ctx) if rng is not None and rng.is_bounded() else None
        if fp is not None:
            array_fp[array] = fp
    group_fp: dict[str, Count] = {}
    group_runs: dict[str, Count] = {}
    for array, rng in sorted(group_ranges.items()):
        fp = _footprint(rng, ctx) if rng is not None and rng.is_bounded() else None
        if fp is not None:
            group_fp[array] = fp
            runs = _runs(rng, ctx)
            if runs is not None:
                group_runs[array] = runs

    # -- synchronization
    sync_gran = granularity or "work-item"
    bar: dict[str, list[isl.PwQPolynomial]] = {"barrier_local": [], "barrier_global": []}
    bar_exact = {"barrier_local": True, "barrier_global": True}
    bar_notes: dict[str, list[str]] = {"barrier_local": [], "barrier_global": []}
    for b in kernel.barriers:
        card = counter.instances(b.domain, sync_gran)
        for fence, kind in (("local", "barrier_local"), ("global", "barrier_global")):
            if fence in b.fences:
                bar[kind].append(card)
                if not b.uniform:
                    bar_exact[kind] = False
                    bar_notes[kind].append(f"{b.id} ({b.loc}) may not be reached by every "
                                           "work-item of a group")
    sync = []
    for kind, parts in bar.items():
        qp = _sum(parts)
        c = Count.of(qp, ctx) if qp is not None else Count(sympy.Integer(0))
        sync.append(SyncRecord(kind, sync_gran, c, bar_exact[kind] and not c.unbounded,
                               tuple(bar_notes[kind]) + (gflags(sync_gran) if parts else ())))
    sync.append(SyncRecord("kernel_launch", "launch", Count(sympy.Integer(1))))

    # -- register blocks: one statement's instances per body
    bodies = {_domain_key(st.domain): st.domain for st in kernel.statements
              if _domain_key(st.domain) in blocks}
    block_iters = _sum(counter.instances(d, "work-item") for d in bodies.values())

    kc = KernelCounts(kernel.name, sg, tuple(ops), tuple(mem), tuple(sync), geo.counts(),
                      tuple(geo.params), tuple(notes), dict(kernel.context.values),
                      tuple(v if isinstance(v, int) else None for v in geo.L), array_fp,
                      group_fp, Count.of(block_iters, ctx) if block_iters is not None else None,
                      group_runs)
    return kc.evaluate({})


# ----------------------------------------------------------------------------------------------
# Programs
# ----------------------------------------------------------------------------------------------


def _launch_context(kernel: Kernel, launch: Launch) -> tuple[KernelContext, dict[str, Any]]:
    """The launch's known sizes and scalar arguments, and host expressions of the others."""
    def const(x: Any) -> Optional[int]:
        x = sympy.sympify(x) if x is not None else None
        return int(x) if x is not None and x.is_Integer else None

    wd = launch.work_dim
    local = tuple(const(launch.local_size[d]) if launch.local_size and d < wd else None
                  for d in range(3))
    glob = tuple(const(launch.global_size[d]) if d < wd else None for d in range(3))
    values = []
    symbolic: dict[str, Any] = {}
    for p in kernel.params:
        if p.pointer:
            continue
        try:
            arg = launch.arg(p.index)
        except KeyError:
            continue
        if arg.kind != "scalar" or arg.value is None:
            continue
        v = const(arg.value)
        if v is not None:
            values.append((p.name, v))
        else:
            symbolic[p.name] = sympy.sympify(arg.value)
    for d in range(wd):
        if glob[d] is None:
            symbolic[GLOBAL_SIZE_PARAMS[d]] = sympy.sympify(launch.global_size[d])
        if local[d] is None and launch.local_size:
            symbolic[LOCAL_SIZE_PARAMS[d]] = sympy.sympify(launch.local_size[d])
    return KernelContext(local, glob, tuple(sorted(values))), symbolic


def _bind(c: Count, subs: Mapping[sympy.Symbol, Any], loops: tuple,
          values: Mapping[str, int]) -> Count:
    """A kernel count in host terms, summed over the launch's host loops, then evaluated."""
    e = c.expr.subs(subs) if subs else c.expr
    if not loops and not subs:
        return c.evaluate(values)
    for lp in reversed(loops):
        it = sympy.Symbol(lp.iterator)
        lo = sympy.sympify(lp.lower).subs(_host_subs(values))
        hi = sympy.sympify(lp.upper).subs(_host_subs(values))
        if e.has(it) or any(s.name == lp.iterator for s in e.free_symbols):
            itv = [s for s in e.free_symbols if s.name == lp.iterator]
            if lo.is_Integer and hi.is_Integer and (int(hi) - int(lo)) <= 4096:
                e = sympy.Add(*[e.subs({s: k for s in itv})
                                for k in range(int(lo), int(hi), lp.step)])
            else:
                k = sympy.Symbol("_k", integer=True)
                e = sympy.summation(e.subs({s: lo + lp.step * k for s in itv}),
                                    (k, 0, sympy.ceiling((hi - lo) / lp.step) - 1))
        else:
            e = e * sympy.Max(0, sympy.ceiling((hi - lo) / lp.step))
    return Count(e).evaluate(values)


#: isl operations an exact footprint may take before a containing polyhedron is counted instead
FOOTPRINT_OPERATIONS = 3_000_000
#: existentially quantified variables (divisions) in one disjunct beyond which a footprint is
#: bounded without trying barvinok: the operation quota does not stop barvinok's own work, and
#: a tiled strided 3x3 Conv's input footprint (6 divisions) took 25-35 s of it before the quota
#: tripped, twice per kernel: minutes of a ResNet downsampling block's cold session
FOOTPRINT_MAX_DIVS = 4


def _divisions(s: isl.Set) -> int:
    """The most integer divisions of any disjunct of ``s``: what makes barvinok's counts slow
    (the thresholds :data:`FOOTPRINT_MAX_DIVS` and :data:`OWN_MAX_DIVS`)."""
    return max((b.dim(isl.dim_type.div) for b in s.get_basic_sets()), default=0)


def _footprint(ranges: isl.Set, ctx: Any) -> Optional[Count]:
    """The distinct elements of ``ranges``: exact (barvinok) within
    :data:`FOOTPRINT_OPERATIONS` and :data:`FOOTPRINT_MAX_DIVS`, else those of a polyhedron
    that contains them (its divisions dropped, then its simple hull), an upper bound; ``None``
    when that overruns too.

    The ranges are coalesced first: the union of a register-blocked product's per-column
    ranges (one disjunct per column of the block, each with floor divisions) took barvinok
    minutes per kernel at real size, and coalesces into the whole matrix."""
    try:
        with bounded(FOOTPRINT_OPERATIONS):
            merged = coalesce(ranges)
            if _divisions(merged) <= FOOTPRINT_MAX_DIVS:
                return Count.of(merged.card(), ctx)
    except IslQuotaExceeded:
        pass
    try:
        with bounded(FOOTPRINT_OPERATIONS):
            return Count.of(ranges.remove_divs().simple_hull().card(), ctx)
    except IslQuotaExceeded:
        return None


#: divisions in a disjunct of a work-item's accesses (:func:`own_pairs`) or a group's
#: footprint beyond which the pairs and the runs are not counted: a tiled 3x3 Conv's window
#: (4 divisions) took barvinok 39 s, a depthwise one's (3) 3.6 s, where a row form's (0-1)
#: and a 1x1 Conv's (1-2) take milliseconds
OWN_MAX_DIVS = 2


def _own_footprint(relations: list[isl.Map], ctx: Any) -> Optional[Count]:
    """The (work-item, element) pairs of ``relations`` (:func:`own_pairs`), exact (barvinok)
    within :data:`FOOTPRINT_OPERATIONS` and :data:`OWN_MAX_DIVS`; None past them (the
    re-reads are then all counted as other work-items', as without this count)."""
    try:
        with bounded(FOOTPRINT_OPERATIONS):
            pairs = own_pairs(relations[0])
            for rel in relations[1:]:
                pairs = pairs.union(own_pairs(rel))
            wrapped = coalesce(pairs.wrap())
            if not wrapped.is_bounded() or _divisions(wrapped) > OWN_MAX_DIVS:
                return None
            return Count.of(wrapped.card(), ctx)
    except IslQuotaExceeded:
        return None


def _runs(elements: isl.Set, ctx: Any) -> Optional[Count]:
    """How many runs of consecutive elements ``elements`` holds (:func:`run_starts`), exact
    within :data:`FOOTPRINT_OPERATIONS` and :data:`OWN_MAX_DIVS`; None past them."""
    try:
        with bounded(FOOTPRINT_OPERATIONS):
            merged = coalesce(elements)  # a union of many accesses' ranges: subtract is slow
            if _divisions(merged) > OWN_MAX_DIVS:
                return None
            starts = run_starts(merged)
            if starts is None:
                return None
            starts = coalesce(starts)
            if _divisions(starts) > OWN_MAX_DIVS:
                return None
            return Count.of(starts.card(), ctx)
    except IslQuotaExceeded:
        return None


def _element_bytes(dtype: str) -> int:
    """Bytes of one element of a counts dtype (``float32`` 4, ``float32x4`` 16; 0 unknown)."""
    m = re.fullmatch(r"[a-z]+?(\d+)(?:x(\d+))?", dtype)
    if not m:
        return 0
    return int(m.group(1)) // 8 * int(m.group(2) or 1)


def _lines(elements: isl.Set, element_bytes: int, ctx: Any) -> Optional[Count]:
    """How many cache lines ``elements`` lie in (:func:`line_set`), exact within
    :data:`FOOTPRINT_OPERATIONS` and :data:`OWN_MAX_DIVS`; None past them, and for symbolic
    sizes: barvinok's parametric count of the lines (a floor division of symbolic bounds)
    took about 2 s per access of a two-deep loop nest, where the same count at a launch's
    concrete sizes (every launch of a program is counted so) takes milliseconds."""
    if elements.dim(isl.dim_type.param):
        return None
    try:
        with bounded(FOOTPRINT_OPERATIONS):
            merged = coalesce(elements)
            if _divisions(merged) > OWN_MAX_DIVS:
                return None
            lines = line_set(merged, element_bytes)
            if lines is None:
                return None
            lines = coalesce(lines)
            if _divisions(lines) > OWN_MAX_DIVS + 1:
                return None
            return Count.of(lines.card(), ctx)
    except IslQuotaExceeded:
        return None


def _content_key(kernel: Kernel) -> str:
    """What a kernel's counts depend on, as text: its source with its own name blanked out
    when it calls no other function and has no file-scope declarations (the kernels of a
    model's repeated layers differ only in their names, so a 12-layer encoder is counted
    once per distinct kernel, not per layer), else its name (kernels of several files may
    share a helper's name but not its body)."""
    if set(kernel.helpers) - {kernel.name} or kernel.declarations or not kernel.source:
        return kernel.name
    anonymous = re.sub(rf"\b{re.escape(kernel.name)}\b", "\0", kernel.source)
    return "\0".join((anonymous, *kernel.build_options))


def _host_subs(values: Mapping[str, int]) -> dict[sympy.Symbol, int]:
    return {sympy.Symbol(k): v for k, v in values.items()}


#: the counts of a kernel at a launch's sizes, by its content (:func:`_content_key`): identical
#: layers, and the same program counted again (a session's form prediction, then the weighing
#: of its fused groups), are counted once per process
_PROGRAM_COUNTS: dict[tuple[Any, ...], KernelCounts] = {}
_PROGRAM_COUNTS_SIZE = 4096


def count_program(program: Program, *, subgroup_size: Optional[int] = None,
                  granularity: Optional[str] = None,
                  values: Optional[Mapping[str, int]] = None,
                  target: Optional[Target] = None) -> dict[int, KernelCounts]:
    """Counts per launch id, each kernel specialized with its launch's known sizes and scalars.

    A launch inside host loops is totalled over every instance (``kernel_launch`` counts them;
    footprints are summed per instance too, so the AFR is that of one instance on average);
    counts stay symbolic in host values that are unknown (``values`` may fix them).
    """
    from polyfuse.frontend.opencl import specialize_if_needed

    values = dict(values or {})
    out: dict[int, KernelCounts] = {}
    by_name: dict[tuple[Any, ...], KernelCounts] = {}  # kernels known by name only
    for launch in program.launches:
        kernel0 = program.kernels.get(launch.kernel)
        if kernel0 is None:
            raise PolyfuseError(f"launch {launch.id}: unknown kernel {launch.kernel!r}")
        ctx, symbolic = _launch_context(kernel0, launch)
        content = _content_key(kernel0)
        memo = by_name if content == kernel0.name else _PROGRAM_COUNTS
        key = (content, kernel0.context, ctx, subgroup_size, granularity, target)
        kc = memo.get(key)
        if kc is None:
            kernel = specialize_if_needed(kernel0, ctx)
            kc = count_kernel(kernel, subgroup_size=subgroup_size, granularity=granularity,
                              target=target)
            if len(memo) >= _PROGRAM_COUNTS_SIZE:
                memo.clear()
            memo[key] = kc
        elif kc.kernel != kernel0.name:
            kc = replace(kc, kernel=kernel0.name)
        subs = {int_symbol(k): v for k, v in symbolic.items()}
        loops = tuple(launch.loops)

        def bind(c: Count, subs: dict = subs, loops: tuple = loops) -> Count:
            if not subs and not loops:
                return c.evaluate(values)
            return _bind(c, subs, loops, values)

        inst = Count(sympy.Integer(1))
        kc = replace(
            kc,
            ops=tuple(replace(r, count=bind(r.count),
                              loop_count=None if r.loop_count is None else bind(r.loop_count),
                              block_count=None if r.block_count is None else
                              bind(r.block_count),
                              block_total=None if r.block_total is None else
                              bind(r.block_total),
                              contiguous_count=None if r.contiguous_count is None else
                              bind(r.contiguous_count),
                              vector_count=None if r.vector_count is None else
                              bind(r.vector_count))
                      for r in kc.ops),
            mem=tuple(replace(r, count=bind(r.count), accesses=bind(r.accesses),
                              footprint=None if r.footprint is None else
                              bind(r.footprint),
                              loop_accesses=None if r.loop_accesses is None else
                              bind(r.loop_accesses),
                              nested_loop_accesses=None if r.nested_loop_accesses is None
                              else bind(r.nested_loop_accesses),
                              block_accesses=None if r.block_accesses is None else
                              bind(r.block_accesses),
                              contiguous_accesses=None if r.contiguous_accesses is None else
                              bind(r.contiguous_accesses),
                              own_footprint=None if r.own_footprint is None else
                              bind(r.own_footprint),
                              footprint_lines=None if r.footprint_lines is None else
                              bind(r.footprint_lines)) for r in kc.mem),
            sync=tuple(replace(r, count=bind(r.count if r.kind != "kernel_launch" else inst))
                       for r in kc.sync),
            geometry={k: _bind(c, subs, (), values) for k, c in kc.geometry.items()},
            values={**kc.values, **values},
            array_footprints={k: bind(c) for k, c in kc.array_footprints.items()},
            block_iterations=None if kc.block_iterations is None else
            bind(kc.block_iterations),
            group_footprints={k: bind(c) for k, c in kc.group_footprints.items()},
            group_runs={k: bind(c) for k, c in kc.group_runs.items()},
            notes=kc.notes + ((f"launch {launch.id}: totals over every instance of its host "
                               "loops",) if loops else ()),
        )
        out[launch.id] = kc
    return out


# ----------------------------------------------------------------------------------------------
# CLI helpers
# ----------------------------------------------------------------------------------------------


def _specialize_with(kernel: Kernel, params: Mapping[str, Any]) -> Kernel:
    """``kernel`` re-extracted with the sizes and integer scalars that ``params`` fix.

    Evaluating the symbolic count afterwards is not enough: with an unknown local size the
    kernel's work-item domain is over-approximated (``g_d`` and ``l_d`` range independently, as
    ``g_d*_ls_d + l_d`` is not affine), so the count at given sizes would be too large by the
    local size; specializing first gives the exact domain.
    """
    local = tuple(params.get(LOCAL_SIZE_PARAMS[d]) for d in range(3))
    glob = tuple(params.get(GLOBAL_SIZE_PARAMS[d]) for d in range(3))
    scalars = {p.name: params[p.name] for p in kernel.params
               if not p.pointer and p.name in params and isinstance(params[p.name], int)}
    if not scalars and all(x is None for x in local + glob):
        return kernel
    for d in range(3):
        if local[d] is not None and glob[d] is not None and glob[d] % local[d]:
            raise PolyfuseError(f"kernel {kernel.name}: {GLOBAL_SIZE_PARAMS[d]}={glob[d]} is "
                                f"not a multiple of {LOCAL_SIZE_PARAMS[d]}={local[d]}")
    from polyfuse.frontend.opencl import specialize_if_needed

    ctx = KernelContext(local, glob, tuple(sorted(scalars.items())))  # type: ignore[arg-type]
    return specialize_if_needed(kernel, ctx)


def count_report(kernels_path: str, host: Optional[str] = None, kernel: Optional[str] = None,
                 params: Optional[Mapping[str, int]] = None, *,
                 subgroup_size: Optional[int] = None,
                 granularity: Optional[str] = None,
                 program: Optional[Program] = None,
                 target: Optional[Target] = None) -> dict[str, Any]:
    """The JSON of ``polyfuse count``: per kernel, or per launch when a host program is given.

    ``params`` fix symbolic values: kernel parameters (``n``, ``_gs0``) without a host, host
    values (read from ``argv``) with one.  ``program`` is the already loaded host program.
    """
    _require_barvinok()
    params = dict(params or {})
    if host is None:
        from polyfuse.frontend.opencl import parse_kernels

        kernels = parse_kernels(kernels_path)
        if kernel is not None and kernel not in kernels:
            raise PolyfuseError(f"no kernel {kernel!r} (kernels: {', '.join(kernels)})",
                                kernels_path)
        out = []
        for name, k in kernels.items():
            if kernel is not None and name != kernel:
                continue
            k = _specialize_with(k, params)
            kc = count_kernel(k, subgroup_size=subgroup_size, granularity=granularity,
                              target=target)
            out.append(kc.to_json(params))
        return {"file": kernels_path, "kernels": out}
    from polyfuse.frontend.host import load_opencl

    if program is None:
        program = load_opencl(kernels_path, host=host, params=params)
    if kernel is not None and kernel not in program.kernels:
        raise PolyfuseError(f"no kernel {kernel!r} (kernels: {', '.join(program.kernels)})",
                            kernels_path)
    counts = count_program(program, subgroup_size=subgroup_size, granularity=granularity,
                           values=params, target=target)
    launches = []
    for launch in program.launches:
        if kernel is not None and launch.kernel != kernel:
            continue
        d = counts[launch.id].to_json()
        launches.append({"id": launch.id, **d})
    return {"file": kernels_path, "host": host, "launches": launches}


#: The key printed above every ``polyfuse count`` table (and in its ``--help``).
COLUMNS_HELP = """\
columns: feature = op NAME DTYPE | SPACE load/store ARRAY DTYPE | barrier/launch;
  lid{d:s} = stride s, in elements, between work-items whose local id differs by 1 in
  dimension d (0: same element, ?: not affine); gid{d:s} = the same between work-groups;
  afr = access-to-footprint ratio (accesses / distinct elements; 1: each read once);
  (may) = over-approximated (data-dependent subscript or unknown local size: an upper bound);
  per = the unit that counts once (work-item: every element access; sub-group/work-group:
  once per unit however many lanes take part); count = the total over the launch (a formula
  in the kernel's sizes where they are unknown: give them with --param or --host)"""


def _cell(d: Mapping[str, Any]) -> str:
    if "value" in d:
        v = d["value"]
        return f"{v:.4g}" if isinstance(v, float) else str(v)
    return readable(d.get("count"))


def format_count_table(report: Mapping[str, Any]) -> str:
    """A plain-text table of :func:`count_report`'s result (one block per kernel or launch).

    The count column shows the value where the sizes fix it, the formula otherwise (``--json``
    has both).
    """
    lines: list[str] = [COLUMNS_HELP, ""]
    entries = report.get("launches")
    if entries is None:
        entries = report.get("kernels", [])
    for e in entries:
        title = f"launch {e['id']}: {e['kernel']}" if "id" in e else f"kernel {e['kernel']}"
        geo = e.get("geometry", {})
        lines.append(title + "  (" + ", ".join(f"{k.replace('_', ' ')} {_cell(v)}"
                                              for k, v in geo.items())
                     + f", sub-group size {e.get('subgroup_size')})")
        rows: list[tuple[str, ...]] = [("feature", "per", "count")]
        for r in e["ops"]:
            rows.append((f"op {r['op']} {r['dtype']}", r["granularity"], _count_text(r)))
        for r in e["mem"]:
            ls = ",".join(f"{k}:{_stride_text(v)}" for k, v in r["lid_strides"].items())
            gs = ",".join(f"{k}:{_stride_text(v)}" for k, v in r["gid_strides"].items())
            afr = r.get("afr_value", r.get("afr"))
            afr_s = "?" if afr is None else f"{afr:.3g}" if isinstance(afr, float) else str(afr)
            feat = (f"{r['space']} {r['direction']} {r['array']} {r['dtype']} "
                    f"lid{{{ls}}} gid{{{gs}}} afr {afr_s}")
            if not r["exact"]:
                feat += " (may)"
            rows.append((feat, r["granularity"], _count_text(r)))
        for kind, r in e["sync"].items():
            rows.append((kind, r["granularity"], _count_text(r)))
        widths = [max(len(row[i]) for row in rows) for i in range(2)]
        for row in rows:
            # a count with several cases: one case per line, under the count column
            first, *more = row[2].split("; ")
            lines.append("  " + "  ".join(c.ljust(w) for c, w in
                                          zip((*row[:2], first), widths + [0])).rstrip()
                         + (";" if more else ""))
            pad = " " * (2 + sum(widths) + 4)
            lines += [pad + case + (";" if k < len(more) - 1 else "")
                      for k, case in enumerate(more)]
        for n in e.get("notes", []):
            lines.append(f"  note: {n}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _count_text(r: Mapping[str, Any]) -> str:
    """The value when known (``<= v`` for an upper bound), else the formula, readable
    (``--json`` keeps the exact one)."""
    if "value" not in r:
        text = readable(r["count"])
    else:
        v = r["value"]
        text = f"{v:.6g}" if isinstance(v, float) else str(v)
    return text if r.get("exact", True) else f"<= {text}"


def _stride_text(v: Any) -> str:
    return "?" if v is None else str(v)
