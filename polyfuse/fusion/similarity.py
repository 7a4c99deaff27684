"""Structural identity of kernels (principle P3: independent launches fuse only when identical).

Two kernels are "identical code" when their pycparser ASTs (``Kernel.ast``) agree node for node
once parameter and local names are replaced by their order of first appearance, the function's
own name is dropped and integer constants are replaced by a placeholder.  Floating-point
constants, operators, types and the control structure must match.  Written here (pycparser has
no structural hash): a pre-order walk over ``Node.children()`` with ``attr_names``.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Optional

from pycparser import c_ast

from polyfuse.core.program import Kernel

_NAME_ATTRS = {"name", "declname"}


def _walk(node: Any, names: dict[str, str], out: list[str]) -> None:
    cls = type(node).__name__
    parts = [cls]
    for attr in getattr(node, "attr_names", ()):
        val = getattr(node, attr, None)
        if attr in _NAME_ATTRS and isinstance(val, str):
            # the kernel's own name is the first name met: v0 in every kernel
            val = names.setdefault(val, f"v{len(names)}")
        elif cls == "Constant" and attr == "value":
            ctype = getattr(node, "type", "")
            if ctype in ("int", "unsigned int", "long int", "unsigned long int", "char"):
                val = "<int>"
        elif isinstance(val, (list, tuple)):
            val = ",".join(str(v) for v in val)
        parts.append(f"{attr}={val}")
    out.append("(" + " ".join(parts))
    for _, child in node.children():
        _walk(child, names, out)
    out.append(")")


def kernel_signature(kernel: Kernel, memo: Optional[dict[tuple, str]] = None) -> str:
    """A hash of the kernel's structure modulo names and integer constants.

    Falls back to the kernel's name (never equal to another kernel's) when it has no AST.
    ``memo`` keeps the walk of each function body (by identity, with the names its
    declaration gave) while the kernels are alive: the renamed copies of one kernel that
    identical layers launch share their body, which names only its declaration's names.
    """
    if kernel.ast is None:
        return f"name:{kernel.name}"
    out: list[str] = []
    names: dict[str, str] = {}
    fd = kernel.ast
    if memo is None or not isinstance(fd, c_ast.FuncDef) or fd.param_decls or \
            fd.body is None or \
            len(re.findall(rf"\b{re.escape(kernel.name)}\b", kernel.source)) != 1:
        _walk(fd, names, out)
    else:
        # FuncDef's own walk (no attributes; children: decl, body), the body's part shared:
        # the kernel's name is met in the declaration only, so the body's text depends on
        # the other names the declaration numbered
        out.append("(FuncDef")
        _walk(fd.decl, names, out)
        key = (id(fd.body), tuple((k, v) for k, v in names.items() if k != kernel.name))
        body = memo.get(key)
        if body is None:
            part: list[str] = []
            _walk(fd.body, names, part)
            body = memo[key] = "".join(part)
        out += [body, ")"]
    return hashlib.sha256("".join(out).encode()).hexdigest()[:16]

