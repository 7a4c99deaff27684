"""``erf`` and ``tanh`` as rational polynomials: plain arithmetic the device compiler vectorizes.

Why: PoCL's built-in ``erf`` and ``tanh`` run one element at a time (about 50 and 15 ns per
element on this CPU), which made an Erf node of 1024 elements cost more than the matrix products
around it.  The rational forms below (the minimax approximations Eigen and XLA use for float32)
are within 4e-7 absolute and relative of the exact functions over all floats: far inside the
1e-4 relative / 1e-5 absolute agreement the outputs are checked to.  NaN stays NaN: the clamps
are comparisons, which a NaN fails, not ``fmin``/``fmax``, which would drop it.  The results are
expressions of the argument with no memory access, so the front-end models their kernels as
before.
"""

from __future__ import annotations

from collections.abc import Sequence

#: erf: x * P(x^2) / Q(x^2) on x clamped to [-4, 4] (erf is +-1 in float32 beyond)
_ERF_P = ("-2.72614225801306e-10f", "2.77068142495902e-08f", "-2.10102402082508e-06f",
          "-5.69250639462346e-05f", "-7.34990630326855e-04f", "-2.95459980854025e-03f",
          "-1.60960333262415e-02f")
_ERF_Q = ("-1.45660718464996e-05f", "-2.13374055278905e-04f", "-1.68282697438203e-03f",
          "-7.37332916720468e-03f", "-1.42647390514189e-02f")
#: tanh: x * P(x^2) / Q(x^2) on x clamped to [-7.9053111, 7.9053111] (+-1 in float32 beyond)
_TANH_P = ("-2.76076847742355e-16f", "2.00018790482477e-13f", "-8.60467152213735e-11f",
           "5.12229709037114e-08f", "1.48572235717979e-05f", "6.37261928875436e-04f",
           "4.89352455891786e-03f")
_TANH_Q = ("1.19825839466702e-06f", "1.18534705686654e-04f", "2.26843463243900e-03f",
           "4.89352518554385e-03f")


def _clamp(v: str, bound: str) -> str:
    return f"({v} > {bound} ? {bound} : {v} < -{bound} ? -{bound} : {v})"


def _horner(coeffs: Sequence[str], x2: str) -> str:
    acc = coeffs[0]
    for c in coeffs[1:]:
        acc = f"({acc} * {x2} + {c})"
    return acc


def _rational(v: str, bound: str, p: Sequence[str], q: Sequence[str]) -> str:
    x = _clamp(v, bound)
    x2 = f"({x} * {x})"
    return f"({x} * {_horner(p, x2)} / {_horner(q, x2)})"


def erf(v: str) -> str:
    """A C expression for erf of the expression ``v`` (a simple name, it is repeated)."""
    return _rational(v, "4.0f", _ERF_P, _ERF_Q)


def tanh(v: str) -> str:
    """A C expression for tanh of the expression ``v`` (a simple name, it is repeated)."""
    return _rational(v, "7.90531110763549805f", _TANH_P, _TANH_Q)


__all__ = ["erf", "tanh"]
