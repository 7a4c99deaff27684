"""Fusing a fused kernel's consecutive block loops (polyfuse/codegen/block_loops.py).

The legality rule is syntactic and conservative: each case below that must not merge is a
dependence the rule has to see (a buffer written in one nest and read in another, a block
array read at another iteration, a call that may write memory, different bounds, a barrier
between); the end-to-end check that a merged chain computes the same numbers is
``tests/test_blocked_consumers.py::test_product_epilogue_reads_the_accumulators``.
"""

from __future__ import annotations

from pycparser import CParser, c_ast

from polyfuse.c.printer import OpenCLGenerator
from polyfuse.codegen.block_loops import fuse_block_loops

STEP = """
  {{
    const int r0 = get_global_id(0) * 2;
    for (int bi = 0; bi < 2; bi++)
    {{
      const int lead = r0 + bi;
      for (int bj = 0; bj < 4; bj++)
      {{
        {body}
      }}
    }}
  }}
"""


def _kernel(*bodies: str, between: str = "") -> c_ast.Compound:
    steps = between.join(STEP.format(body=b) for b in bodies)
    text = ("int get_global_id(int d); void barrier(int f); float helper(float *p);\n"
            "void k(float *x, float *y, float *z, float *alias_of_y) {\n"
            "  float pf_b1[2][4] = {0};\n  float pf_b2[2][4] = {0};\n"
            f"{steps}}}\n")
    ast = CParser().parse(text)
    return ast.ext[-1].body


ROOTS = {"x": "x", "y": "y", "z": "z", "alias_of_y": "y"}
BLOCK = {"pf_b1", "pf_b2"}
PRODUCT = "pf_b1[bi][bj] = x[lead * 4 + bj];"
EPILOGUE = "const float v = pf_b1[bi][bj]; pf_b2[bi][bj] = v * v;"
STORE = "y[lead * 4 + bj] = pf_b2[bi][bj] + 1.0f;"


def _loops(body: c_ast.Compound) -> int:
    text = OpenCLGenerator().visit(body)
    return text.count("for (int bj")


def test_a_chain_through_block_arrays_becomes_one_nest_in_order() -> None:
    body = _kernel(PRODUCT, EPILOGUE, STORE)
    comments = {id(s): f"fragment {i + 1}" for i, s in enumerate(body.block_items[2:])}
    notes = fuse_block_loops(body, ROOTS, BLOCK, comments)
    assert notes == ["block loops fused: fragment 1; fragment 2; fragment 3; "
                     "pf_b1, pf_b2 kept in registers"]
    assert _loops(body) == 1
    text = OpenCLGenerator().visit(body)
    # each step keeps its own scope, in the original order, inside the one nest; the arrays
    # only this nest uses, each element written before it is read, are scalars of its body
    assert text.index("pf_b1 = x") < text.index("pf_b2 = v * v") \
        < text.index("y[(lead * 4) + bj] = pf_b2 + 1.0f")
    assert "[2][4]" not in text and text.count("float pf_b1 = 0;") == 1
    assert text.count("const int lead = r0 + bi;") == 1


def test_block_arrays_used_elsewhere_or_read_first_stay_arrays() -> None:
    body = _kernel(PRODUCT, EPILOGUE)
    # a straight-line store of the product's block before the nests (as a product's is)
    body.block_items.insert(2, CParser().parse(
        "void f() { pf_b1[0][0] = 1.0f; }").ext[0].body.block_items[0])
    fuse_block_loops(body, ROOTS, BLOCK, {})
    text = OpenCLGenerator().visit(body)
    assert "float pf_b1[2][4]" in text and "pf_b1[bi][bj] = x" in text
    assert "float pf_b2 = 0;" in text  # written first in the nest, used nowhere else
    read_first = _kernel("z[lead * 4 + bj] = pf_b2[bi][bj];", EPILOGUE)
    fuse_block_loops(read_first, ROOTS, BLOCK, {})
    text = OpenCLGenerator().visit(read_first)
    assert "float pf_b2[2][4]" in text and "pf_b2[bi][bj] = v * v" in text


def test_a_buffer_written_by_one_nest_and_read_by_another_keeps_them_apart() -> None:
    reads_y_elsewhere = "z[lead * 4 + bj] = y[(lead * 4 + bj + 1) % 8];"
    for second in (reads_y_elsewhere, reads_y_elsewhere.replace("y[", "alias_of_y[")):
        body = _kernel(STORE, second)
        assert fuse_block_loops(body, ROOTS, BLOCK, {}) == []
        assert _loops(body) == 2


def test_a_block_array_read_at_another_iteration_keeps_them_apart() -> None:
    transposed = "z[lead * 4 + bj] = pf_b1[1 - bi][bj];"
    body = _kernel(PRODUCT, transposed)
    assert fuse_block_loops(body, ROOTS, BLOCK, {}) == []
    assert _loops(body) == 2


def test_calls_other_bounds_and_barriers_keep_them_apart() -> None:
    call = "z[lead * 4 + bj] = helper(y);"
    assert fuse_block_loops(_kernel(PRODUCT, call), ROOTS, BLOCK, {}) == []
    other = _kernel(PRODUCT, EPILOGUE)
    inner = other.block_items[-1].block_items[-1].stmt.block_items[-1]
    inner.cond.right = c_ast.Constant("int", "3")  # bj < 3 in the second nest
    assert fuse_block_loops(other, ROOTS, BLOCK, {}) == []
    apart = _kernel(PRODUCT, EPILOGUE, between="  barrier(1);\n")
    assert fuse_block_loops(apart, ROOTS, BLOCK, {}) == []
    assert _loops(apart) == 2


def test_pointers_and_fields_keep_them_apart() -> None:
    through_pointer = "float *q = y; z[lead * 4 + bj] = q[bj];"
    assert fuse_block_loops(_kernel(STORE, through_pointer), ROOTS, BLOCK, {}) == []
    text = "int get_global_id(int d);\nstruct s { float v; };\n" \
        "void k(struct s *p, float *y) {\n" + STEP.format(body="y[bj] = 1.0f;") + \
        STEP.format(body="const float w = p->v; (void) w;") + "}\n"
    body = CParser().parse(text).ext[-1].body
    assert fuse_block_loops(body, {"p": "y", "y": "y"}, set(), {}) == []


def test_a_nest_assigning_a_kernel_variable_is_left_alone() -> None:
    body = _kernel(PRODUCT, EPILOGUE)
    body.block_items.insert(0, c_ast.Decl("acc", [], [], [], [], c_ast.TypeDecl(
        "acc", [], None, c_ast.IdentifierType(["float"])), c_ast.Constant("int", "0"), None))
    second = body.block_items[-1].block_items[-1].stmt.block_items[-1].stmt
    second.block_items.append(c_ast.Assignment("+=", c_ast.ID("acc"), c_ast.ID("v")))
    assert fuse_block_loops(body, ROOTS, BLOCK, {}) == []
