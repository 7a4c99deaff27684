"""Width labels of work-item relations (docs/definitions.md), as exact parameter sets.

Relations are written directly in isl: ``P[g0, l0] -> C[g0', l0']`` with work-groups of 64
(one group dim each side) unless stated otherwise; each case is also checked against the
concrete definition (:func:`polyfuse.oracle.bruteforce.concrete_width`) by enumeration at fixed
parameter values.
"""

from __future__ import annotations

import islpy as isl
import pytest

from polyfuse.uar.width import bijective_params, classify, group_relation, pair_witness

GRID = "0 <= l0 < 64 and 0 <= 64g0 + l0 < 1024 and 0 <= l0' < 64 and 0 <= 64g0' + l0' < 1024"
CTX = isl.Set("{ : }")


def rel(body: str, params: str = "") -> isl.Map:
    head = f"[{params}] -> " if params else ""
    return isl.Map(f"{head}{{ P[g0, l0] -> C[g0', l0'] : {GRID} and ({body}) }}")


def enumerate_pairs(r: isl.Map) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    pairs = []

    def add(p: isl.Point) -> None:
        v = [int(p.get_coordinate_val(isl.dim_type.set, i).to_python()) for i in range(4)]
        pairs.append(((v[0], v[1]), (v[2], v[3])))

    r.wrap().foreach_point(add)
    return pairs


def concrete(r: isl.Map) -> str:
    bf = pytest.importorskip("polyfuse.oracle.bruteforce")
    return bf.concrete_width(enumerate_pairs(r), 1, 1)


CASES = [
    ("same index", "64g0' + l0' = 64g0 + l0", "thread"),
    ("shift", "64g0' + l0' = 64g0 + l0 - 1", "thread"),
    ("rotation", "64g0' + l0' = (64g0 + l0 + 1) mod 1024", "thread"),
    ("permutation in group", "g0' = g0 and l0' = 63 - l0", "thread"),
    ("reversal", "64g0' + l0' = 1023 - 64g0 - l0", "thread"),
    ("group rotation read", "g0' = g0 and (l0' = l0 or l0 = (l0' + 1) mod 64)", "block"),
    ("pairs", "g0' = g0 and (l0' = l0 or l0' = l0 + 1 - 2*(l0 mod 2))", "block"),
    ("stencil", "64g0 + l0 - 64g0' - l0' >= -1 and 64g0 + l0 - 64g0' - l0' <= 1", "global"),
    ("broadcast", "g0 = 0 and l0 = 0", "global"),
    ("reduction", "l0' = 0 and g0' = 0", "global"),
]


@pytest.mark.parametrize("name,body,width", CASES, ids=[c[0] for c in CASES])
def test_widths(name, body, width):
    r = rel(body)
    res = classify(r, CTX, 1, 1)
    assert res.width == width
    assert concrete(r) == width
    assert res.conditions == {}
    assert (res.witness is not None) == (width == "global")


def test_transpose_two_d():
    grid = ("0 <= l0, l1, l0', l1' < 8 and 0 <= 8g0 + l0, 8g1 + l1, 8g0' + l0', "
            "8g1' + l1' < 32")
    r = isl.Map(f"{{ P[g0, g1, l0, l1] -> C[g0', g1', l0', l1'] : {grid} and "
                "8g0' + l0' = 8g1 + l1 and 8g1' + l1' = 8g0 + l0 }")
    assert classify(r, CTX, 2, 2).width == "thread"


def test_global_witness_is_a_real_violation():
    r = rel("64g0 + l0 - 64g0' - l0' >= -1 and 64g0 + l0 - 64g0' - l0' <= 1")
    w = classify(r, CTX, 1, 1).witness
    pairs = set(enumerate_pairs(r))
    assert (tuple(w["src"]), tuple(w["dst"])) in pairs
    assert (tuple(w["other_src"]), tuple(w["other_dst"])) in pairs
    same_dst = w["dst"][0] == w["other_dst"][0] and w["src"][0] != w["other_src"][0]
    same_src = w["src"][0] == w["other_src"][0] and w["dst"][0] != w["other_dst"][0]
    assert same_dst or same_src
    assert w["text"].startswith("P[g0=")


def test_symbolic_shift_condition():
    ctx = isl.Set("[m] -> { : 0 <= m < 1024 }")
    r = rel("64g0 + l0 = 64g0' + l0' or 64g0 + l0 = 64g0' + l0' + m", "m")
    res = classify(r, ctx, 1, 1)
    assert res.width == "global"
    assert set(res.conditions) == {"thread"}
    expected = isl.Set("[m] -> { : m = 0 }").intersect(ctx)
    assert isl.Set(res.conditions["thread"]).is_equal(expected)
    assert res.conditions["thread"].replace(" ", "") == "[m]->{:m=0}"
    assert res.witness["params"]["m"] > 0
    for m in (0, 1, 64, 1000):
        fixed = r.intersect_params(isl.Set(f"[m] -> {{ : m = {m} }}"))
        assert concrete(fixed) == ("thread" if m == 0 else "global")


def test_block_when_n_multiple_of_64():
    """``y[i] = x[n-1-i] + x[n-1-64*g]``: consumer group g needs producer group n/64-1-g."""
    ctx = isl.Set("[n] -> { : 65 <= n <= 1024 }")
    r = isl.Map("[n] -> { P[g0, l0] -> C[g0', l0'] : 0 <= l0, l0' < 64 and 0 <= 64g0 + l0 < n "
                "and 0 <= 64g0' + l0' < n and (64g0 + l0 = n - 1 - 64g0' - l0' or "
                "64g0 + l0 = n - 1 - 64g0') }")
    res = classify(r, ctx, 1, 1)
    assert res.width == "global"
    assert set(res.conditions) == {"block"}
    assert isl.Set(res.conditions["block"]).is_equal(
        isl.Set("[n] -> { : n mod 64 = 0 }").intersect(ctx))
    assert res.witness["params"]["n"] % 64 != 0
    for n in (128, 130, 192, 200):
        fixed = r.intersect_params(isl.Set(f"[n] -> {{ : n = {n} }}"))
        assert concrete(fixed) == ("block" if n % 64 == 0 else "global")


def test_width_block_with_thread_condition():
    ctx = isl.Set("[m] -> { : 0 <= m < 64 }")
    r = rel("g0' = g0 and (l0' = l0 or l0' = (l0 + m) mod 64)", "m")
    res = classify(r, ctx, 1, 1)
    assert res.width == "block"
    assert isl.Set(res.conditions["thread"]).is_equal(isl.Set("[m] -> { : m = 0 }"))
    assert res.witness is None


def test_bijective_params_and_group_relation():
    r = rel("64g0' + l0' = 64g0 + l0 + 1")
    assert bijective_params(r, CTX).is_equal(CTX)
    g = group_relation(r, 1, 1)
    assert g.get_tuple_name(isl.dim_type.in_) == "P" and g.dim(isl.dim_type.out) == 1
    assert not bijective_params(g, CTX).is_equal(CTX)  # group g feeds g and g+1


def test_empty_relation_is_thread():
    res = classify(rel("0 = 1"), CTX, 1, 1)
    assert res.width == "thread" and res.conditions == {}


def test_pair_witness():
    w = pair_witness(rel("64g0' + l0' = 64g0 + l0"), CTX, "host")
    assert w["src"] == w["dst"] and w["reason"] == "host"
    assert pair_witness(rel("0 = 1")) is None
