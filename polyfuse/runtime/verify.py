"""Check one execution against another: the fused program against the unfused one.

Fusion must never change results (docs/ARCHITECTURE.md, "Correctness"), but it may legally change
floating-point rounding:
a fused kernel can evaluate the same expression in another order, keep intermediates in registers
instead of rounding them through memory, or let the compiler contract ``a*b + c`` into an fma.
So floating-point buffers are compared with a tolerance (``|c - r| <= atol + rtol * |r|``, as
``numpy.isclose``), with NaN/inf required at the same positions; integer buffers must be equal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import pyopencl as cl

from polyfuse.core.program import PolyfuseError, Program
from polyfuse.core.watchdog import stage
from polyfuse.runtime.budget import check_run_budget, small_instance
from polyfuse.runtime.device import DeviceSpec, get_context
from polyfuse.runtime.execute import RunResult, run_program

_FLOAT_REASON = ("{dt}: fusion may reorder or contract (fma) operations, so results may differ "
                 "in the last bits")
_INT_REASON = "{dt}: compared exactly"


@dataclass(frozen=True)
class BufferCheck:
    """The comparison of one buffer; ``first_mismatch`` is the first bad element index."""

    name: str
    dtype: str
    ok: bool
    elements: int
    mismatches: int
    max_abs_err: float
    max_rel_err: float
    first_mismatch: Optional[int] = None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "ok": self.ok,
                "elements": self.elements, "mismatches": self.mismatches,
                "max_abs_err": self.max_abs_err, "max_rel_err": self.max_rel_err,
                "first_mismatch": self.first_mismatch, "reason": self.reason}


@dataclass(frozen=True)
class Verification:
    """Whether a candidate run matches a reference run, buffer by buffer.

    ``max_abs_err``/``max_rel_err`` are over elements finite in both runs (so always finite;
    the relative error only over reference elements larger than ``atol`` in magnitude);
    non-finite mismatches (NaN against a number) are counted in the per-buffer ``mismatches``.
    """

    ok: bool
    reference: str
    max_abs_err: float
    max_rel_err: float
    buffers: tuple[BufferCheck, ...]
    tolerance_reason: str
    rtol: float
    atol: float
    #: buffers present in only one of the runs (not compared)
    skipped: tuple[str, ...] = ()
    #: values :func:`verify_programs` chose for sizes left symbolic (empty: none were)
    instance: Mapping[str, int] = field(default_factory=dict)

    @property
    def failed(self) -> tuple[BufferCheck, ...]:
        return tuple(b for b in self.buffers if not b.ok)

    def summary(self) -> str:
        """One line for reports and errors."""
        at = (" at " + ", ".join(f"{k}={v}" for k, v in self.instance.items())
              if self.instance else "")
        if self.ok:
            return (f"ok against {self.reference}{at}: {len(self.buffers)} buffer(s), max abs "
                    f"err {self.max_abs_err:.3g}, max rel err {self.max_rel_err:.3g}")
        bad = "; ".join(f"{b.name}: {b.reason}" for b in self.failed)
        return f"MISMATCH against {self.reference}{at}: {bad}"

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "reference": self.reference, "max_abs_err": self.max_abs_err,
                "max_rel_err": self.max_rel_err, "rtol": self.rtol, "atol": self.atol,
                "tolerance_reason": self.tolerance_reason,
                "buffers": [b.to_dict() for b in self.buffers], "skipped": list(self.skipped),
                **({"instance": dict(self.instance)} if self.instance else {})}


def compare_arrays(name: str, ref: np.ndarray, cand: np.ndarray, *, rtol: float = 1e-4,
                   atol: float = 1e-5) -> BufferCheck:
    """Compare one buffer: tolerance for floats, exact for integers, NaN positions must match."""
    ref = np.asarray(ref).ravel()
    cand = np.asarray(cand).ravel()
    dt = str(ref.dtype)
    if ref.shape != cand.shape:
        return BufferCheck(name, dt, False, ref.size, max(ref.size, cand.size), 0.0, 0.0, 0,
                           f"{ref.size} elements in the reference, {cand.size} in the candidate")
    if ref.size == 0:
        return BufferCheck(name, dt, True, 0, 0, 0.0, 0.0)
    if ref.dtype == cand.dtype and np.array_equal(ref, cand):
        # equal elements (a buffer no launch wrote, an exact rewrite): no error to measure,
        # and the float64 copies below cost seconds on a buffer of hundreds of MB
        return BufferCheck(name, dt, True, ref.size, 0, 0.0, 0.0)
    if ref.dtype.kind in "biu" and cand.dtype.kind in "biu":
        bad = ref != cand
        diff = np.abs(ref.astype(np.float64) - cand.astype(np.float64))
        abs_err = float(diff.max())
        rel_err = float((diff / np.maximum(np.abs(ref.astype(np.float64)), 1.0)).max())
    else:
        r = ref.astype(np.float64)
        c = cand.astype(np.float64)
        both = np.isfinite(r) & np.isfinite(c)
        with np.errstate(invalid="ignore", over="ignore"):
            close = np.isclose(c, r, rtol=rtol, atol=atol, equal_nan=True)
        bad = ~close
        diff = np.abs(r - c)[both]
        abs_err = float(diff.max()) if diff.size else 0.0
        mag = np.abs(r[both])
        big = mag > atol  # elements near 0 are judged by atol alone
        rel_err = float((diff[big] / mag[big]).max()) if big.any() else 0.0
    n_bad = int(np.count_nonzero(bad))
    if n_bad == 0:
        return BufferCheck(name, dt, True, ref.size, 0, abs_err, rel_err)
    first = int(np.flatnonzero(bad)[0])
    how = "exact compare" if ref.dtype.kind in "biu" else f"rtol={rtol:g}, atol={atol:g}"
    reason = (f"{n_bad} of {ref.size} elements differ ({how}); first at [{first}]: "
              f"reference {ref[first]!r}, candidate {cand[first]!r}")
    return BufferCheck(name, dt, False, ref.size, n_bad, abs_err, rel_err, first, reason)


def compare_runs(
    reference: RunResult,
    candidate: RunResult,
    *,
    buffers: Optional[Sequence[str]] = None,
    rtol: float = 1e-4,
    atol: float = 1e-5,
    label: str = "unfused",
) -> Verification:
    """Compare the final root buffers of two runs, matched by name.

    ``buffers`` restricts the comparison (each must exist in both runs); by default every buffer
    present in both is compared and the others are listed in ``skipped``.  ``label`` names the
    reference (``unfused``, ``onnxruntime``).
    """
    if buffers is None:
        names = sorted(set(reference.buffers) & set(candidate.buffers))
        skipped = tuple(sorted(set(reference.buffers) ^ set(candidate.buffers)))
    else:
        names = list(buffers)
        skipped = ()
        for n in names:
            for what, run in (("reference", reference), ("candidate", candidate)):
                if n not in run.buffers:
                    raise PolyfuseError(f"buffer {n!r} is not in the {what} run ({run.program}); "
                                        f"it has {', '.join(sorted(run.buffers)) or 'none'}")
    checks = tuple(compare_arrays(n, reference.buffers[n], candidate.buffers[n], rtol=rtol,
                                  atol=atol) for n in names)
    reasons: list[str] = []
    for n in names:
        dt = reference.buffers[n].dtype
        text = (_FLOAT_REASON if dt.kind == "f" else _INT_REASON).format(dt=dt)
        if text not in reasons:
            reasons.append(text)
    return Verification(
        ok=all(c.ok for c in checks),
        reference=label,
        max_abs_err=max((c.max_abs_err for c in checks), default=0.0),
        max_rel_err=max((c.max_rel_err for c in checks), default=0.0),
        buffers=checks,
        tolerance_reason="; ".join(reasons) or "no buffers compared",
        rtol=rtol,
        atol=atol,
        skipped=skipped,
    )


def random_run_stage(program: Program, label: str) -> str:
    """What a run on random contents reports as its stage: a native crash in it (a kernel
    that indexes its buffers with values it reads from them, sent outside them by random
    ones) then names the run, and such a kernel and where it reads the index."""
    what = f"running the {label} program on random buffer contents"
    for op in program.launches:
        k = program.kernels.get(op.kernel)
        hit = next((a for a in k.accesses if not a.exact and a.reason and
                    "data-dependent" in a.reason), None) if k is not None else None
        if hit is not None:
            where = f" ({hit.loc.file}:{hit.loc.line})" if hit.loc is not None else ""
            return (f"{what}; kernel '{k.name}' indexes its buffers with values it reads from "
                    f"memory{where}, which random contents may send outside them")
    return what


def verify_programs(
    reference_program: Program,
    candidate_program: Program,
    *,
    params: Optional[Mapping[str, int]] = None,
    seed: int = 0,
    buffers: Optional[Sequence[str]] = None,
    device: DeviceSpec = None,
    rtol: float = 1e-4,
    atol: float = 1e-5,
    label: str = "unfused",
    ctx: Optional[cl.Context] = None,
    queue: Optional[cl.CommandQueue] = None,
) -> Verification:
    """Run both programs from the same initial contents and compare their final buffers.

    The candidate starts from exactly the reference run's initial contents for every root
    buffer it shares by name (and the same seed for the others), so a fused program that drops
    or adds intermediates still sees the same inputs.  Sizes ``params`` leave symbolic get a
    small instance, as ``polyfuse fuse --verify`` picks one (:func:`small_instance`; the values
    are in ``Verification.instance``).
    """
    instance = small_instance(reference_program, params) if reference_program.launches else {}
    params = {**(params or {}), **instance}
    check_run_budget(reference_program, params, runs=2, what="verification")
    check_run_budget(candidate_program, params, runs=2, what="verification")
    if queue is None:
        ctx, queue = (ctx, None) if ctx is not None else get_context(device)
    with stage(random_run_stage(reference_program, label)):
        ref = run_program(reference_program, params=params, seed=seed, ctx=ctx, queue=queue)
    shared = {n: a for n, a in ref.initial.items()
              if n in candidate_program.buffers
              and candidate_program.root(n)[0] == n}
    with stage(random_run_stage(candidate_program, "candidate")):
        cand = run_program(candidate_program, params=params, seed=seed, inputs=shared,
                           ctx=ctx, queue=queue)
    result = compare_runs(ref, cand, buffers=buffers, rtol=rtol, atol=atol, label=label)
    return dataclasses.replace(result, instance=instance) if instance else result


__all__ = ["BufferCheck", "Verification", "compare_arrays", "compare_runs", "random_run_stage",
           "verify_programs"]
