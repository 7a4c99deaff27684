"""The one table of C / OpenCL C scalar types: sizes, kinds, spellings and numpy dtypes.

Every stage that needs to know what ``unsigned int``, ``float4`` or ``cl_ulong`` is reads it
here: the kernel front-end (element types and their sizes), the UAR (bytes per access), the
runtime (numpy dtypes of buffers), the brute-force interpreter and auto-parallelization.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import numpy as np


@dataclass(frozen=True)
class Scalar:
    """A scalar type under its canonical OpenCL C name."""

    name: str
    #: bytes on an OpenCL device (``size_t`` and pointers are 64-bit, as on every device polyfuse
    #: targets)
    size: int
    #: ``"int"`` (signed), ``"uint"`` (unsigned), ``"float"`` or ``"bool"``
    kind: str

    @property
    def floating(self) -> bool:
        return self.kind == "float"

    @property
    def signed(self) -> bool:
        return self.kind in ("int", "float")

    @property
    def integer(self) -> bool:
        return self.kind != "float"

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype a buffer of this type holds (``bool`` is one byte)."""
        if self.kind == "float":
            return np.dtype(f"float{8 * self.size}")
        if self.kind == "bool":
            return np.dtype(np.uint8)
        return np.dtype(f"{'u' if self.kind == 'uint' else ''}int{8 * self.size}")


#: the scalar types of OpenCL C by canonical name
SCALARS: dict[str, Scalar] = {s.name: s for s in (
    Scalar("bool", 1, "bool"),
    Scalar("char", 1, "int"), Scalar("uchar", 1, "uint"),
    Scalar("short", 2, "int"), Scalar("ushort", 2, "uint"),
    Scalar("int", 4, "int"), Scalar("uint", 4, "uint"),
    Scalar("long", 8, "int"), Scalar("ulong", 8, "uint"),
    Scalar("half", 2, "float"), Scalar("float", 4, "float"), Scalar("double", 8, "float"),
    Scalar("size_t", 8, "uint"), Scalar("ptrdiff_t", 8, "int"),
    Scalar("intptr_t", 8, "int"), Scalar("uintptr_t", 8, "uint"),
)}

#: other spellings of the scalar types: C's, and the OpenCL host API's ``cl_*`` types
ALIASES: dict[str, str] = {
    "unsigned int": "uint", "unsigned": "uint", "unsigned char": "uchar",
    "unsigned short": "ushort", "unsigned short int": "ushort",
    "unsigned long": "ulong", "unsigned long int": "ulong", "signed int": "int", "signed": "int",
    "long int": "long", "long long": "long", "long long int": "long",
    "unsigned long long": "ulong", "unsigned long long int": "ulong",
    "signed char": "char", "schar": "char", "short int": "short", "_Bool": "bool",
    **{f"cl_{t}": t for t in ("char", "uchar", "short", "ushort", "int", "uint", "long", "ulong",
                              "half", "float", "double")},
}

#: vector widths of OpenCL C (a 3-vector takes the room of a 4-vector)
VECTOR_WIDTHS = (2, 3, 4, 8, 16)
_VECTOR = re.compile(r"([a-z_]+?)(2|3|4|8|16)")
_QUALIFIERS = re.compile(r"\b(const|volatile|restrict|__restrict)\b")


def standard(s: Scalar) -> Scalar:
    """The standard scalar type of ``s``'s size and kind (``size_t`` -> ``ulong``)."""
    return next(t for t in SCALARS.values() if t.size == s.size and t.kind == s.kind)


def spellings() -> dict[str, Scalar]:
    """Every name of a scalar type (canonical or alias) and the scalar it names."""
    return {**SCALARS, **{alias: SCALARS[name] for alias, name in ALIASES.items()}}


def normalize(name: str) -> str:
    """A type name without qualifiers, single-spaced, and under its canonical name when it is a
    scalar (``const unsigned  int`` -> ``uint``)."""
    t = " ".join(_QUALIFIERS.sub(" ", name).split())
    return ALIASES.get(t, t)


def scalar(name: str) -> Optional[Scalar]:
    """The scalar type ``name`` spells, or None."""
    return SCALARS.get(normalize(name))


def vector(name: str) -> Optional[tuple[Scalar, int]]:
    """``(element type, width)`` of a scalar or vector type (width 1 for a scalar), or None."""
    t = normalize(name)
    if t in SCALARS:
        return SCALARS[t], 1
    m = _VECTOR.fullmatch(t)
    if m and ALIASES.get(m.group(1), m.group(1)) in SCALARS:
        return SCALARS[ALIASES.get(m.group(1), m.group(1))], int(m.group(2))
    return None


def size_of(name: str) -> Optional[int]:
    """Bytes of a scalar or vector type (a 3-vector takes the room of 4), or None."""
    v = vector(name)
    if v is None:
        return None
    elem, n = v
    return elem.size * (4 if n == 3 else n)


def is_integer(name: str) -> bool:
    """True for integer (and boolean) scalar types, however spelled (``unsigned long int``)."""
    t = normalize(name)
    s = SCALARS.get(t) or (scalar(t.split()[-1]) if t else None)
    return s is not None and s.integer


def numpy_dtype(name: str) -> Optional[np.dtype]:
    """numpy dtype of the elements of a scalar or vector type (``float4`` -> float32)."""
    v = vector(name)
    return v[0].dtype if v is not None else None
