"""The one table of C / OpenCL C scalar types: sizes, kinds, spellings and numpy dtypes.

Every stage that needs to know what ``unsigned int``, ``float4`` or ``cl_ulong`` is reads it
here: the kernel front-end (element types and their sizes), the UAR (bytes per access), the
runtime (numpy dtypes of buffers), the brute-force interpreter and auto-parallelization.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
from pycparser import c_ast

from polyfuse.c import preprocessor, syntax


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
    "int8_t": "char", "uint8_t": "uchar", "int16_t": "short", "uint16_t": "ushort",
    "int32_t": "int", "uint32_t": "uint", "int64_t": "long", "uint64_t": "ulong",
    **{f"cl_{t}": t for t in ("char", "uchar", "short", "ushort", "int", "uint", "long", "ulong",
                              "half", "float", "double")},
}

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


def type_name(node: c_ast.Node) -> str:
    """The base type name of a declaration type (``float``, ``uint``, ``float4``)."""
    while not isinstance(node, (c_ast.IdentifierType, c_ast.Struct, c_ast.Union, c_ast.Enum)):
        node = node.type
    if isinstance(node, c_ast.IdentifierType):
        name = " ".join(node.names)
        return ALIASES.get(name, name)
    return f"{type(node).__name__.lower()} {node.name}"


def resolve_typedefs(ast: c_ast.FileAST) -> dict[str, int]:
    """Replace the kernels' scalar typedefs by their types, in place (``typedef float
    DATA_TYPE;`` makes every ``DATA_TYPE`` a ``float``); the sizes of the file's struct types
    (``box_str``, ``struct box_str``), which the kernel records keep.

    Element types are read by name; a typedef name would be an unknown type.  polyfuse's own
    header (``opencl_c.h``) is left alone: its aliases are the OpenCL type names.
    """
    scalars: dict[str, list[str]] = {}
    structs: dict[str, int] = {}
    for ext in ast.ext:
        if not isinstance(ext, (c_ast.Typedef, c_ast.Decl)) or preprocessor.is_polyfuse_header(ext):
            continue
        t = ext.type
        inner = t.type if isinstance(t, c_ast.TypeDecl) else None
        if isinstance(ext, c_ast.Typedef) and isinstance(inner, c_ast.IdentifierType):
            names = list(inner.names)
            if len(names) == 1 and names[0] in scalars:
                names = scalars[names[0]]
            if ext.name not in SCALARS and type_size(ext.name, structs) is None:
                scalars[ext.name] = names
        struct = inner if isinstance(inner, (c_ast.Struct, c_ast.Union)) else \
            (t if isinstance(t, (c_ast.Struct, c_ast.Union)) else None)
        if struct is not None and struct.decls is not None:
            size = _struct_size(struct, scalars, structs)
            if size is not None:
                kind = "union" if isinstance(struct, c_ast.Union) else "struct"
                if struct.name:
                    structs[f"{kind} {struct.name}"] = size
                if isinstance(ext, c_ast.Typedef):
                    structs[ext.name] = size
    if not scalars:
        return structs
    for node in syntax.walk(ast):
        if isinstance(node, c_ast.IdentifierType) and len(node.names) == 1 and \
                node.names[0] in scalars:
            node.names = list(scalars[node.names[0]])
    return structs


def _struct_size(struct: Any, scalars: Mapping[str, list[str]],
                 structs: Mapping[str, int]) -> Optional[int]:
    """C layout size of a struct/union of scalars, vectors, arrays and sized structs."""
    size = align = 0
    sizes = []
    for d in struct.decls:
        t, count = d.type, 1
        while isinstance(t, c_ast.ArrayDecl):
            if not isinstance(t.dim, c_ast.Constant):
                return None
            count *= syntax.int_literal(t.dim.value)
            t = t.type
        if isinstance(t, c_ast.PtrDecl):
            fsize = 8
        else:
            name = type_name(t)
            if name in scalars:
                name = normalize(" ".join(scalars[name]))
            fsize = type_size(name, structs)
            if fsize is None:
                return None
        falign = min(fsize, 16) if fsize & (fsize - 1) == 0 else 4
        align = max(align, falign)
        sizes.append(fsize * count)
        if not isinstance(struct, c_ast.Union):
            size = (size + falign - 1) // falign * falign + fsize * count
    if isinstance(struct, c_ast.Union):
        size = max(sizes, default=0)
    align = max(align, 1)
    return (size + align - 1) // align * align


def type_size(name: str, structs: Mapping[str, int] = {}) -> Optional[int]:  # noqa: B006
    """Size in bytes of an OpenCL scalar or vector type, or of one of ``structs`` (a kernel's
    :attr:`~polyfuse.core.program.Kernel.struct_sizes`), or None."""
    size = size_of(name)
    return size if size is not None else structs.get(normalize(name))
