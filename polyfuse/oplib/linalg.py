"""MatMul and Gemm in three forms (the target's ``KernelVariant.product_form``), and Conv.

``tiled``: ``__local`` tiles, two barriers per tile step, one output per work-item;
``blocked``: a register block per work-item, no ``__local`` memory (CPU-like devices);
``register_tiled``: ``__local`` panels and a register tile per work-item (GPUs).

Tiled product: work-item ``(col, row)`` = ``(get_global_id(0), get_global_id(1))`` computes one
output element; batched MatMul adds ``get_global_id(2)`` over the flattened output batch.  The
NDRange is rounded up to tile multiples; loads outside the matrices store 0 into the tile (guarded
statements, not guarded barriers), so every work-item reaches both barriers of each tile step.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Optional

from pycparser import c_ast, c_parser

from polyfuse.c.syntax import identifiers
from polyfuse.core.program import KernelVariant, RegisterTile
from polyfuse.oplib._common import (
    BlockLayout,
    Grid,
    Node,
    OpKernel,
    Param,
    broadcast_shape,
    broadcast_strides,
    elementwise_kernel,
    flt,
    grid_kernel,
    halved_lanes,
    index_expr,
    make_kernel,
    prod,
    render,
    round_up,
    shape_str,
    strides_of,
    vector_lanes,
)
from polyfuse.oplib.reduce import lanes_for

#: Preferred tile edge of the tiled matrix product.
TILE = 16


def tile_size(node: Node) -> int:
    """Largest tile edge <= TILE whose work-group and two float tiles fit the device."""
    t = TILE
    while t > 1 and (t * t > node.max_work_group_size or 2 * t * t * 4 > node.local_mem_size):
        t //= 2
    return t


def _tiled_product(
    node: Node,
    m: int,
    n: int,
    k: int,
    a_load: str,
    b_load: str,
    store: str,
    params: list[Param],
    inputs: list[str],
    batch: int,
    comment: str,
) -> OpKernel:
    """Emit the tiled kernel; ``a_load``/``b_load`` index A at (``row``, ``ka``) and B at
    (``kb``, ``col``), ``store`` writes ``acc`` at (``row``, ``col``)."""
    t = tile_size(node)
    defines = {"M": m, "N": n, "K": k, "TS": t, "KTILES": (k + t - 1) // t}
    batch_decl = "const int batch = get_global_id(2);\n" if batch > 1 else ""
    body = f"""
__local float a_tile[TS][TS];
__local float b_tile[TS][TS];
const int col = get_global_id(0);
const int row = get_global_id(1);
{batch_decl}const int lc = get_local_id(0);
const int lr = get_local_id(1);
float acc = 0.0f;
for (int t = 0; t < KTILES; t++) {{
    const int ka = t * TS + lc;
    const int kb = t * TS + lr;
    if (row < M && ka < K) {{
        a_tile[lr][lc] = {a_load};
    }} else {{
        a_tile[lr][lc] = 0.0f;
    }}
    if (kb < K && col < N) {{
        b_tile[lr][lc] = {b_load};
    }} else {{
        b_tile[lr][lc] = 0.0f;
    }}
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int kk = 0; kk < TS; kk++) {{
        acc += a_tile[lr][kk] * b_tile[kk][lc];
    }}
    barrier(CLK_LOCAL_MEM_FENCE);
}}
if (row < M && col < N) {{
    {store};
}}
"""
    source = render(node, defines, params, body, comment)
    gsize: tuple[int, ...] = (round_up(n, t), round_up(m, t))
    lsize: tuple[int, ...] = (t, t)
    if batch > 1:
        gsize, lsize = gsize + (batch,), lsize + (1,)
    return make_kernel(node, source, gsize, lsize, inputs, ["y"])


#: Largest block of outputs one work-item of the blocked product computes: rows x columns.
#: 4 x 32 is four 8-float vectors per row: 16 vector accumulators, 4 vector loads of B and 4
#: broadcasts of A per 16 multiply-adds, which fits the 32 vector registers of AVX-512 (and its
#: compilers' preferred 256-bit width).  On PoCL/LLVM 15 it reached 0.9-1.0x numpy's sgemm at
#: BERT-base sizes where 4 x 16 reached 0.5-0.7x.
BLOCK_ROWS, BLOCK_COLS = 4, 32


def _largest_divisor(n: int, cap: int) -> int:
    """Largest power of two <= ``cap`` dividing ``n`` (1 when ``n`` is odd)."""
    d = 1
    while d * 2 <= cap and n % (d * 2) == 0:
        d *= 2
    return d


def block_cols_for(native_vector_width_float: int) -> int:
    """Columns per work-item for a device whose native float vector has this many lanes: two
    vectors per row of the block (the compiler vectorizes the contiguous columns), between 4
    and BLOCK_COLS (BLOCK_ROWS x that many accumulators stay in registers)."""
    return max(4, min(BLOCK_COLS, 2 * _largest_divisor(max(1, native_vector_width_float),
                                                       BLOCK_COLS)))


#: Largest K x C panel of B (bytes) one column block streams per work-item before the block
#: is made taller and narrower (see :func:`block_shape`).
PANEL_BYTES = 256 * 1024


def vector_block_rows(vector_width: int, cols: int) -> int:
    """Rows of a blocked product whose ``cols`` columns are kept in vectors of
    ``vector_width`` lanes: as many as make ``vector_width`` accumulator vectors, at least
    BLOCK_ROWS.  Why that count: CPUs with 16-lane float vectors (AVX-512) have 32 vector
    registers, those with 8 lanes (AVX2) 16; half of them accumulate, the rest hold B's row and
    A's broadcasts.  On AVX-512 that is 8 x 32, which ran 175-257 GFLOP/s at BERT-base and
    ResNet-50 shapes where 4 x 32 ran 106-231 and 16 x 32 (32 accumulators) 128-217 (PoCL 3.1
    ``basic``, AMD Zen 5; docs/performance.md)."""
    return max(BLOCK_ROWS, vector_width * vector_width // max(1, cols))


def block_shape(m: int, n: int, k: int = 1, cols: int = BLOCK_COLS,
                vector_width: int = 1) -> tuple[int, int]:
    """Outputs per work-item (rows, columns) of an ``m x n x k`` product.

    In vectors (``vector_width``, the target's
    :attr:`~polyfuse.core.program.KernelVariant.vector_width`, where
    :func:`~polyfuse.oplib._common.vector_lanes` allows them): :func:`vector_block_rows` x
    ``cols``, whatever K is (8 x 32 was the fastest at K 256-4608).  As named scalars:
    BLOCK_ROWS x ``cols`` (the target's
    :attr:`~polyfuse.core.program.KernelVariant.block_cols`; one register budget of
    accumulators), as tall and narrow as it takes for the K x C panel of B that every row
    block re-reads to fit PANEL_BYTES (at K 3072 a 8 x 16 block reached 0.65x numpy's sgemm
    where 4 x 32 reached 0.45-0.6x; at K 768 4 x 32 is the faster).  Then the largest such
    block dividing the output, so no edge guards are needed."""
    if vector_lanes(vector_width, cols) > 1:
        return (_largest_divisor(m, vector_block_rows(vector_width, cols)),
                _largest_divisor(n, cols))
    rows = BLOCK_ROWS
    while cols > 8 and k * cols * 4 > PANEL_BYTES and m % (rows * 2) == 0:
        rows, cols = rows * 2, cols // 2
    return _largest_divisor(m, rows), _largest_divisor(n, cols)


def _at(expr: str, value: str, name: str) -> str:
    """``expr`` with the identifier ``name`` replaced by ``value``."""
    return re.sub(rf"\b{name}\b", value, expr)


def _group_shape(gx: int, gy: int, max_wg: int, wide: bool = False) -> tuple[int, int]:
    """Work-group of the blocked product: up to 16 work-items along dimension 0 (row blocks),
    then along dimension 1, within the device's work-group size.

    ``wide``: two row blocks by 8-16 column blocks where such a count divides the columns
    (:data:`WIDE_GROUP_MIN_COLUMNS`), so a work-group reads and writes each of its rows in
    runs of 1-2 kB rather than 128-byte pieces of 64 rows: a 1x1 Conv 256x3136x64 with its
    residual Add and Relu fused ran at 93-97 GFLOP/s in (2, 14) groups against 72-86 in
    (16, 1); the product alone at 98-107 against 100-109 (PoCL 3.1 ``basic``,
    docs/performance.md)."""
    if wide:
        ly = max((d for d in range(8, 17) if gy % d == 0), default=0)
        lx = _largest_divisor(gx, 2)
        if ly and lx * ly <= max_wg:
            return lx, ly
    lx = _largest_divisor(gx, 16)
    ly = _largest_divisor(gy, max(1, 16 // lx))
    while lx * ly > max_wg:
        lx, ly = (lx // 2, ly) if lx >= ly else (lx, ly // 2)
    return lx, ly


#: a 1x1 Conv product with at least this many pixels per image (56 x 56 and larger) runs in
#: work-groups wide along its columns (:func:`_group_shape`): its output and a fused residual
#: are megabytes that stream from memory
WIDE_GROUP_MIN_COLUMNS = 1024


def _unit_stride_load(elem: str, var: str) -> Optional[tuple[str, str]]:
    """``(array, index)`` of an element read ``array[index]`` whose index is ``var`` plus terms
    free of it (``var``'s every ancestor in the expression a sum, or the left operand of a
    difference), so that the elements at ``var``, ``var + 1``, ... are consecutive; None for
    any other form (a gather, a product or quotient of ``var``), read element by element.

    Why a syntax walk and not a symbolic difference: the indices hold C's integer ``/`` and
    ``%`` (batch broadcasts), which sympy's rationals do not model."""
    match = re.fullmatch(r"(\w+)\[(.*)\]", elem.strip())
    if match is None or not re.search(rf"\b{var}\b", match.group(2)):
        return None
    try:
        ast = c_parser.CParser().parse(f"int f(void) {{ return {match.group(2)}; }}")
    except c_parser.ParseError:
        return None
    expr = ast.ext[0].body.block_items[0].expr

    def additive(e: c_ast.Node) -> Optional[int]:
        """Occurrences of ``var`` in ``e`` when each is reached through sums only."""
        if isinstance(e, c_ast.ID):
            return int(e.name == var)
        if isinstance(e, c_ast.Constant):
            return 0
        if isinstance(e, c_ast.BinaryOp) and e.op in ("+", "-"):
            left, right = additive(e.left), additive(e.right)
            if left is None or right is None or (e.op == "-" and right):
                return None
            return left + right
        return None if var in identifiers(e) else 0

    return (match.group(1), match.group(2)) if additive(expr) == 1 else None


def _vector_block(rb: int, cb: int, width: int, inits: list[list[str]], a_elem: str,
                  b_row: tuple[str, str], rows: list[str], cols: list[str]) -> list[str]:
    """The blocked product's accumulators as ``float<width>`` vectors, B's row read by
    ``vload<width>``; after the loop each output is a named scalar ``acc_i_j`` again (a vector
    component), so the stores and any fused epilogue are those of the scalar block.

    Why explicit vectors: LLVM tunes every AVX-512 CPU it knows to prefer 256-bit vectors, so
    the scalar block's FMAs stay 8 wide; on a CPU whose 512-bit units run at full rate (AMD
    Zen 5) the explicit 16-wide block ran 128x3136x256 at 217 GFLOP/s against 40-115
    (PoCL 3.1 ``basic``, docs/performance.md)."""
    vtype, nv = f"float{width}", cb // width
    array, index = b_row
    lines = []
    for i in range(rb):
        for v in range(nv):
            part = inits[i][v * width:(v + 1) * width]
            value = part[0] if len(set(part)) == 1 else ", ".join(part)
            lines.append(f"{vtype} acc_{i}_v{v} = ({vtype})({value});")
    lines.append("for (int kk = 0; kk < K; kk++) {")
    lines += [f"    const {vtype} bv_v{v} = vload{width}(0, {array} + "
              f"({_at(index, cols[v * width], 'col')}));" for v in range(nv)]
    for i in range(rb):
        lines.append(f"    const float av_{i} = {_at(a_elem, rows[i], 'row')};")
        lines += [f"    acc_{i}_v{v} += av_{i} * bv_v{v};" for v in range(nv)]
    lines.append("}")
    lines += [f"const float acc_{i}_{j} = acc_{i}_v{j // width}.s{j % width:x};"
              for i in range(rb) for j in range(cb)]
    return lines


