"""Printing C and OpenCL C: pycparser's generator taught the ``[[ocl::...]]`` attributes the
preprocessor (:mod:`polyfuse.c.preprocessor`) writes, so a kernel prints with its OpenCL
qualifiers again."""

from __future__ import annotations

from pycparser import c_ast, c_generator

from polyfuse.c.preprocessor import is_polyfuse_header

#: OpenCL spelling printed back for each attribute
SPELLING = {
    "global": "__global",
    "local": "__local",
    "constant": "__constant",
    "private": "__private",
    "kernel": "__kernel",
}


class OpenCLGenerator(c_generator.CGenerator):
    """pycparser's C generator printing ``[[ocl::...]]`` attributes as OpenCL qualifiers.

    A whole ``FileAST`` is printed without the declarations of polyfuse's own headers.
    """

    def visit_AttributeSpecifier(self, n: c_ast.AttributeSpecifier) -> str:
        parts = []
        other = []
        for a in n.attributes or []:
            if isinstance(a, c_ast.Attribute) and a.namespace == "ocl":
                if a.name in SPELLING:
                    parts.append(SPELLING[a.name])
                else:
                    parts.append(f"__attribute__(({a.name}({a.arguments or ''})))")
            else:
                other.append(self.visit(a))
        if other:
            parts.append("[[" + ", ".join(other) + "]]")
        return " ".join(parts)

    def visit_Cast(self, n: c_ast.Cast) -> str:
        if isinstance(n.expr, c_ast.ExprList):  # vector literal (float4)(a, b, c, d)
            return f"({self._generate_type(n.to_type, emit_declname=False)})({self.visit(n.expr)})"
        return super().visit_Cast(n)

    def visit_FileAST(self, n: c_ast.FileAST) -> str:
        kept = c_ast.FileAST([e for e in n.ext if not is_polyfuse_header(e)], n.coord)
        return super().visit_FileAST(kept)


def opencl_source(node: c_ast.Node) -> str:
    """OpenCL C text of an AST node (a whole file, a function, a statement or an expression)."""
    return OpenCLGenerator().visit(node)
