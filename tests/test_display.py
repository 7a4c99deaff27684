"""Rich display of the UAR: well-formed XML, colours by width, every node and edge drawn.

Written against a hand-made networkx graph wrapped in a stub with ``to_networkx()`` (the display
depends on that view only), plus one smoke test on a real example when the pipeline is there.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import networkx as nx
import pytest

from polyfuse.report.display import (
    HOST_COLOR,
    VIRTUAL_COLOR,
    WIDTH_COLORS,
    edge_to_html,
    show,
    uar_to_html,
    uar_to_svg,
)

ROOT = Path(__file__).resolve().parent.parent
SVG = "{http://www.w3.org/2000/svg}"
NASTY = 'k<&>"\'x'  # a kernel name that must be escaped


class StubUAR:
    """The part of the UAR interface the display uses."""

    def __init__(self, graph: nx.MultiDiGraph):
        self.graph = graph

    def to_networkx(self) -> nx.MultiDiGraph:
        return self.graph


def _edge(width, kind="RAW", array="a", host=False, virtual=False, loop_carried=False,
          conditions=None, witness=None):
    return dict(width=width, kind=kind, array=array, host=host, virtual=virtual,
                loop_carried=loop_carried, conditions=conditions or {}, witness=witness,
                relation="{ L1[g0, l0] -> L2[g0, l0] }")


def stub() -> StubUAR:
    g = nx.MultiDiGraph(name="stub")
    g.add_node(0, kind="host", kernel=None, label="H0: clEnqueueWriteBuffer", host_loops=[])
    g.add_node(1, kind="launch", kernel="produce", label="L1: produce", host_loops=[])
    g.add_node(2, kind="launch", kernel="stencil", label="L2: stencil",
               host_loops=[{"iterator": "t", "lower": 0, "upper": 8, "step": 1}])
    g.add_node(3, kind="launch", kernel=NASTY, label="L3", host_loops=[])
    g.add_node(4, kind="sync", kernel=None, label="H4: clFinish", host_loops=[])
    g.add_node(5, kind="host", kernel=None, label="H5: clEnqueueReadBuffer", host_loops=[])
    g.add_edge(0, 1, key="RAW:x", **_edge("global", array="x", host=True))
    g.add_edge(1, 2, key="RAW:b", **_edge(
        "global", array="b", conditions={"thread": "[m] -> { : m = 0 }"},
        witness={"text": "L1[g0=0, l0=63] -> L2[g0=1, l0=0]"}))
    g.add_edge(1, 2, key="WAR:c", **_edge("block", kind="WAR", array="c"))
    g.add_edge(2, 3, key="RAW:<d>", **_edge("thread", array="<d>"))
    g.add_edge(2, 2, key="WAW:e", **_edge("thread", kind="WAW", array="e", loop_carried=True))
    g.add_edge(3, 2, key="RAW:f", **_edge("global", array="f", loop_carried=True,
                                           witness={"text": "t=0 -> t=1"}))
    g.add_edge(3, 4, key="virtual:sync", kind="virtual", width=None, virtual=True, host=True,
               array=None, loop_carried=False, conditions={}, witness=None, relation=None)
    g.add_edge(3, 5, key="RAW:out", **_edge("global", array="out", host=True))
    return StubUAR(g)


def _edges(root: ET.Element) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if "pf-edge" in g.get("class", "").split()]


def _nodes(root: ET.Element) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if "pf-node" in g.get("class", "").split()]


def test_svg_is_valid_xml_with_every_node_and_edge():
    u = stub()
    root = ET.fromstring(uar_to_svg(u))
    assert root.tag == f"{SVG}svg"
    assert {n.get("data-node") for n in _nodes(root)} == {str(n) for n in u.graph.nodes}
    drawn = sorted((e.get("data-src"), e.get("data-dst"), e.get("data-key")) for e in _edges(root))
    expected = sorted((str(a), str(b), str(k)) for a, b, k in u.graph.edges(keys=True))
    assert drawn == expected


def test_edge_colors_follow_width():
    root = ET.fromstring(uar_to_svg(stub()))
    colors = {}
    for e in _edges(root):
        path = e.find(f"{SVG}path")
        colors[e.get("data-key")] = (path.get("stroke"), path.get("stroke-dasharray"))
    assert colors["RAW:b"][0] == WIDTH_COLORS["global"]
    assert colors["WAR:c"][0] == WIDTH_COLORS["block"]
    assert colors["RAW:<d>"][0] == WIDTH_COLORS["thread"]
    assert colors["WAW:e"][0] == WIDTH_COLORS["thread"]
    assert colors["RAW:x"][0] == HOST_COLOR and colors["RAW:out"][0] == HOST_COLOR
    assert colors["virtual:sync"] == (VIRTUAL_COLOR, "5,4")
    assert all(dash is None for key, (_, dash) in colors.items() if key != "virtual:sync")
    assert len(set(WIDTH_COLORS.values()) | {HOST_COLOR, VIRTUAL_COLOR}) == 5


def test_tooltips_legend_and_labels():
    svg = uar_to_svg(stub())
    root = ET.fromstring(svg)
    by_key = {e.get("data-key"): e for e in _edges(root)}
    tip = by_key["RAW:b"].find(f"{SVG}title").text
    assert "array: b" in tip and "kind: RAW" in tip and "width: global" in tip
    assert "thread when [m] -> { : m = 0 }" in tip and "L1[g0=0, l0=63]" in tip
    assert "loop-carried" in by_key["RAW:f"].find(f"{SVG}title").text
    legend = [g for g in root.iter(f"{SVG}g") if g.get("class") == "pf-legend"]
    assert legend
    legend_text = {t.text for t in legend[0].iter(f"{SVG}text")}
    assert {"thread", "block", "global", "host", "virtual"} <= legend_text
    texts = {t.text for t in root.iter(f"{SVG}text")}
    assert "#2 stencil [t]" in texts  # launch label with its host-loop iterator
    assert f"#3 {NASTY}" in texts  # escaped in the source, intact once parsed
    assert NASTY not in svg


def test_node_shapes_by_kind():
    root = ET.fromstring(uar_to_svg(stub()))
    rect = {n.get("data-node"): n.find(f"{SVG}rect") for n in _nodes(root)}
    assert float(rect["4"].get("height")) < float(rect["1"].get("height"))  # sync is a bar
    assert float(rect["0"].get("rx")) > float(rect["1"].get("rx"))  # host ops are rounded


def test_launches_only_hides_host_ops():
    root = ET.fromstring(uar_to_svg(stub(), launches_only=True))
    assert {n.get("data-node") for n in _nodes(root)} == {"1", "2", "3"}
    assert all(e.get("data-src") in {"1", "2", "3"} for e in _edges(root))


def test_html_table_and_rich_wrapper():
    u = stub()
    page = uar_to_html(u)
    root = ET.fromstring(page)
    rows = [tr for tr in root.iter("tr") if tr.get("class") == "pf-edge-row"]
    data_edges = [e for e in u.graph.edges(data=True) if not e[2].get("virtual")]
    assert len(rows) == len(data_edges)
    cells = ["".join(td.itertext()) for tr in rows for td in tr.findall("td")]
    assert "<d>" in cells and "global" in cells and "block" in cells
    assert any("thread when" in c for c in cells)
    ET.fromstring(show(u)._repr_html_())
    ET.fromstring(show(u, table=False)._repr_html_())


def test_graph_with_cycles_and_parallel_edges_lays_out():
    g = nx.MultiDiGraph()
    for i in range(4):
        g.add_node(i, kind="launch", kernel=f"k{i}")
    g.add_edge(0, 1, key="a", **_edge("thread"))
    g.add_edge(1, 0, key="b", **_edge("global", loop_carried=True))
    g.add_edge(1, 1, key="c", **_edge("thread", loop_carried=True))
    g.add_edge(1, 1, key="d", **_edge("block", loop_carried=True))
    root = ET.fromstring(uar_to_svg(StubUAR(g)))
    assert len(_edges(root)) == 4
    assert len(_nodes(root)) == 4  # isolated nodes are drawn too


def test_edge_to_html_from_dict_and_object():
    attrs = dict(src=1, dst=2, src_kernel="produce", dst_kernel=NASTY, **_edge(
        "global", conditions={"block": "[n] -> { : n mod 64 = 0 }"},
        witness={"text": "L1[g0=0] -> L2[g0=1]"}))
    page = edge_to_html(attrs)
    root = ET.fromstring(page)
    text = "".join(root.itertext())
    assert NASTY in text and "{ L1[g0, l0] -> L2[g0, l0] }" in text
    assert "n mod 64 = 0" in text and "L1[g0=0] -> L2[g0=1]" in text

    class Obj:
        pass

    obj = Obj()
    for k, v in attrs.items():
        setattr(obj, k, v)
    assert "".join(ET.fromstring(edge_to_html(obj)).itertext()) == text
    plain = edge_to_html(dict(src=1, dst=2, src_kernel="a", dst_kernel="b", **_edge("thread")))
    assert "for every parameter value" in "".join(ET.fromstring(plain).itertext())


def test_real_example_displays():
    uar_mod = pytest.importorskip("polyfuse.uar")
    host = pytest.importorskip("polyfuse.frontend.host")
    if not hasattr(uar_mod, "build_uar") or not hasattr(host, "load_opencl"):
        pytest.skip("UAR pipeline not available yet")
    ex = ROOT / "examples" / "gemm_bias_relu_transpose"
    u = uar_mod.build_uar(host.load_opencl(str(ex / "kernels.cl"), host=str(ex / "host.c")))
    root = ET.fromstring(uar_to_html(u))
    g = u.to_networkx()
    svg_root = root.find(f"{SVG}svg")
    drawn = _edges(svg_root)
    data = [e for e in drawn if "pf-virtual" not in e.get("class")]
    assert len(data) == sum(1 for *_, v in g.edges(data="virtual") if not v)
    assert len(drawn) - len(data) <= sum(1 for *_, v in g.edges(data="virtual") if v)
    syncs = [n for n, k in g.nodes(data="kind") if k == "sync"]
    assert g.number_of_nodes() - len(syncs) <= len(_nodes(svg_root)) <= g.number_of_nodes()
    for e in u.edges:
        ET.fromstring(edge_to_html(e))


def test_blocking_transfer_is_one_node_and_implied_order_is_not_drawn():
    """A blocking read is drawn once (not as a host op and a sync); a virtual edge that other
    edges imply is not drawn over them; host edges carry their array and kind."""
    import polyfuse

    ex = ROOT / "examples" / "qkv"
    u = polyfuse.build_uar(polyfuse.load_opencl(str(ex / "kernels.cl"), host=str(ex / "host.c")))
    svg = ET.fromstring(uar_to_svg(u))
    texts = ["".join(t.itertext()) for t in svg.iter(f"{SVG}text")]
    assert sum("clEnqueueReadBuffer" in t for t in texts) == 1
    assert any(t.endswith("clEnqueueReadBuffer (blocking)") for t in texts)
    assert "out RAW" in texts and "X RAW" in texts  # host edges are labelled
    g = u.to_networkx()
    virtual = sum(1 for *_, v in g.edges(data="virtual") if v)
    drawn = [e for e in _edges(svg) if "pf-virtual" in e.get("class")]
    assert 0 < len(drawn) < virtual  # clFinish orders everything: one arrow into it is enough
    labels = [(float(t.get("x")), float(t.get("y")), len("".join(t.itertext())))
              for t in svg.iter(f"{SVG}text") if t.get("font-size") == "10"]
    for i, (x, y, n) in enumerate(labels):  # edge labels never overlap
        for x2, y2, n2 in labels[i + 1:]:
            assert abs(y - y2) >= 11 or x + 6 * n <= x2 or x2 + 6 * n2 <= x


def test_uar_repr_is_one_short_line():
    import polyfuse

    ex = ROOT / "examples" / "gemm_bias_relu_transpose"
    u = polyfuse.build_uar(polyfuse.load_opencl(str(ex / "kernels.cl"), host=str(ex / "host.c")))
    text = repr(u)
    assert "\n" not in text and len(text) < 300
    assert f"{len(u.edges)} dependence edges" in text and "3 launches" in text
    assert len(u._repr_html_()) > len(text)  # Jupyter keeps the rich display


def _points(d: str) -> list[tuple[float, float]]:
    import re

    nums = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", d)]
    return list(zip(nums[::2], nums[1::2]))


def test_parallel_edges_share_one_label_and_host_loops_are_framed():
    root = ET.fromstring(uar_to_svg(stub()))
    labels = {(t.get("data-src"), t.get("data-dst")): t.text for t in root.iter(f"{SVG}text")
              if t.get("class") == "pf-edge-label"}
    assert labels[("1", "2")] == "b RAW, c WAR"  # two edges, one label
    assert labels[("2", "2")] == "e WAW" and ("3", "4") not in labels  # virtual: no label
    frames = [g for g in root.iter(f"{SVG}g") if g.get("class") == "pf-cluster"]
    assert [f.find(f"{SVG}text").text for f in frames] == ["host loop [t]"]


def test_edges_never_cross_a_box_they_do_not_join():
    """The issue's complaint: host edges cut through launch boxes.  Every point of every edge
    path (ends and control points, whose hull holds the curve) stays out of the other boxes."""
    import polyfuse

    ex = ROOT / "examples" / "gemm_bias_relu_transpose"
    uar = polyfuse.build_uar(polyfuse.load_opencl(str(ex / "kernels.cl"), host=str(ex / "host.c")))
    for u in (uar, stub()):
        root = ET.fromstring(uar_to_svg(u))
        boxes = {}
        for n in _nodes(root):
            r = n.find(f"{SVG}rect")
            x, y, w, h = (float(r.get(a)) for a in ("x", "y", "width", "height"))
            boxes[n.get("data-node")] = (x, y, x + w, y + h)
        for e in _edges(root):
            ends = {e.get("data-src"), e.get("data-dst")}
            for px, py in _points(e.find(f"{SVG}path").get("d")):
                for node, (x0, y0, x1, y1) in boxes.items():
                    assert node in ends or not (x0 < px < x1 and y0 < py < y1), (e.get("data-key"),
                                                                                 node)


def test_drawings_save_as_svg_and_dot(tmp_path: Path):
    import polyfuse
    from polyfuse.passes.pipeline import fuse_program

    ex = ROOT / "examples" / "qkv"
    program = polyfuse.load_opencl(str(ex / "kernels.cl"), host=str(ex / "host.c"))
    uar = polyfuse.build_uar(program)
    svg = uar.to_svg(tmp_path / "uar.svg")
    assert (tmp_path / "uar.svg").read_text(encoding="utf-8") == svg
    assert ET.fromstring(svg).tag == f"{SVG}svg"
    dot = uar.to_dot(tmp_path / "uar.dot")
    assert dot.startswith("digraph ") and dot.rstrip().endswith("}")
    assert (tmp_path / "uar.dot").read_text(encoding="utf-8") == dot
    assert 'xlabel="Q RAW"' in dot and "->" in dot
    result = fuse_program(program, build=False)
    kernel = result.fused.groups[0].kernel
    plan_svg = result.to_svg(tmp_path / "plan.svg")
    frames = [g.find(f"{SVG}text").text for g in ET.fromstring(plan_svg).iter(f"{SVG}g")
              if g.get("class") == "pf-cluster"]
    assert frames == [f"group 0 ({result.plan.groups[0].orchestration}): {kernel}"]
    assert (tmp_path / "plan.svg").is_file()
    plan_dot = result.plan.to_dot()
    assert "subgraph cluster_0" in plan_dot and "group 0 (" in plan_dot
    assert kernel in result.to_dot(tmp_path / "plan.dot")


def test_dot_bundles_parallel_edges_and_frames_loops():
    from polyfuse.report.display import uar_to_dot

    dot = uar_to_dot(stub())
    lines = [ln for ln in dot.splitlines() if '"1" -> "2"' in ln]
    assert len(lines) == 1 and 'xlabel="b RAW, c WAR"' in lines[0]
    assert f'color="{WIDTH_COLORS["global"]}:{WIDTH_COLORS["block"]}"' in lines[0]
    assert 'subgraph cluster_0 { label="host loop [t]"' in dot and 'style=dashed' in dot
    assert '\\"' in dot  # the nasty kernel name is escaped