def _blocked_product(
    node: Node,
    m: int,
    n: int,
    k: int,
    a_elem: str,
    b_elem: str,
    store: str,
    params: list[Param],
    inputs: list[str],
    batch: int,
    comment: str,
    init: str = "0.0f",
    col_limit: int = 0,
    shape: Optional[tuple[int, int]] = None,
    wide_groups: bool = False,
) -> OpKernel:
    """Each work-item computes an R x C block of the output in private accumulators.

    No ``__local`` memory and no barriers.  The block is written out as named scalars (one per
    output, ``acc_i_j``) and straight-line statements per ``kk``: C loads of B's row ``kk``, R
    loads of A's column, R x C multiply-adds.  Device compilers keep the accumulators in
    registers and vectorize the contiguous columns (vector loads of B, broadcasts of A, packed
    FMAs); the same block as a private array with loops ran 3-4x slower on PoCL (the array
    stays in memory).  ``a_elem`` indexes A at (``row``, ``kk``), ``b_elem`` B at (``kk``,
    ``col``); ``store`` writes ``acc[i][j]`` at (``row``, ``col``); each ``row``/``col``
    becomes ``r0 + i``/``c0 + j``, so every subscript stays affine in the ids and the loop
    iterator.  ``init`` (of ``row``/``col``) starts the accumulators: an additive term of the
    result (a bias) belongs there, not in ``store``; added after the loop it cost PoCL 2.3x on
    a 1x1 Conv (103 against 42 GFLOP/s).

    Row blocks lie on NDRange dimension 0, which CPU runtimes iterate fastest: consecutive
    work-items read the same K x C panel of B while it is in cache, and B streams from memory
    once (column blocks on dimension 0 streamed it M / R times: 1.4-2x slower at BERT-base
    sizes).  A row-major B panel is read contiguously per ``kk``; B in the other layout (Gemm
    ``transB=1``) is a strided gather, which is why the ONNX front-end transposes a constant
    ``transB`` operand once at load time.  ``shape`` (rows, columns) overrides
    :func:`block_shape` where B's layout fixes the block's width (:func:`_im2col_conv`);
    ``wide_groups`` asks for work-groups along the columns (:func:`_group_shape`).
    """
    rb, cb = shape or block_shape(m, n, k, node.variant.block_cols, node.variant.vector_width)
    gx, gy = m // rb, n // cb
    lx, ly = _group_shape(gx, gy, node.max_work_group_size, wide_groups)
    defines = {"M": m, "N": n, "K": k, "RB": rb, "CB": cb}
    rows = [f"(r0 + {i})" if i else "r0" for i in range(rb)]
    # ``(c0 + j)`` grouped: B's row start + (c0 + j) vectorizes, (row start + c0) + j did not
    # on PoCL 3.1 (2x slower products, docs/performance.md "What did not pay")
    cols = [f"(c0 + {j})" if j else "c0" for j in range(cb)]
    acc = [[f"acc_{i}_{j}" for j in range(cb)] for i in range(rb)]
    lines = ["const int r0 = get_global_id(0) * RB;", "const int c0 = get_global_id(1) * CB;"]
    if batch > 1:
        lines.append("const int batch = get_global_id(2);")
    inits = [[_at(_at(init, rows[i], "row"), cols[j], "col") for j in range(cb)]
             for i in range(rb)]
    width = vector_lanes(node.variant.vector_width, cb)
    b_row = _unit_stride_load(b_elem, "col") if width > 1 else None
    if b_row is None:
        lines += [f"float {acc[i][j]} = {inits[i][j]};" for i in range(rb) for j in range(cb)]
        lines.append("for (int kk = 0; kk < K; kk++) {")
        lines += [f"    const float bv_{j} = {_at(b_elem, cols[j], 'col')};" for j in range(cb)]
        for i in range(rb):
            lines.append(f"    const float av_{i} = {_at(a_elem, rows[i], 'row')};")
            lines += [f"    {acc[i][j]} += av_{i} * bv_{j};" for j in range(cb)]
        lines.append("}")
    else:
        lines += _vector_block(rb, cb, width, inits, a_elem, b_row, rows, cols)
    stores = [_at(_at(store.replace("acc[i][j]", acc[i][j]), rows[i], "row"), cols[j], "col")
              + ";" for i in range(rb) for j in range(cb)]
    if col_limit and col_limit < n:
        # the columns from ``col_limit`` on are computed, not stored.  Any condition around
        # the stores of the accumulators (in the last column block only, or per store) made
        # PoCL 3.1's code for the whole loop 5x slower (512 x 4608 x 64: 19 GFLOP/s against
        # 100): the block goes to a private array unconditionally, in runs of consecutive
        # columns, and a guarded loop nest stores it (see _im2col_conv)
        stored = _at(_at(store.replace("acc[i][j]", "blk[bi][bj]"), "(r0 + bi)", "row"),
                     "(c0 + bj)", "col")
        stores = [f"float blk[{rb}][{cb}];",
                  *(f"blk[{i}][{j}] = {acc[i][j]};" for i in range(rb) for j in range(cb)),
                  "for (int bi = 0; bi < RB; bi++) {", "    for (int bj = 0; bj < CB; bj++) {",
                  f"        if (c0 + bj < {col_limit}) {{", f"            {stored};",
                  "        }", "    }", "}"]
    lines += stores
    body = "\n".join(lines) + "\n"
    source = render(node, defines, params, body, comment)
    gsize: tuple[int, ...] = (gx, gy)
    lsize: tuple[int, ...] = (lx, ly)
    if batch > 1:
        gsize, lsize = gsize + (batch,), lsize + (1,)
    prologue = f"const int r0 = get_global_id(0) * {rb};\nconst int c0 = get_global_id(1) * {cb};"
    if batch > 1:
        prologue += "\nconst int batch = get_global_id(2);"
    layout = BlockLayout(
        global_size=gsize, local_size=lsize, prologue=prologue, guard="", rows=rb, cols=cb,
        lead=f"batch * {m} + r0 + bi" if batch > 1 else "r0 + bi", col="c0 + bj",
        lead_extent=batch * m, col_extent=n,
        lead_base=f"batch * {m} + r0" if batch > 1 else "r0", col_base="c0",
    )
    return replace(make_kernel(node, source, gsize, lsize, inputs, ["y"]), block=layout)


#: K values per step of the register-tiled product by rule: each step loads a TM x RT_K panel
#: of A and a RT_K x TN panel of B into ``__local`` memory between two barriers.
RT_K = 16

#: Deeper panels tried besides :data:`RT_K` for the register tiles of at least
#: :data:`DEEP_MIN_OUTPUTS` outputs: half the barriers per K, and 32 consecutive K values per
#: row of A loaded (128-byte segments), for twice the ``__local`` memory.
RT_DEEP_K = 32
DEEP_MIN_OUTPUTS = 16

#: Register tiles (``wm x wn`` outputs per work-item) tried, the most reuse first (multiply-adds
#: per value read from ``__local`` memory: ``wm * wn / (wm + wn)``).  8 x 8 is left out: on an
#: H200 (NVIDIA's OpenCL) it was the slowest tile at every BERT-base and 1024-cubed shape
#: (0.04-0.27x cuBLAS against 0.2-0.58x for the best), 64 accumulators per work-item and 64
#: work-groups at 1024-cubed for 132 units.  The rectangular 4 x 8 and 8 x 4 (64 x 128 and
#: 128 x 64 output tiles at 16 x 16 work-items: 128 work-groups at 1024-cubed) read 12 values
#: per 32 multiply-adds against 8 per 16 at 4 x 4, the ratio that bounds a strided register
#: tile fed by scalar ``__local`` reads; 4 x 8 comes first: at 1024-cubed on the H200 it ran at
#: 24.3 TFLOP/s (0.67x cuBLAS) against 16.4 for 8 x 4 and 21.9 for 4 x 4.
RT_TILES = ((4, 8), (8, 4), (4, 4), (2, 2), (1, 1))

#: Fraction of the device's compute units a product's work-groups must cover before a larger
#: register tile is preferred to more work-groups.  On an H200 (132 units) the fastest tile of
#: each BERT-base product was the largest giving at least 96 work-groups (0.73 of them):
#: 128x768x768 at 2 x 2 (96 groups) ran 1.2x faster than 1 x 1 (384) and 1.7x faster than
#: 4 x 4 (24); 1024-cubed at 4 x 4 (256) 1.8x faster than 2 x 2.
BUSY_FRACTION = 0.7


def _tile_fits(node: Node, t: RegisterTile) -> bool:
    """The tile's work-group runs on the node's device, its panels fit ``__local`` memory and
    its work-items load them in whole passes (A: ``threads / tk`` rows of ``tk`` values per
    pass, B: ``threads / TN`` rows of ``TN``)."""
    threads, tm, tn = t.edge * t.edge, t.edge * t.wm, t.edge * t.wn
    return (threads <= node.max_work_group_size and threads % t.tk == 0 and threads % tn == 0
            and tm * t.tk % threads == 0 and tn * t.tk % threads == 0
            and t.tk * (tm + 1 + tn) * 4 <= node.local_mem_size)


def register_tile_candidates(node: Node, m: int, n: int) -> list[RegisterTile]:
    """Every register tile the ``m x n`` product can run with on the node's device (the tile
    divides the output, the panels fit ``__local`` memory), the preferred work-group edge
    first, then the most reuse, the rule's panel depth :data:`RT_K` before the deeper one;
    ``variant.register_tile`` fixes one."""
    fixed = node.variant.register_tile
    tiles = [RegisterTile(*fixed)] if fixed else [
        RegisterTile(e, wm, wn, tk) for e in (16, 8) for wm, wn in RT_TILES
        for tk in (RT_K, RT_DEEP_K) if tk == RT_K or wm * wn >= DEEP_MIN_OUTPUTS]
    return [t for t in tiles if _tile_fits(node, t)
            and m % (t.edge * t.wm) == 0 and n % (t.edge * t.wn) == 0]


def register_tile_shape(node: Node, m: int, n: int, k: int, batch: int = 1
                        ) -> Optional[RegisterTile]:
    """The register tile of the ``m x n x k`` product, or None when no tile divides the output
    (the tiled form then runs).

    A measured choice for the shape (``variant.tiles``) comes first.  Otherwise the
    work-group is 16 x 16 work-items (8 x 8 where the device allows fewer), each computing a
    ``wm x wn`` register tile over :data:`RT_K`-deep panels; the tile with the most reuse whose
    work-groups still cover :data:`BUSY_FRACTION` of the device's compute units
    (``variant.device_groups``) is taken, since a larger tile reuses each loaded value more but
    a GPU with idle compute units loses more than that (BERT-base products have only 128
    rows).  ``variant.register_tile`` fixes it."""
    fits = register_tile_candidates(node, m, n)
    tuned = dict(node.variant.tiles).get((m, n, k, batch))
    if tuned in fits:
        return tuned
    if not fits:
        return None
    fits = [f for f in fits if f.edge == fits[0].edge and f.tk == fits[0].tk]

    def groups(f: RegisterTile) -> int:
        return batch * (m // (f.edge * f.wm)) * (n // (f.edge * f.wn))

    busy = [f for f in fits if groups(f) >= BUSY_FRACTION * node.variant.device_groups]
    return busy[0] if busy else max(fits, key=groups)


#: Shortest K a split-K product is considered for, and shortest K each of its parts keeps.
SPLIT_MIN_K = 1024
SPLIT_MIN_PART = 256
#: Work-groups, as a fraction of the device's compute units, below which a register-tiled
#: product with a long K is split.  About a whole wave, not :data:`BUSY_FRACTION`: on an H200 (132
#: units) BERT-base's 128x3072x768 product has 96 work-groups at its chosen tile (0.73 of the
#: units, busy enough for a short K) yet ran at 0.20x cuBLAS at every tile, each work-group
#: looping over all 3072 values of K, while 128x768x3072 (K=768, 384 work-groups) ran 2.3-2.7x
#: faster per FLOP.  0.9, not 1: a 1024-cubed product at its 64 x 128 tiles has 128 work-groups
#: (0.97 of a wave), which split would only add a sum pass to.
SPLIT_FILL = 0.9
#: Most parts K is split into.  On the H200, 128x3072x768 with its partial sums ran at 4.7
#: (unsplit), 6.8 (2 parts), 10.3 (4) and 12.5 TFLOP/s (8 parts, 64x64 tiles; 0.54x cuBLAS):
#: more parts let each work-group keep a larger register tile and still fill the device.
SPLIT_MAX_WAYS = 8
#: Shortest K each part of a ``blocked`` (CPU) product keeps when its K is split.  On this
#: project's 2-core EPYC (PoCL 3.1 ``basic``, thread CPU time against numpy's one-thread
#: sgemm) BERT-base's 128x3072x768 product ran at 0.70x numpy unsplit, 0.79x in 2 parts, 0.93-0.99x
#: in 4 (K = 768 each) and 0.78x in 8: a long K streams each work-item's K x C panel of B past
#: the cache, parts of K = 768 keep it there.
BLOCKED_SPLIT_PART = 768


def split_k_ways(variant: KernelVariant, m: int, n: int, k: int, max_work_group_size: int,
                 local_mem_size: int) -> int:
    """Into how many parts S the register-tiled ``m x k`` by ``k x n`` product splits K (1: not
    split): a product whose work-groups at its chosen tile leave compute units idle
    (:data:`SPLIT_FILL`) while each loops over a long K (:data:`SPLIT_MIN_K`) becomes S
    products over K/S each (one batched launch, ``S x m x n`` partial products) and their sum.
    S is the largest power of two up to :data:`SPLIT_MAX_WAYS` whose parts keep K/S a multiple
    of the panel depth :data:`RT_K` and at least :data:`SPLIT_MIN_PART`.

    The ``blocked`` (CPU) form splits for the cache instead: a product whose K is at least
    twice :data:`BLOCKED_SPLIT_PART` becomes the most parts (a power of two up to
    :data:`SPLIT_MAX_WAYS`) that keep that many values of K each."""
    if variant.product_form == "blocked":
        ways = [s for s in (2 ** i for i in range(1, SPLIT_MAX_WAYS.bit_length()))
                if k % s == 0 and (k // s) % RT_K == 0 and k // s >= BLOCKED_SPLIT_PART]
        return ways[-1] if ways else 1
    if variant.product_form != "register_tiled" or k < SPLIT_MIN_K:
        return 1

    def groups(batch: int) -> int:
        node = Node.of("MatMul", {}, [(batch, m, k // batch), (batch, k // batch, n)],
                       [(batch, m, n)], "split", max_work_group_size, local_mem_size, variant)
        t = register_tile_shape(node, m, n, k // batch, batch)
        return 0 if t is None else batch * (m // (t.edge * t.wm)) * (n // (t.edge * t.wn))

    want = SPLIT_FILL * variant.device_groups
    whole = groups(1)
    if whole == 0 or whole >= want:
        return 1
    ways = [s for s in (2 ** i for i in range(1, SPLIT_MAX_WAYS.bit_length()))
            if k % s == 0 and (k // s) % RT_K == 0 and k // s >= SPLIT_MIN_PART]
    return ways[-1] if ways else 1


def _register_tiled_product(
    node: Node,
    m: int,
    n: int,
    k: int,
    shape: RegisterTile,
    a_elem: str,
    b_elem: str,
    store: str,
    params: list[Param],
    inputs: list[str],
    batch: int,
    comment: str,
    init: str = "0.0f",
) -> OpKernel:
    """A work-group of E x E work-items computes a TM x TN tile of the output (TM = E x WM,
    TN = E x WN): per step of TK values of K it stages a panel of A (transposed, padded by one
    column so the stores do not share banks) and a panel of B in ``__local`` memory, every
    work-item storing its share of each, and each work-item then updates a WM x WN register
    tile from them.  A work-item loads its share of the next step's panels into registers
    (``next_q``, under ``t + 1 < KTILES``) before it multiplies this step's, so the global
    loads' latency overlaps the arithmetic (on an H200 the best tile of each BERT-base and
    1024-cubed product ran 1.05-1.3x faster so).

    Work-item ``(lx, ly)`` owns rows ``ly + i * E`` and columns ``lx + j * E`` of the tile:
    consecutive work-items read consecutive ``__local`` words of B and write consecutive
    output columns (coalesced), and the tile is named scalars (``acc_i_j``, see
    :func:`_blocked_product`) so it stays in registers.  Columns lie on NDRange dimension 0
    (consecutive on a GPU).  ``a_elem``/``b_elem``/``store``/``init`` as in
    :func:`_blocked_product`; the output's edges are multiples of the tile
    (:func:`register_tile_shape`), K need not be (the panels are zero-padded).  Every subscript
    is quasi-affine in the ids and loop iterators, and both barriers are reached by every
    work-item, so the front-end models the kernel exactly."""
    edge, wm, wn, tk = shape
    tm, tn = edge * wm, edge * wn
    threads = edge * edge
    ktiles = -(-k // tk)
    defines = {"M": m, "N": n, "K": k, "E": edge, "TM": tm, "TN": tn, "TK": tk,
               "KTILES": ktiles}
    ragged_k = k % tk != 0
    rows = [f"(r0 + {i * edge})" if i else "r0" for i in range(wm)]
    cols = [f"(c0 + {j * edge})" if j else "c0" for j in range(wn)]
    acc = [[f"acc_{i}_{j}" for j in range(wn)] for i in range(wm)]
    lines = [
        "__local float a_panel[TK][TM + 1];",
        "__local float b_panel[TK][TN];",
        "const int lx = get_local_id(0);",
        "const int ly = get_local_id(1);",
        "const int flat = ly * E + lx;",
        "const int tile_row = get_group_id(1) * TM;",
        "const int tile_col = get_group_id(0) * TN;",
        "const int r0 = tile_row + ly;",
        "const int c0 = tile_col + lx;",
    ]
    if batch > 1:
        lines.append("const int batch = get_global_id(2);")
    lines += [f"float {acc[i][j]} = {_at(_at(init, rows[i], 'row'), cols[j], 'col')};"
              for i in range(wm) for j in range(wn)]

    # each work-item's share of the panels of step ``step``: (its __local slot, its load)
    def loads(step: str) -> list[tuple[str, str]]:
        out = []
        for p in range(tm * tk // threads):
            a_row = f"flat / TK + {p * (threads // tk)}" if p else "flat / TK"
            kv = f"{step} * TK + flat % TK"
            load = _at(_at(a_elem, f"(tile_row + {a_row})", "row"), f"({kv})", "kk")
            out.append((f"a_panel[flat % TK][{a_row}]",
                        f"{kv} < K ? {load} : 0.0f" if ragged_k else load))
        for p in range(tn * tk // threads):
            b_row = f"flat / TN + {p * (threads // tn)}" if p else "flat / TN"
            kv = f"{step} * TK + {b_row}"
            load = _at(_at(b_elem, f"({kv})", "kk"), "(tile_col + flat % TN)", "col")
            out.append((f"b_panel[{b_row}][flat % TN]",
                        f"{kv} < K ? {load} : 0.0f" if ragged_k else load))
        return out

    # the next step's values are loaded into registers while this step's are multiplied
    lines += [f"float next_{q} = {load};" for q, (_, load) in enumerate(loads("0"))]
    lines.append("for (int t = 0; t < KTILES; t++) {")
    lines += [f"    {slot} = next_{q};" for q, (slot, _) in enumerate(loads("t"))]
    lines += ["    barrier(CLK_LOCAL_MEM_FENCE);", "    if (t + 1 < KTILES) {"]
    lines += [f"        next_{q} = {load};" for q, (_, load) in enumerate(loads("(t + 1)"))]
    lines.append("    }")
    lines.append("    for (int kk = 0; kk < TK; kk++) {")
    lines += [f"        const float bv_{j} = b_panel[kk][lx + {j * edge}];" for j in range(wn)]
    for i in range(wm):
        lines.append(f"        const float av_{i} = a_panel[kk][ly + {i * edge}];")
        lines += [f"        {acc[i][j]} += av_{i} * bv_{j};" for j in range(wn)]
    lines += ["    }", "    barrier(CLK_LOCAL_MEM_FENCE);", "}"]
    for i in range(wm):
        for j in range(wn):
            stmt = _at(_at(store.replace("acc[i][j]", acc[i][j]), rows[i], "row"), cols[j], "col")
            lines.append(f"{stmt};")
    source = render(node, defines, params, "\n".join(lines) + "\n",
                    comment + f" ({tm}x{tn} tiles, {wm}x{wn} per work-item, {tk}-deep panels)")
    gsize: tuple[int, ...] = (n // wn, m // wm)
    lsize: tuple[int, ...] = (edge, edge)
    if batch > 1:
        gsize, lsize = gsize + (batch,), lsize + (1,)
    prologue = (f"const int r0 = get_group_id(1) * {tm} + get_local_id(1);\n"
                f"const int c0 = get_group_id(0) * {tn} + get_local_id(0);")
    if batch > 1:
        prologue += "\nconst int batch = get_global_id(2);"
    layout = BlockLayout(
        global_size=gsize, local_size=lsize, prologue=prologue, guard="", rows=wm, cols=wn,
        lead=f"batch * {m} + r0 + bi * {edge}" if batch > 1 else f"r0 + bi * {edge}",
        col=f"c0 + bj * {edge}", lead_extent=batch * m, col_extent=n,
    )
    return replace(make_kernel(node, source, gsize, lsize, inputs, ["y"]), block=layout,
                   product=(m, n, k, batch))


#: Most output columns one work-item of the whole-row product keeps in private accumulators.
ROW_MAX_CHUNKS = 32


def row_form_problem(node: Node, n: int) -> Optional[str]:
    """Why rows of ``n`` columns cannot each be computed by one work-group laid out like the
    row reduction that consumes them (None: they can)."""
    lanes = lanes_for(node, n)
    chunks = -(-n // lanes)
    if chunks > ROW_MAX_CHUNKS:
        return (f"a row of {n} columns over the {lanes} lanes of one work-group needs {chunks} "
                f"accumulators per work-item (at most {ROW_MAX_CHUNKS})")
    return None


def _row_product(
    node: Node,
    rows: int,
    m: int,
    n: int,
    k: int,
    a_elem: str,
    b_elem: str,
    store: str,
    params: list[Param],
    inputs: list[str],
    comment: str,
    row_of_group: str = "grp",
) -> OpKernel:
    """One work-group per output row, laid out like the row reduction of the same row length
    (:mod:`polyfuse.oplib.reduce`): lane ``l`` computes the columns ``c * LANES + l``.
    Work-group ``grp`` computes row ``row_of_group`` (an expression of ``grp``): a permutation
    of the rows when a row-permuting Transpose lies between the product and its reduction.

    A row reduction (Softmax, LayerNormalization) that follows then reads each element in the
    work-item that wrote it: a thread-width dependence on the same launch shape, which fusion
    joins (element-wise consumers in between cover the same layout, :mod:`.blocked`).  The row's
    A element is the same for every lane; each lane keeps its columns in named scalar
    accumulators (see :func:`_blocked_product`).  ``row`` is the flat output row (batch
    included), ``batch`` the batch index where ``a_elem``/``b_elem`` use it.
    """
    lanes = lanes_for(node, n)
    chunks = -(-n // lanes)
    cols = ["lane" if c == 0 else f"({c * lanes} + lane)" for c in range(chunks)]
    ragged = n % lanes != 0
    lines = ["const int grp = get_group_id(0);", "const int lane = get_local_id(0);",
             f"const int row = {row_of_group};"]
    if re.search(r"\bbatch\b", a_elem + b_elem):
        lines.append("const int batch = row / M;")
    lines += [f"float acc_{c} = 0.0f;" for c in range(chunks)]
    lines += ["for (int kk = 0; kk < K; kk++) {", f"    const float av = {a_elem};"]
    for c in range(chunks):
        update = f"acc_{c} += av * {_at(b_elem, cols[c], 'col')};"
        if ragged and c == chunks - 1:
            lines += [f"    if (lane < {n - c * lanes}) {{", f"        {update}", "    }"]
        else:
            lines.append(f"    {update}")
    lines.append("}")
    for c in range(chunks):
        stmt = _at(store.replace("acc[c]", f"acc_{c}"), cols[c], "col") + ";"
        if ragged and c == chunks - 1:
            lines += [f"if (lane < {n - c * lanes}) {{", f"    {stmt}", "}"]
        else:
            lines.append(stmt)
    defines = {"M": m, "N": n, "K": k, "LANES": lanes}
    source = render(node, defines, params, "\n".join(lines) + "\n",
                    comment + f" (one work-group of {lanes} per row)")
    gsize, lsize = (rows * lanes,), (lanes,)
    layout = BlockLayout(
        global_size=gsize, local_size=lsize,
        prologue="const int grp = get_group_id(0);\nconst int lane = get_local_id(0);",
        guard="", rows=1, cols=chunks, lead=row_of_group, col=f"bj * {lanes} + lane",
        lead_extent=rows, col_extent=n, col_guard=f"col < {n}" if ragged else "",
    )
    return replace(make_kernel(node, source, gsize, lsize, inputs, ["y"]), block=layout)


def _product(
    node: Node,
    m: int,
    n: int,
    k: int,
    *,
    a: Callable[[str], str],
    b: Callable[[str], str],
    store: Callable[[str], str],
    params: list[Param],
    inputs: list[str],
    batch: int,
    comment: str,
    whole_rows: bool = False,
    row_a: Optional[Callable[[str], str]] = None,
    row_b: Optional[Callable[[str], str]] = None,
    row_store: Optional[Callable[[str], str]] = None,
    row_of_group: str = "grp",
    blocked_init: Optional[tuple[str, Callable[[str], str]]] = None,
) -> OpKernel:
    """The tiled, blocked or register-tiled product (the variant's ``product_form``) from one
    description: ``a``/``b`` give the A/B element at a reduction index variable, ``store``
    the write of an accumulator;
    ``blocked_init``, when given, is the blocked form's accumulator start and the store that
    goes with it (see :func:`_blocked_product`).

    ``whole_rows`` (a row reduction consumes the output) asks the tiled form for the whole-row
    layout (:func:`_row_product`; ``row_*`` describe A, B and the store with ``row`` the flat
    output row, default ``a``/``b``/``store``; ``row_of_group`` orders the rows); where the row
    does not fit, the tiled kernel says why in its ``note``."""
    if node.variant.product_form == "tiled":
        why = row_form_problem(node, n) if whole_rows else None
        if whole_rows and why is None:
            return _row_product(
                node, batch * m, m, n, k, a_elem=(row_a or a)("kk"), b_elem=(row_b or b)("kk"),
                store=(row_store or store)("acc[c]"), params=params, inputs=inputs,
                comment=comment, row_of_group=row_of_group,
            )
        opk = _tiled_product(
            node, m, n, k, a_load=a("ka"), b_load=b("kb"), store=store("acc"),
            params=params, inputs=inputs, batch=batch, comment=comment,
        )
        return replace(opk, note=f"tiled, not whole-row: {why}") if why else opk
    init, blocked_store = blocked_init or ("0.0f", store)
    if node.variant.product_form == "register_tiled":
        shape = register_tile_shape(node, m, n, k, batch)
        if shape is None:
            opk = _tiled_product(
                node, m, n, k, a_load=a("ka"), b_load=b("kb"), store=store("acc"),
                params=params, inputs=inputs, batch=batch, comment=comment,
            )
            return replace(opk, note=f"tiled, not register-tiled: no register tile divides "
                                     f"the {m}x{n} output")
        return _register_tiled_product(
            node, m, n, k, shape, a_elem=a("kk"), b_elem=b("kk"),
            store=blocked_store("acc[i][j]"), params=params, inputs=inputs, batch=batch,
            comment=comment, init=init,
        )
    return _blocked_product(
        node, m, n, k, a_elem=a("kk"), b_elem=b("kk"), store=blocked_store("acc[i][j]"),
        params=params, inputs=inputs, batch=batch, comment=comment, init=init,
    )


def matmul(node: Node, whole_rows: bool = False, row_of_group: str = "grp") -> OpKernel:
    """numpy.matmul semantics: 1-D operands promoted, batch dimensions broadcast.
    ``whole_rows``: see :func:`_product`."""
    node.check_attrs(["packed_panel"])
    sa, sb = node.input(0), node.input(1)
    if not sa or not sb:
        raise node.invalid("MatMul operands must have rank >= 1")
    a2 = (1,) + sa if len(sa) == 1 else sa
    b2 = sb + (1,) if len(sb) == 1 else sb
    m, k = a2[-2:]
    k2, n = b2[-2:]
    if k != k2:
        raise node.invalid(f"inner dimensions differ: {sa} @ {sb}")
    batch_shape = broadcast_shape(node, [a2[:-2], b2[:-2]])
    out = batch_shape + ((m,) if len(sa) > 1 else ()) + ((n,) if len(sb) > 1 else ())
    node.check_output(0, out)
    batch = prod(batch_shape)
    a_batch = broadcast_strides(node, a2[:-2], batch_shape)
    b_batch = broadcast_strides(node, b2[:-2], batch_shape)
    params = [Param("a", sa), Param("b", sb), Param("y", out, const=False)]
    comment = f"MatMul {shape_str(sa)} @ {shape_str(sb)} -> {shape_str(out)}"
    contiguous = all(sa_ == sc for sa_, sc, d in zip(a_batch, strides_of(batch_shape),
                                                     batch_shape) if d > 1)
    if batch > 1 and not any(b_batch) and contiguous:
        # B shared by every batch and A contiguous over it: one (batch*M) x K @ K x N product
        comment += f" (batch folded into M = {batch * m})"
        m, batch = batch * m, 1
    a_off = index_expr("batch", batch_shape, [s * m * k for s in a_batch]) if batch > 1 else ""
    b_off = index_expr("batch", batch_shape, [s * k * n for s in b_batch]) if batch > 1 else ""
    y_off = "batch * M * N + " if batch > 1 else ""
    a_pre = f"{a_off} + " if a_off and a_off != "0" else ""
    b_pre = f"{b_off} + " if b_off and b_off != "0" else ""
    # whole-row form: ``row`` is the flat output row (batch * M + row), the output contiguous
    a_flat = contiguous and a2[:-2] == batch_shape
    return _product(
        node, m, n, k,
        a=lambda kv: f"a[{a_pre}row * K + {kv}]",
        b=_b_reader(node, m, n, k, b_pre),
        store=lambda acc: f"y[{y_off}row * N + col] = {acc}",
        params=params,
        inputs=["a", "b"],
        batch=batch,
        comment=comment,
        whole_rows=whole_rows and len(sb) > 1,
        row_a=lambda kv: f"a[row * K + {kv}]" if a_flat or batch == 1
        else f"a[{a_pre}(row % M) * K + {kv}]",
        row_store=lambda acc: f"y[row * N + col] = {acc}",
        row_of_group=row_of_group,
    )


def _b_reader(node: Node, m: int, n: int, k: int, b_pre: str) -> Callable[[str], str]:
    """B's element at (``kv``, ``col``): row-major, or in the panels the ONNX front-end packed
    a constant B into (``packed_panel`` = CB: panel ``c0 / CB`` holds K x CB contiguous
    floats, so the element is at ``kv * CB + c0 * K + col - c0``; affine in the ids, the
    loop and the block position, with no division)."""
    panel = node.int_attr("packed_panel", 0)
    if not panel:
        return lambda kv: f"b[{b_pre}{kv} * N + col]"
    width = block_shape(m, n, k, node.variant.block_cols, node.variant.vector_width)[1]
    if node.variant.product_form != "blocked" or width != panel:
        raise node.invalid(f"B packed in panels of {panel} columns, but the kernel's blocks "
                           f"are {width} wide in "
                           f"the {node.variant.product_form} form")
    # the loop's term first and the rest grouped: PoCL 3.1 then reads the block's columns as
    # vectors (108 GFLOP/s at 128x3072x768); ``c0 * K + kv * CB + ...`` ran at 62
    return lambda kv: f"b[{kv} * CB + ({b_pre}c0 * K + (col - c0))]"


def gemm(node: Node, whole_rows: bool = False, row_of_group: str = "grp") -> OpKernel:
    """Y = alpha * op(A) @ op(B) + beta * C, C unidirectionally broadcast to (M, N).
    ``whole_rows``: see :func:`_product`."""
    node.check_attrs(["alpha", "beta", "transA", "transB", "packed_panel"])
    alpha = float(node.attr("alpha", 1.0))
    beta = float(node.attr("beta", 1.0))
    ta, tb = node.int_attr("transA", 0), node.int_attr("transB", 0)
    sa, sb = node.input(0), node.input(1)
    if len(sa) != 2 or len(sb) != 2:
        raise node.invalid(f"A and B must be 2-D, got {sa} and {sb}")
    m, k = (sa[1], sa[0]) if ta else sa
    k2, n = (sb[1], sb[0]) if tb else sb
    if k != k2:
        raise node.invalid(f"inner dimensions differ: {sa} (transA={ta}) @ {sb} (transB={tb})")
    node.check_output(0, (m, n))
    has_c = node.has_input(2) and beta != 0.0
    params = [Param("a", sa), Param("b", sb)]
    inputs = ["a", "b"]
    value = "{acc}" if alpha == 1.0 else f"{flt(alpha)} * {{acc}}"
    if node.has_input(2):
        sc = node.input(2)
        params.append(Param("c", sc))
        inputs.append("c")
        if has_c:
            cs = broadcast_strides(node, sc, (m, n))
            terms = [
                v if st == 1 else f"{v} * {st}" for v, st in zip(("{row}", "{col}"), cs) if st
            ]
            c_index = " + ".join(terms) or "0"
            c_val = f"c[{c_index}]" if beta == 1.0 else f"{flt(beta)} * c[{c_index}]"
            value = f"{value} + {c_val}"
    params.append(Param("y", (m, n), const=False))
    blocked_init = None
    if has_c and alpha == 1.0:  # C starts the blocked form's accumulators
        blocked_init = (value.removeprefix("{acc} + ").format(row="row", col="col"),
                        lambda acc: f"y[row * N + col] = {acc}")
    return _product(
        node, m, n, k,
        a=lambda kv: f"a[{kv} * M + row]" if ta else f"a[row * K + {kv}]",
        b=(lambda kv: f"b[col * K + {kv}]") if tb else _b_reader(node, m, n, k, ""),
        store=lambda acc: f"y[row * N + col] = {value.format(acc=acc, row='row', col='col')}",
        params=params,
        inputs=inputs,
        batch=1,
        comment=f"Gemm {shape_str(sa)} x {shape_str(sb)} transA={ta} transB={tb}",
        whole_rows=whole_rows,
        row_of_group=row_of_group,
        blocked_init=blocked_init,
    )


def explicit_pads(auto: str, pads: Optional[Sequence[int]], size: Sequence[int],
                  kernel: Sequence[int], strides: Optional[Sequence[int]] = None,
                  dil: Optional[Sequence[int]] = None) -> Optional[list[int]]:
    """Begin/end pads [b0, b1, e0, e1] of a Conv from ``pads`` or ``auto_pad`` (ONNX rules);
    None when the attributes are not valid (:func:`conv_pads` says why)."""
    nd = len(size)
    strides = list(strides or [1] * nd)
    dil = list(dil or [1] * nd)
    if len(strides) != nd or len(dil) != nd or len(kernel) != nd or min(strides + dil) < 1:
        return None
    if auto == "NOTSET":
        given = list(pads or [0] * (2 * nd))
        return given if len(given) == 2 * nd else None
    if auto == "VALID":
        return [0] * (2 * nd)
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        return None
    begin, end = [], []
    for i in range(nd):
        out = -(-size[i] // strides[i])
        total = max(0, (out - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - size[i])
        small = total // 2
        begin.append(small if auto == "SAME_UPPER" else total - small)
        end.append(total - begin[-1])
    return begin + end


def conv_pads(
    node: Node, size: list[int], kernel: list[int], strides: list[int], dil: list[int]
) -> list[int]:
    """Begin/end pads [b0, b1, e0, e1] from ``pads`` or ``auto_pad`` (ONNX rules)."""
    auto = str(node.attr("auto_pad", "NOTSET"))
    nd = len(size)
    pads = explicit_pads(auto, node.ints_attr("pads"), size, kernel, strides, dil)
    if pads is not None:
        return pads
    if auto in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise node.invalid(f"attribute 'pads' must have {2 * nd} values, got "
                           f"{node.ints_attr('pads')}")
    raise node.unsupported(f"attribute 'auto_pad'={auto!r} is not supported")


def conv(node: Node) -> OpKernel:
    """Direct 1-D/2-D NCHW convolution: one work-item per output element (a block of them
    in the ``blocked`` form: :func:`_blocked_conv`; a 1x1 one there is a product,
    :func:`_pointwise_conv`).

    Loops over the group's input channels and the kernel window have constant bounds; padding is
    a guard on the (affine) input position, never a clamped subscript.
    """
    node.check_attrs(["auto_pad", "dilations", "group", "kernel_shape", "pads", "strides",
                      "packed_weights", "im2col"])
    if node.int_attr("im2col", 0):
        return _im2col_conv(node)
    sx, sw = node.input(0), node.input(1)
    w_shape = sw
    packed = bool(node.int_attr("packed_weights", 0))
    if packed:  # W packed by the front-end as (G, CPG, KH, KW, MPG): see pack_conv_weights
        if len(sw) != 5 or len(sx) != 4 or node.int_attr("group", 1) != sw[0]:
            raise node.invalid(f"packed weights {sw} do not match X {sx}")
        sw = (sw[0] * sw[4], *sw[1:4])
    if len(sx) not in (3, 4) or len(sw) != len(sx):
        raise node.unsupported(
            f"only 1-D and 2-D convolution (rank-3/4 input) is supported, got X {sx}, W {sw}"
        )
    nd = len(sx) - 2
    group = node.int_attr("group", 1)
    strides = node.ints_attr("strides", [1] * nd) or [1] * nd
    dil = node.ints_attr("dilations", [1] * nd) or [1] * nd
    if len(strides) != nd or len(dil) != nd or min(strides + dil) < 1:
        raise node.invalid(f"bad 'strides' {strides} or 'dilations' {dil}")
    kshape = node.ints_attr("kernel_shape")
    if kshape is not None and tuple(kshape) != tuple(sw[2:]):
        raise node.invalid(f"attribute 'kernel_shape' {kshape} differs from W's shape {sw}")
    batch, cin = sx[0], sx[1]
    cout, cpg = sw[0], sw[1]
    if group < 1 or cin % group or cout % group or cin // group != cpg:
        raise node.invalid(f"group={group} does not match X {sx} and W {sw}")
    pads = conv_pads(node, list(sx[2:]), list(sw[2:]), strides, dil)
    if nd == 1:  # a 1-D convolution is a 2-D one with a unit height
        sx4, sw4 = (*sx[:2], 1, sx[2]), (*sw[:2], 1, sw[2])
        strides, dil, pads = [1, strides[0]], [1, dil[0]], [0, pads[0], 0, pads[1]]
    else:
        sx4, sw4 = sx, sw
    h, w = sx4[2:]
    kh, kw = sw4[2:]
    oh = (h + pads[0] + pads[2] - (kh - 1) * dil[0] - 1) // strides[0] + 1
    ow = (w + pads[1] + pads[3] - (kw - 1) * dil[1] - 1) // strides[1] + 1
    if oh < 1 or ow < 1:
        raise node.invalid("the convolution window does not fit the padded input")
    out = (batch, cout, oh, ow) if nd == 2 else (batch, cout, ow)
    node.check_output(0, out)
    bias: Optional[tuple[int, ...]] = node.input(2) if node.has_input(2) else None
    if bias is not None and bias != (cout,):
        raise node.invalid(f"bias B has shape {bias}, expected ({cout},)")
    defines = {
        "C": cin, "H": h, "W": w, "M": cout, "OH": oh, "OW": ow, "CPG": cpg, "MPG": cout // group,
        "KH": kh, "KW": kw, "SH": strides[0], "SW": strides[1], "DH": dil[0], "DW": dil[1],
        "PH": pads[0], "PW": pads[1],
    }
    if node.variant.product_form == "blocked" and group == 1 and (kh, kw) == (1, 1) and \
            strides == [1, 1] and not any(pads) and not packed:
        return _pointwise_conv(node, sx, sw, out, bias, batch, cin, cout, h * w)
    params, inputs = _conv_params(sx, w_shape, bias, out)
    comment = (
        f"Conv X {shape_str(sx)} W {shape_str(sw)} group={group} strides={strides} "
        f"dilations={dil} pads={pads} -> {shape_str(out)}" + (" (W packed)" if packed else "")
    )
    if node.variant.product_form == "blocked":
        return _blocked_conv(node, defines, params, inputs, comment, batch, group, pads,
                             bias is not None, packed)
    w_index = "((g * CPG + c) * KH * KW + kh * KW + kw) * MPG + m % MPG" if packed \
        else "((m * CPG + c) * KH + kh) * KW + kw"
    x_index = "((n * C + g * CPG + c) * H + ih) * W + iw"
    total = prod(out)
    ow_e = "gid % OW"
    oh_e = "(gid / OW) % OH" if oh > 1 else "0"
    m_e = "(gid / (OW * OH)) % M"
    n_e = "gid / (OW * OH * M)" if batch > 1 else "0"
    stmts = f"""
const int ow = {ow_e};
const int oh = {oh_e};
const int m = {m_e};
const int n = {n_e};
const int g = m / MPG;
float acc = {'bias[m]' if bias is not None else '0.0f'};
for (int c = 0; c < CPG; c++) {{
    for (int kh = 0; kh < KH; kh++) {{
        for (int kw = 0; kw < KW; kw++) {{
            const int ih = oh * SH - PH + kh * DH;
            const int iw = ow * SW - PW + kw * DW;
            if (ih >= 0 && ih < H && iw >= 0 && iw < W) {{
                acc += x[{x_index}] * w[{w_index}];
            }}
        }}
    }}
}}
y[gid] = acc;
"""
    return elementwise_kernel(node, total, params, defines, stmts, inputs, ["y"], comment)


def _conv_params(sx: tuple[int, ...], sw: tuple[int, ...], bias: Optional[tuple[int, ...]],
                 out: tuple[int, ...]) -> tuple[list[Param], list[str]]:
    """A Conv kernel's parameters (X, W, the bias when given, Y) and its bound inputs."""
    params, inputs = [Param("x", sx), Param("w", sw)], ["x", "w"]
    if bias is not None:
        params.append(Param("bias", bias))
        inputs.append("bias")
    return params + [Param("y", out, const=False)], inputs


def _divisor_at_most(n: int, cap: int) -> int:
    """Largest divisor of ``n`` that is at most ``cap`` (at least 1)."""
    return max(d for d in range(1, max(1, min(n, cap)) + 1) if n % d == 0)


def _conv_channel_vectors(mpg: int, vector_width: int) -> tuple[int, int]:
    """(channels, lanes) of a direct Conv block in vectors along its output channels: two
    vectors' worth of the group's ``mpg`` channels where it has them; lanes 1 (no vectors)
    for depthwise groups (fewer than 4 channels) or a device without vectors."""
    if mpg < 4 or vector_width <= 1:
        return 0, 1
    mb = _divisor_at_most(mpg, 2 * vector_width)
    return mb, vector_lanes(vector_width, mb)


def conv_block_shape(mpg: int, ow: int, stride: int, budget: int,
                     vector_width: int = 1) -> tuple[int, int]:
    """(output channels, contiguous output columns) per work-item of the blocked direct Conv,
    at most ``budget`` accumulators; chosen by thread CPU time on PoCL 3.1 (AVX-512, weights
    packed), against numpy's one-thread sgemm on the implicit product.

    - In vectors along the channels (``vector_width`` lanes, weights packed, 4 or more
      channels per group): two vectors of channels where the group has them, and as many
      output columns (any divisor of the row, at any stride: each is a broadcast load) as
      make ``vector_width`` accumulator vectors, as :func:`vector_block_rows` (64 -> 64, 3x3
      at 56 x 56: 32 x 8 256 GFLOP/s, 32 x 7 256, 16 x 14 250, 16 x 8 227, 64 x 2 154; the
      scalar 16 x 8 96).

    - Few channels per group (depthwise): as much of the output row as half the budget holds
      (at 192 x 56 x 56, 3x3: the whole row of 56 ran 0.22 ms, 28 columns 0.36, 8 columns
      0.70, blocks of 8 rows x 8 columns 0.60): per work-item overhead dominates.
    - Stride 1: 16 or 8 columns (two or one float vectors) where they divide the row, else the
      largest divisor up to 16, and as many of the group's channels as the budget allows, up
      to 16 (64 -> 64 channels, 3x3 at 56 x 56: 16 x 8 1.0-1.2x numpy, 8 x 8 0.9x, 16 x 4
      0.6x, 32 x 1 0.5x, 2 x 56 0.5x).
    - Strided: 2 columns, up to 32 channels (128 -> 128, stride 2 to 28 x 28: 32 x 2 63
      GFLOP/s, 16 x 2 47, 16 x 4 38, 8 x 14 5.6): the columns' loads are not contiguous and
      do not vectorize (regrouping the input's columns by phase so they are made no
      difference at these widths: 62 GFLOP/s at 32 x 2).
    - Never a column count that is not a power of two: a row of 28 (ResNet's second stage,
      128 -> 128 3x3 at stride 1) in blocks of 14 ran at 2.6-5.8 GFLOP/s, of 4 at 51; 14 in
      blocks of 2 with 32 channels 62, 7 in blocks of 1 with 32 channels 54 (16: 28).  Up to
      16 channels with 4 or more columns, 32 with fewer."""
    mb, width = _conv_channel_vectors(mpg, vector_width)
    if width > 1:
        return mb, _divisor_at_most(ow, max(1, vector_width * width // mb))
    if mpg < 4:
        ob = _divisor_at_most(ow, max(1, budget // 2))
    elif stride > 1:
        ob = _largest_divisor(ow, 2)
    else:
        ob = next((c for c in (16, 8) if ow % c == 0 and 2 * c <= budget), 0) or \
            _largest_divisor(ow, 4)
    cap = 16 if ob >= 4 else 32
    return _divisor_at_most(mpg, min(cap, max(1, budget // ob))), ob


def conv_pads_in_kernel(mpg: int, ow: int, stride: int, budget: int,
                        row_dilation: int = 1) -> bool:
    """Whether the ``blocked`` direct Conv reads its padding itself (no Pad launch before it):
    where its block is the whole output row (few channels per group: depthwise), each load's
    column is known when the kernel is generated, so a pad column is a zero it never loads
    and a pad row outside the bounds of the loop over the window's rows.  MobileNetV2's
    depthwise 3x3 at 192 x 56 x 56: 0.14-0.17 ms of Pad launch gone, the Conv as fast as on
    the padded copy.  (Dilated rows would take a guard per window row, which kept the loads
    from vectorizing.)"""
    return mpg < 4 and row_dilation == 1 and conv_block_shape(mpg, ow, stride, budget)[1] == ow


def conv_as_product(group: int, kernel: Sequence[int], out_hw: Sequence[int],
                    strides: Sequence[int], mpg: int, budget: int,
                    vector_width: int = 1) -> bool:
    """Whether the ``blocked`` variant runs a Conv as an implicit GEMM (the ONNX front-end's
    :func:`im2col` launch, then the product ``W (M x C*KH*KW) @ cols (C*KH*KW x OH*OW)``,
    :func:`_im2col_conv`) rather than the direct kernel :func:`_blocked_conv`: where the
    direct block has fewer than 8 columns (rows that are not a multiple of 8, or a stride)
    and the output has at least 128 pixels, or at least 32 with 256 output channels or more
    (ResNet-50's last stage).  Thread CPU time of the kernels alone, PoCL 3.1 ``basic``,
    direct against Im2Col (in panels) + product: ResNet-50's 3x3 Convs 128 -> 128 at 28 x 28
    49 against 98 GFLOP/s (the pair 0.91x numpy), at stride 2 from 56 46 against 94; 256 ->
    256 at 14 x 14 51 against 89; 512 -> 512 at 7 x 7 13-14 against 77 (the product's 64
    columns of which 49 stored; 1.05x numpy with the Im2Col).  56-column rows keep the
    direct Conv (16 x 8, 82 GFLOP/s; as a product 63 with its Im2Col), and so do grouped
    and depthwise Convs.  A 1x1 Conv is a product already (:func:`_pointwise_conv`); it goes
    through an Im2Col (a copy with its columns rounded up to 16) only where its pixels are
    not a multiple of 16: at 14 x 14 (ResNet-50's third stage) 256 -> 1024 ran in blocks of
    4 columns at 28-30 GFLOP/s (0.27-0.29x numpy), with the copy at 84 (0.77x with the
    copy); 2048 -> 512 at 7 x 7 in blocks of 1 at 18, with the copy at 76 (0.90x)."""
    pixels = out_hw[0] * out_hw[1]
    if group != 1 or len(kernel) != 2 or pixels < (128 if mpg < 256 else 32):
        return False
    if tuple(kernel) == (1, 1):
        return pixels % 16 != 0
    return conv_block_shape(mpg, out_hw[1], max(strides), budget)[1] < 8 and \
        _conv_channel_vectors(mpg, vector_width)[1] == 1


def im2col_columns(pixels: int, variant: KernelVariant) -> int:
    """Columns of an :func:`im2col` output of ``pixels`` output pixels: rounded up to a
    multiple of 16 (zeros after the pixels), so the product's column blocks are at least 16
    wide (14 x 14 = 196 pixels ran in blocks of 4 at 37 GFLOP/s, 7 x 7 in blocks of 1 at
    10); in vectors, to a multiple of the target's block width, so the blocks are the full 8 x
    32 (256 x 196 x 1024: 8 x 16 blocks of 208 columns 199 GFLOP/s, 8 x 32 of 224 251, 233
    counting the padding's work)."""
    if vector_lanes(variant.vector_width, variant.block_cols) > 1:
        return round_up(pixels, max(16, variant.block_cols))
    return round_up(pixels, 16)


def im2col_panel(columns: int, block_cols: int) -> int:
    """Columns of each panel of an :func:`im2col` output of ``columns`` columns (a multiple
    of 16): the product's block width, the largest power of two up to the target's
    ``block_cols`` dividing them.  The product's blocks are BLOCK_ROWS x this
    (:func:`_im2col_conv`); with B in panels no taller, narrower block pays (at 512 x 4608 x
    64, ResNet-50's 7 x 7 stage, 4 x 32 ran at 104 GFLOP/s, 8 x 16 at 70, 16 x 8 at 55)."""
    return _largest_divisor(columns, block_cols)


def im2col_block_rows(m: int, k: int, cb: int, variant: KernelVariant) -> int:
    """Rows of the Im2Col product's block (its columns are the panel width ``cb``): in vectors
    :func:`vector_block_rows` of the target's block width (8 x 16 ran 200 GFLOP/s at
    128 x 784 x 1152 where 16 x 16 ran 179); as named scalars BLOCK_ROWS, or twice that where
    the K x ``cb`` panel of B each row block streams is larger than :data:`PANEL_BYTES`, as
    :func:`block_shape` does for a product's own B.  ResNet-50's last 3x3 Conv (512 x 64 x
    4608, a 590 kB panel): 8 x 32 blocks 89-101 GFLOP/s against 72-78 for 4 x 32 (numpy
    77-83); at K 2048 and 512 both ran 100-110."""
    if vector_lanes(variant.vector_width, cb) > 1:
        return _largest_divisor(m, vector_block_rows(variant.vector_width, variant.block_cols))
    rows = BLOCK_ROWS * 2 if k * cb * 4 > PANEL_BYTES else BLOCK_ROWS
    return _largest_divisor(m, rows)


def im2col(node: Node) -> OpKernel:
    """The ONNX front-end's own ``Im2Col`` (never a model's): the windows of a (padded) NCHW
    input as the columns of a product, ``y[n][(c*KH + kh)*KW + kw][oh*OW + ow] =
    x[n][c][oh*SH + kh*DH][ow*SW + kw*DW]``, each row zero after its OH*OW pixels up to the
    output's width (:func:`im2col_columns`), so a KxK Conv becomes a product
    (:func:`conv_as_product`).  A work-item per image, input channel and output row copies
    the row's KH*KW windows, the column a loop, the window steps written out: no division,
    every subscript affine, so the front-end models it exactly.  One work-item per output
    element (the indices split by divisions) ran at 2.5 GB/s: 1.43 ms for ResNet-50's 28 x
    28 stage against 0.40 as a loop.

    A 1x1 window at stride 1 may lay its output out in panels of ``panel`` columns (the
    product's block width, :func:`im2col_panel`): panel ``p / panel`` holds K x ``panel``
    contiguous floats, which the product streams (see :func:`_im2col_conv`), each panel's
    row of a channel a run of input pixels, copied by a work-item per panel and channel
    (affine again).  A larger window's panels would divide each pixel by the panel width:
    the product ran faster (ResNet-50's 3x3 at 28 x 28: 75 GFLOP/s in rows, 98 in panels),
    but the performance model's footprints of those stores made the cold sessions of
    ResNet-50's stages 2-3x slower to build."""
    node.check_attrs(["kernel_shape", "strides", "dilations", "panel"])
    sx, out = node.input(0), node.output_shapes[0]
    kshape = node.ints_attr("kernel_shape") or []
    strides = node.ints_attr("strides", [1, 1]) or [1, 1]
    dil = node.ints_attr("dilations", [1, 1]) or [1, 1]
    if len(sx) != 4 or len(kshape) != 2 or len(strides) != 2 or len(dil) != 2 or \
            min(*kshape, *strides, *dil) < 1 or out is None or len(out) != 3:
        raise node.invalid(f"Im2Col of X {sx} to {out} with kernel {kshape}, strides "
                           f"{strides}, dilations {dil}")
    batch, c, h, w = sx
    kh, kw = kshape
    oh = (h - (kh - 1) * dil[0] - 1) // strides[0] + 1
    ow = (w - (kw - 1) * dil[1] - 1) // strides[1] + 1
    if oh < 1 or ow < 1 or out[:2] != (batch, c * kh * kw) or out[2] < oh * ow:
        raise node.invalid(f"the window does not fit the input, or the output {out} the "
                           f"windows")
    panel = node.int_attr("panel", out[2])
    if panel < 1 or out[2] % panel or panel < out[2] and (kh, kw, *strides) != (1, 1, 1, 1):
        raise node.invalid(f"panels of {panel} columns: not a 1x1 window at stride 1, or "
                           f"they do not divide the output {out}")
    defines = {"C": c, "H": h, "W": w, "KH": kh, "KW": kw, "SH": strides[0], "SW": strides[1],
               "DH": dil[0], "DW": dil[1], "OH": oh, "OW": ow, "PP": out[2], "CB": panel}
    n_id = f"const int n = {'get_global_id(2)' if batch > 1 else '0'};"
    gsize: tuple[int, ...]
    if panel < out[2]:
        lines = ["const int pb = get_global_id(0);", "const int c = get_global_id(1);", n_id,
                 "for (int j = 0; j < CB; j++) {",
                 "    if (pb * CB + j < OH * OW) {",
                 "        y[n * C * PP + pb * C * CB + c * CB + j] = "
                 "x[(n * C + c) * H * W + pb * CB + j];",
                 "    } else {",
                 "        y[n * C * PP + pb * C * CB + c * CB + j] = 0.0f;", "    }", "}"]
        gsize = (out[2] // panel, c, batch)
    else:
        row = "((n * C + c) * KH * KW + {t}) * PP"
        lines = ["const int oh = get_global_id(0);", "const int c = get_global_id(1);", n_id,
                 "for (int ow = 0; ow < OW; ow++) {",
                 *(f"    y[{row.format(t=i * kw + j)} + oh * OW + ow] = "
                   f"x[((n * C + c) * H + oh * SH + {i} * DH) * W + ow * SW + {j} * DW];"
                   for i in range(kh) for j in range(kw)), "}"]
        if out[2] > oh * ow:
            lines += ["if (oh == 0) {", "    for (int p = OH * OW; p < PP; p++) {",
                      *(f"        y[{row.format(t=t)} + p] = 0.0f;" for t in range(kh * kw)),
                      "    }", "}"]
        gsize = (oh, c, batch)
    comment = (f"Im2Col X {shape_str(sx)} window {kh}x{kw} strides {strides} dilations {dil} "
               f"-> {shape_str(out)}" + (f" in panels of {panel} columns"
                                          if panel < out[2] else ""))
    lsize = (_divisor_at_most(gsize[0], min(node.max_work_group_size, 16)), 1, 1)
    source = render(node, defines, [Param("x", sx), Param("y", out, const=False)],
                    "\n".join(lines) + "\n", comment)
    return make_kernel(node, source, gsize, lsize, ["x"], ["y"])


def _im2col_conv(node: Node) -> OpKernel:
    """A Conv the front-end turned into a product (:func:`conv_as_product`): X is its
    :func:`im2col` (N, C*KH*KW, PP), PP >= OH*OW, in panels of ``im2col`` columns (the
    block width :func:`im2col_panel`, or PP: rows), W its weights as (M, C*KH*KW).  Per image
    the blocked product ``W @ X``, output channels as rows and pixels as columns, as
    :func:`_pointwise_conv`, in blocks of BLOCK_ROWS x :func:`im2col_panel`, each work-item
    streaming its K x CB panel; the columns past OH*OW (the zeros that
    fill the last column block) are computed and not stored, and the block layout says so
    (``col_guard``).  With the channels as columns instead (``X^T @ W^T``, the pixel-major
    im2col) the stores into the NCHW output are a channel apart, and LLVM's SLP vectorizer,
    which starts from runs of consecutive stores, then vectorized the block along its
    pixels: 42 GFLOP/s against 105 with the same loop stored row-major (784 x 128 x 1152)."""
    sx, sw = node.input(0), node.input(1)
    out = node.output_shapes[0]
    panel = node.int_attr("im2col", 0)
    cb = im2col_panel(sx[2], node.variant.block_cols) if len(sx) == 3 else 0
    if len(sx) != 3 or len(sw) != 2 or sx[1] != sw[1] or out is None or len(out) != 4 or \
            out[:2] != (sx[0], sw[0]) or out[2] * out[3] > sx[2] or panel not in (cb, sx[2]):
        raise node.invalid(f"product form of X {sx} in panels of {panel}, W {sw} -> {out}")
    batch, k, cols = sx
    m, p = sw[0], out[2] * out[3]
    bias = node.input(2) if node.has_input(2) else None
    if bias is not None and bias != (m,):
        raise node.invalid(f"bias B has shape {bias}, expected ({m},)")
    params, inputs = _conv_params(sx, sw, bias, out)
    x_off = "batch * K * N + " if batch > 1 else ""
    y_off = f"batch * {m * p} + " if batch > 1 else ""
    # the loop's term first and the rest grouped, as :func:`_b_reader` (PoCL's vectorizer)
    b_elem = f"x[kk * CB + ({x_off}c0 * K + (col - c0))]" if panel < cols \
        else f"x[{x_off}kk * N + col]"
    opk = _blocked_product(
        node, m, cols, k, a_elem="w[row * K + kk]", b_elem=b_elem,
        store=f"y[{y_off}row * {p} + col] = acc[i][j]", params=params, inputs=inputs,
        batch=batch, comment=f"Conv as the product of W {shape_str(sw)} and its Im2Col X "
        f"{shape_str(sx)}{f' in panels of {panel}' if panel < cols else ''} -> "
        f"{shape_str(out)}",
        init="bias[row]" if bias is not None else "0.0f", col_limit=p,
        shape=(im2col_block_rows(m, k, cb, node.variant), cb),
    )
    if opk.block is None or cols == p:
        return opk
    return replace(opk, block=replace(opk.block, col_extent=p, col_guard=f"col < {p}"))


def _blocked_conv(node: Node, defines: dict[str, int], params: list[Param], inputs: list[str],
                  comment: str, batch: int, group: int, pads: list[int], has_bias: bool,
                  packed: bool) -> OpKernel:
    """The direct Conv in the ``blocked`` form: each work-item computes MB output channels x
    OB contiguous output columns of one output row (:func:`conv_block_shape`) as named scalar
    accumulators (see :func:`_blocked_product`), looping over the group's input channels and
    the window's rows, the window's columns written out.  Each distinct input value of a step
    is loaded once (``xv_<col>``, offsets from the block's first column) and feeds every
    accumulator that uses it; a stride-1 window's loads are contiguous along the output row,
    so the compiler vectorizes them.  ``packed``: W is (G, CPG, KH, KW, MPG), the MB weights
    of a step contiguous (the front-end packs constant weights so).

    Padding is a guard on each load when the Conv has pads; the ONNX front-end gives the
    ``blocked`` variant's Convs an explicitly zero-padded input instead (a Pad launch), so the
    loads of the fast kernel are unguarded -- except where the block is the whole output row
    (depthwise, :func:`conv_pads_in_kernel`): there a pad column is a zero never loaded and a
    pad row outside the bounds of the loop over the window's rows, and at a stride the row is
    a loop over its columns (:func:`_strided_row_steps`).  Every subscript is affine in the
    block's base coordinates and the loop iterators."""
    mpg, oh, ow = defines["MPG"], defines["OH"], defines["OW"]
    kh_n, kw_n, sw_, dw = (defines[k] for k in ("KH", "KW", "SW", "DW"))
    cout, cpg = defines["M"], defines["CPG"]
    guard_rows, guard_cols = bool(pads[0] or pads[2]), bool(pads[1] or pads[3])
    vectors = node.variant.vector_width if packed and not (guard_rows or guard_cols) else 1
    mb, ob = conv_block_shape(mpg, ow, sw_, BLOCK_ROWS * node.variant.block_cols, vectors)
    width = _conv_channel_vectors(mpg, vectors)[1]
    owb_n, mblk = ow // ob, cout // mb
    defines = {**defines, "MB": mb, "OB": ob}
    # NDRange (column blocks, output rows, images x channel blocks): dimension 0, which CPU
    # runtimes iterate fastest, walks along the output row.  Three ids rather than one flat
    # id split by divisions keep the front-end's width analysis of the Pad that feeds the
    # Conv within isl's quota (at 56x56 it was not, as it was not with ``% OH`` on the row
    # id).  The remainder ``% MBLK`` is a no-op at batch 1 but tells the compiler the channel
    # block's range: without it the 3x3 Conv ran at 0.75x numpy's sgemm instead of 1.1x
    ids = ["const int owb = gx;", "const int oh = gy;",
           f"const int m0 = (gz % {mblk}) * {mb};"]
    if batch > 1:
        ids.append(f"const int n = gz / {mblk};")
    head = ids + (["const int n = 0;"] if batch == 1 else []) + [
        "const int g = m0 / MPG;" if group > 1 else "const int g = 0;",
    ]
    if packed:
        head.append("const int ml = m0 - g * MPG;")
    c_var = "c" if cpg > 1 else "0"
    ih = "oh * SH + kh * DH" + (" - PH" if guard_rows else "")
    # a whole-row block reads its own padding (conv_pads_in_kernel): each load's column is
    # known here, so a pad column is a zero, never loaded, and the row's pad is in each load's
    # constant offset, not in the row term: with ``- PH`` there the loads of a row did not
    # vectorize (192 x 56 x 56 at stride 1: 1.0 ms against 0.17-0.20)
    whole_row = conv_pads_in_kernel(mpg, ow, sw_, BLOCK_ROWS * node.variant.block_cols)
    x_row = f"((n * C + g * CPG + {c_var}) * H + {'oh * SH + kh * DH' if whole_row else ih}) * W"
    shift = -defines["PH"] * defines["W"] - defines["PW"]
    halves = halving_row_width(defines, node.variant.vector_width) if whole_row else 0
    if halves:
        body, decls, tail = _strided_row_vectors(defines, mb, halves, x_row, packed, c_var,
                                                 has_bias)
        head += decls
    elif whole_row and sw_ > 1:
        body, decls, tail = _strided_row_steps(defines, mb, x_row, shift, packed, c_var,
                                               has_bias)
        head += decls
    elif width > 1:
        body, decls, tail = _vector_conv_steps(defines, mb, ob, width, x_row, c_var, has_bias)
        head += decls
    else:
        acc = [[f"acc_{i}_{j}" for j in range(ob)] for i in range(mb)]
        head += [f"float {acc[i][j]} = {f'bias[m0 + {i}]' if has_bias else '0.0f'};"
                 for i in range(mb) for j in range(ob)]
        body = []
        loaded: set[int] = set()
        for kwv in range(kw_n):
            w_names = []
            for mi in range(mb):
                body.append(f"const float wv_{mi}_{kwv} = w[{_conv_w_at(packed, c_var, kwv, mi)}];")
                w_names.append(f"wv_{mi}_{kwv}")
            for j in range(ob):
                col = j * sw_ + kwv * dw
                if col not in loaded and whole_row:
                    loaded.add(col)
                    inside = 0 <= col - defines["PW"] < defines["W"]
                    # a zero, not a skipped step: the block's steps stay alike, which keeps
                    # them vectorizing
                    body.append(f"const float xv_{col} = "
                                f"{f'x[{x_row}{_plus(col + shift)}]' if inside else '0.0f'};")
                if col not in loaded:
                    loaded.add(col)
                    iw = f"owb * {ob * sw_} + {col}" + (" - PW" if guard_cols else "")
                    load = f"x[{x_row} + {iw}]"
                    conds = ([f"{ih} >= 0", f"{ih} < H"] if guard_rows else []) + \
                        ([f"{iw} >= 0", f"{iw} < W"] if guard_cols else [])
                    if conds:
                        body += [f"float xv_{col} = 0.0f;", f"if ({' && '.join(conds)}) {{",
                                 f"    xv_{col} = {load};", "}"]
                    else:
                        body.append(f"const float xv_{col} = {load};")
                body += [f"{acc[mi][j]} += xv_{col} * {w_names[mi]};" for mi in range(mb)]
        tail = [f"y[((n * M + m0 + {i}) * OH + oh) * OW + owb * OB + {j}] = {acc[i][j]};"
                for i in range(mb) for j in range(ob)]
    loop = ["for (int kh = 0; kh < KH; kh++) {"]
    if halves:  # the window's rows written out, each under its own guard
        loop = []
    elif whole_row and guard_rows and defines["DH"] == 1:
        # a pad row is outside the bounds of the loop over the window's rows: under a guard
        # per window row, or with the rows written out, a row's loads did not vectorize
        # (0.8-3.4 ms for the 0.17-0.20 above)
        loop = ["const int kh_lo = oh * SH < PH ? PH - oh * SH : 0;",
                "const int kh_hi = oh * SH - PH + KH > H ? H + PH - oh * SH : KH;",
                "for (int kh = kh_lo; kh < kh_hi; kh++) {"]
    elif whole_row and guard_rows:  # dilated rows: a guard per window row
        body = [f"if ({ih} >= 0 && {ih} < H) {{", *("    " + ln for ln in body), "}"]
    if loop:
        body = [*loop, *("    " + ln for ln in body), "}"]
    if cpg > 1:
        body = ["for (int c = 0; c < CPG; c++) {", *("    " + ln for ln in body), "}"]
    gids = [f"const int {v} = get_global_id({d});" for d, v in enumerate(("gx", "gy", "gz"))]
    lines = [*gids, *head, *body, *tail]
    source = render(node, defines, params, "\n".join(lines) + "\n",
                    comment + f" ({mb} channels x {ob} columns per work-item)")
    gsize = (owb_n, oh, batch * mblk)
    lx = _divisor_at_most(owb_n, min(node.max_work_group_size, 16))
    lsize = (lx, _divisor_at_most(oh, max(1, min(node.max_work_group_size, 64) // lx)), 1)
    opk = make_kernel(node, source, gsize, lsize, inputs, ["y"])
    prologue = "\n".join(gids + ids)
    layout = BlockLayout(
        global_size=gsize, local_size=lsize, guard="", prologue=prologue, rows=mb, cols=ob,
        lead=f"(n * {cout} + m0 + bi) * {oh} + oh" if batch > 1
        else f"(m0 + bi) * {oh} + oh",
        col=f"owb * {ob} + bj", lead_extent=batch * cout * oh, col_extent=ow,
        col_base=f"owb * {ob}",
    )
    return replace(opk, block=layout)


def _vector_conv_steps(defines: dict[str, int], mb: int, ob: int, width: int, x_row: str,
                       c_var: str, has_bias: bool) -> tuple[list[str], list[str], list[str]]:
    """A block of :func:`_blocked_conv` in vectors along its ``mb`` output channels (weights
    packed, no padding in the kernel): per window step ``vload<width>`` of each vector of
    weights, one broadcast load per input column, and a vector multiply-add per (column,
    vector); after the loops each output is the named scalar ``acc_i_j`` again, so the stores
    and any fused epilogue are the scalar block's.  Why: as named scalars LLVM vectorized the
    block along its columns, 8 wide (AVX-512 tuned for 256 bits) and only where the columns
    were contiguous; along the channels the vectors are full at any stride and row width
    (64 -> 64, 3x3 at 56 x 56: 256 GFLOP/s against 96, PoCL 3.1 ``basic``).  (body of one
    window row, declarations, stores.)"""
    kw_n, sw_, dw = defines["KW"], defines["SW"], defines["DW"]
    vtype, nv = f"float{width}", mb // width
    init = [f"vload{width}(0, bias + (m0 + {v * width}))" if has_bias else f"({vtype})(0.0f)"
            for v in range(nv)]
    decls = [f"{vtype} acc_c{j}_v{v} = {init[v]};" for j in range(ob) for v in range(nv)]
    body: list[str] = []
    loaded: set[int] = set()
    for kwv in range(kw_n):
        body += [f"const {vtype} wv_v{v}_{kwv} = vload{width}(0, w + "
                 f"({_conv_w_at(True, c_var, kwv, v * width)}));" for v in range(nv)]
        for j in range(ob):
            col = j * sw_ + kwv * dw
            if col not in loaded:
                loaded.add(col)
                body.append(f"const float xv_{col} = x[{x_row} + owb * {ob * sw_} + {col}];")
            body += [f"acc_c{j}_v{v} += xv_{col} * wv_v{v}_{kwv};" for v in range(nv)]
    tail = [f"const float acc_{i}_{j} = acc_c{j}_v{i // width}.s{i % width:x};"
            for i in range(mb) for j in range(ob)]
    tail += [f"y[((n * M + m0 + {i}) * OH + oh) * OW + owb * OB + {j}] = acc_{i}_{j};"
             for i in range(mb) for j in range(ob)]
    return body, decls, tail


def _conv_w_at(packed: bool, c_var: str, kwv: int, mi: int) -> str:
    """Subscript of the weight of channel ``m0 + mi``, input channel ``c_var``, window step
    (``kh``, ``kwv``) of the blocked direct Conv (packed: (G, CPG, KH, KW, MPG))."""
    if packed:
        return f"((g * CPG + {c_var}) * KH * KW + kh * KW + {kwv}) * MPG + ml + {mi}"
    return f"((m0 + {mi}) * CPG + {c_var}) * KH * KW + kh * KW + {kwv}"


def _plus(offset: int) -> str:
    """`` + offset`` / `` - offset`` / nothing: a constant subscript offset as C text."""
    return f" + {offset}" if offset > 0 else f" - {-offset}" if offset < 0 else ""


def _strided_row_steps(defines: dict[str, int], mb: int, x_row: str, shift: int, packed: bool,
                       c_var: str, has_bias: bool) -> tuple[list[str], list[str], list[str]]:
    """A strided whole-row block of :func:`_blocked_conv` (depthwise at stride 2): the row's
    accumulators a private array per channel, each window row one loop over the output
    columns whose every tap is inside the input, the few edge columns written out with their
    inside taps only (pads are never loaded).  Written out as scalars, the taps' loads two
    columns apart did not vectorize (MobileNetV2's 144 x 56 -> 28: 0.42 ms, 5 GFLOP/s); as a
    loop LLVM loads them as interleaved groups (0.10 ms) -- with a ``long`` column: with an
    ``int`` one the loop ran at 0.20 ms.  ``x_row + shift`` is the row's first column (the pads
    in the constant ``shift``).  (body of one window row, declarations, stores.)"""
    ow, sw_, dw, pw, w, kw_n = (defines[k] for k in ("OW", "SW", "DW", "PW", "W", "KW"))
    lo = min(ow, -(-pw // sw_))  # first column whose taps are all inside
    hi = max(lo, min(ow, (w - 1 + pw - (kw_n - 1) * dw) // sw_ + 1))
    init = [f"acc_{i}[j] = {f'bias[m0 + {i}]' if has_bias else '0.0f'};" for i in range(mb)]
    decls = [*(f"float acc_{i}[OW];" for i in range(mb)),
             "for (int j = 0; j < OW; j++) {", *("    " + ln for ln in init), "}"]
    body = [f"const float wv_{i}_{k} = w[{_conv_w_at(packed, c_var, k, i)}];"
            for i in range(mb) for k in range(kw_n)]
    for j in [*range(lo), *range(hi, ow)]:
        for i in range(mb):
            terms = [f"x[{x_row}{_plus(j * sw_ + k * dw + shift)}] * wv_{i}_{k}"
                     for k in range(kw_n) if 0 <= j * sw_ + k * dw - pw < w]
            if terms:
                body.append(f"acc_{i}[{j}] += {' + '.join(terms)};")
    if lo < hi:
        body += [f"for (long j = {lo}; j < {hi}; j++) {{",
                 *(f"    acc_{i}[j] += " + " + ".join(
                     f"x[{x_row} + j * SW{_plus(k * dw + shift)}] * wv_{i}_{k}"
                     for k in range(kw_n)) + ";" for i in range(mb)), "}"]
    tail = ["for (int j = 0; j < OW; j++) {",
            *(f"    y[((n * M + m0 + {i}) * OH + oh) * OW + j] = acc_{i}[j];" for i in range(mb)),
            "}"]
    return body, decls, tail


#: the most window rows a stride-2 whole-row Conv writes out (:func:`halving_row_width`)
MAX_WINDOW_ROWS = 7


def halving_row_width(defines: dict[str, int], vector_width: int) -> int:
    """The width of the vectors a whole-row block of the direct Conv reads its input rows in
    (:func:`_strided_row_vectors`), or 0: a 3-wide window at stride 2 padded by one column on
    the left (MobileNet's stride-2 depthwise Convs), each output column's window inside the
    row, the row a multiple of the vectors (the widest of 16, 8, 4 the target has), the
    window's rows few enough to write out."""
    ow, w, kw_n, sw_, dw, pw = (defines[k] for k in ("OW", "W", "KW", "SW", "DW", "PW"))
    if (kw_n, sw_, dw, pw) != (3, 2, 1, 1) or ow * 2 != w or defines["KH"] > MAX_WINDOW_ROWS:
        return 0
    lanes = vector_lanes(vector_width, w)
    return lanes if lanes > 1 else 0


def _strided_row_vectors(defines: dict[str, int], mb: int, width: int, x_row: str,
                         packed: bool, c_var: str, has_bias: bool
                         ) -> tuple[list[str], list[str], list[str]]:
    """A whole-row block of :func:`_blocked_conv` at stride 2 in ``float<width>`` input
    vectors: each vector's even and odd lanes (``.even``/``.odd``) are the window's middle and
    right columns of ``width / 2`` output columns, the odd lanes shifted by one lane (the
    last of the vector before carried in ``prev``, the pad column a zero) its left column.
    Each window row is written out under its own guard (a pad row is never loaded).  Why: as
    a loop over the private row the taps two columns apart load as interleaved groups at
    best (MobileNetV2's 144 x 56 -> 28: 0.10 ms, 34 GFLOP/s on two cores, where onnxruntime's
    channel-blocked layout takes 0.032 on one).  (the window rows, declarations, stores.)"""
    half = width // 2
    vt, ht = f"float{width}", f"float{half}"
    chunks = defines["OW"] // half
    decls = [f"{ht} acc_{i}_c{c} = ({ht})({f'bias[m0 + {i}]' if has_bias else '0.0f'});"
             for i in range(mb) for c in range(chunks)]
    body: list[str] = []
    for kh in range(defines["KH"]):
        rows = [f"__global const float *xr = x + ({x_row}{_plus(-defines['PH'] * defines['W'])});",
                *(f"const float wv_{i}_{k} = w[{_conv_w_at(packed, c_var, k, i)}];"
                  for i in range(mb) for k in range(3)),
                "float prev = 0.0f;"]
        for c in range(chunks):
            rows += [f"const {vt} v_{c} = vload{width}({c}, xr);",
                     *halved_lanes(f"v_{c}", c, half, left=True)]
            rows += [f"acc_{i}_c{c} += l_{c} * wv_{i}_0 + e_{c} * wv_{i}_1 + o_{c} * wv_{i}_2;"
                     for i in range(mb)]
        body += ["{", f"    const int kh = {kh};",
                 "    if (oh * SH + kh * DH >= PH && oh * SH + kh * DH < H + PH) {",
                 *("        " + ln for ln in rows), "    }", "}"]
    tail = [f"vstore{half}(acc_{i}_c{c}, {c}, y + ((n * M + m0 + {i}) * OH + oh) * OW);"
            for i in range(mb) for c in range(chunks)]
    return body, decls, tail


def _pointwise_conv(node: Node, sx: tuple[int, ...], sw: tuple[int, ...],
                    out: tuple[int, ...], bias: Optional[tuple[int, ...]], batch: int, cin: int,
                    cout: int, hw: int) -> OpKernel:
    """A 1x1 convolution (stride 1, no padding, one group) is per image the product
    ``W (cout x cin) @ X (cin x H*W)``: the blocked product, output channels as rows and pixels
    as columns, the image as the batch.  Its block layout (rows: image and channel, columns:
    pixel) is the direct Conv's, so the same consumers cover it."""
    params, inputs = _conv_params(sx, sw, bias, out)
    x_off = "batch * K * N + " if batch > 1 else ""
    y_off = "batch * M * N + " if batch > 1 else ""
    comment = (f"Conv 1x1 X {shape_str(sx)} W {shape_str(sw)} -> {shape_str(out)} as the "
               f"product W ({cout}x{cin}) @ X ({cin}x{hw}) per image")
    return _blocked_product(
        node, cout, hw, cin, a_elem="w[row * K + kk]", b_elem=f"x[{x_off}kk * N + col]",
        store=f"y[{y_off}row * N + col] = acc[i][j]", params=params, inputs=inputs,
        batch=batch, comment=comment, init="bias[row]" if bias is not None else "0.0f",
        wide_groups=hw >= WIDE_GROUP_MIN_COLUMNS,
    )


def einsum(node: Node) -> OpKernel:
    """Einsum with explicit or implicit output, any number of operands: one work-item per
    output element, a counted loop per summed index.  Every subscript is a sum of the
    work-item's coordinates and the loop iterators times constant strides (exactly affine).
    Refused: ``...`` (ellipsis) and an index repeated within one operand (a diagonal)."""
    node.check_attrs(["equation"])
    equation = str(node.attr("equation", "")).replace(" ", "")
    if "..." in equation:
        raise node.unsupported(f"attribute 'equation'={equation!r}: '...' is not supported")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    shapes = [node.input(i) for i in range(len(node.input_shapes))]
    if len(terms) != len(shapes) or not all(t.isalpha() for t in terms) or \
            rhs and not rhs.isalpha():
        raise node.invalid(f"attribute 'equation'={equation!r} does not match "
                           f"{len(shapes)} inputs")
    sizes: dict[str, int] = {}
    for term, shape in zip(terms, shapes):
        if len(set(term)) != len(term):
            raise node.unsupported(f"attribute 'equation'={equation!r}: an index repeated in "
                                   f"'{term}' (a diagonal) is not supported")
        if len(term) != len(shape):
            raise node.invalid(f"'{term}' does not match an input of shape {shape}")
        for letter, n in zip(term, shape):
            if sizes.setdefault(letter, n) != n:
                raise node.invalid(f"index '{letter}' has sizes {sizes[letter]} and {n}")
    if not arrow:
        rhs = "".join(sorted(c for c in sizes if lhs.count(c) == 1))
    if len(set(rhs)) != len(rhs) or any(c not in sizes for c in rhs):
        raise node.invalid(f"attribute 'equation'={equation!r}: bad output '{rhs}'")
    out = tuple(sizes[c] for c in rhs)
    node.check_output(0, out)
    summed = [c for c in sizes if c not in rhs]
    grid = Grid.of(out)
    names = [f"x{i}" for i in range(len(shapes))]
    loads = []
    for name, term, shape in zip(names, terms, shapes):
        st = strides_of(shape)
        parts = []
        for letter, s, n in zip(term, st, shape):
            if n == 1:
                continue
            var = grid.coord(rhs.index(letter)) if letter in rhs else f"s_{letter}"
            var = f"({var})" if " " in var and s != 1 else var
            parts.append(var if s == 1 else f"{var} * {s}")
        loads.append(f"{name}[{' + '.join(parts) or '0'}]")
    lines = ["float acc = 0.0f;"]
    lines += [f"{'    ' * i}for (int s_{c} = 0; s_{c} < {sizes[c]}; s_{c}++) {{"
              for i, c in enumerate(summed)]
    lines.append(f"{'    ' * len(summed)}acc += {' * '.join(loads)};")
    lines += [f"{'    ' * i}}}" for i in range(len(summed) - 1, -1, -1)]
    lines.append(f"y[{grid.flat()}] = acc;")
    params = [Param(n, s) for n, s in zip(names, shapes)] + [Param("y", out, const=False)]
    comment = f"Einsum {equation} {' , '.join(shape_str(s) for s in shapes)} -> {shape_str(out)}"
    return grid_kernel(node, grid, params, {}, "\n".join(lines), names, ["y"], comment)
