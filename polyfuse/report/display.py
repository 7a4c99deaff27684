"""Rich Jupyter display of a UAR: an SVG drawing of the graph and HTML tables of its edges.

Drawn by hand (no graphviz binary, no system package): Jupyter users get a picture wherever pip
works.  Everything reads ``uar.to_networkx()`` (a ``MultiDiGraph``; node attributes ``kind``
in {launch, host, sync}, ``kernel``, ``label``, ``host_loops``; edge attributes ``width``,
``kind``, ``array``, ``relation``, ``loop_carried``, ``host``, ``conditions``, ``witness``,
``virtual``), so the display depends on that view only.  Output is well-formed XML: every piece
of user text (kernel names, isl strings) is escaped.

* :func:`uar_to_svg` — layered drawing: launches as boxes, host operations as rounded boxes,
  synchronizations as bars, dependences as curved arrows coloured by width, tooltips, a legend;
  a dashed frame per host loop (or per fused group, for plans); all the edges between two nodes
  share one route and one label, and an edge that passes rows runs in a lane of its own right of
  their boxes, never across one.
* :func:`uar_to_dot` — the same drawing as Graphviz DOT (no binary needed to write it).
* :func:`uar_to_html` — the drawing plus a compact table of the edges.
* :func:`edge_to_html` — one edge: relation, conditions, witness.
"""

from __future__ import annotations

import html
import itertools
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

import networkx as nx

#: Stroke colour per width label (also used for the table's badges).
WIDTH_COLORS: dict[str, str] = {
    "thread": "#2e7d32",  # green: no synchronization needed
    "block": "#ef6c00",  # orange: a work-group barrier
    "global": "#c62828",  # red: a separate launch
}
HOST_COLOR = "#757575"  # grey: one end is a host operation
VIRTUAL_COLOR = "#455a64"  # dashed blue-grey: ordering without data
UNKNOWN_COLOR = "#6a1b9a"  # an edge with a width label this module does not know

NODE_H = 34
SYNC_H = 8
LAYER_GAP = 86
NODE_GAP = 28
MARGIN = 24
CHAR_W = 7.0  # approximate advance of the 12px monospace font
LABEL_CHAR_W = 6.0  # the same for the 10px labels
FONT = "font-family:Menlo,Consolas,'DejaVu Sans Mono',monospace"

_ids = itertools.count()


def _esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _graph(uar: Any, launches_only: bool = False) -> nx.MultiDiGraph:
    """The networkx view of ``uar`` (a UAR, anything with ``to_networkx()``, or a graph).

    ``launches_only`` drops host operations and synchronizations (and their edges): the
    picture of what fusion is about.
    """
    g = nx.MultiDiGraph(uar) if isinstance(uar, nx.Graph) else uar.to_networkx()
    if launches_only:
        keep = {n for n, k in g.nodes(data="kind") if (k or "launch") == "launch"}
        # in host order (a subgraph view's order is not), which the layers rely on
        sub = nx.MultiDiGraph(**g.graph)
        sub.add_nodes_from((n, a) for n, a in g.nodes(data=True) if n in keep)
        sub.add_edges_from((u, v, k, a) for u, v, k, a in g.edges(keys=True, data=True)
                           if u in keep and v in keep)
        g = sub
    return _drop_implied_virtual(_merge_blocking_syncs(g))


def _call_name(attrs: Mapping[str, Any]) -> str:
    label = str(attrs.get("label") or "")
    return label.split(":", 1)[1].strip() if ":" in label else label


def _merge_blocking_syncs(g: nx.MultiDiGraph) -> nx.MultiDiGraph:
    """A blocking transfer is one host call but two operations (the transfer, then a sync):
    drawn as one node, marked blocking, with the sync's edges."""
    order = list(g.nodes)
    for prev, node in zip(order, order[1:]):
        if prev not in g or node not in g:
            continue
        a, b = g.nodes[prev], g.nodes[node]
        if b.get("kind") == "sync" and a.get("kind") == "host" and g.has_edge(prev, node) \
                and _call_name(b) == _call_name(a) and _call_name(a).startswith("clEnqueue"):
            g = nx.contracted_nodes(g, prev, node, self_loops=False, copy=False)
            g.nodes[prev].pop("contraction", None)
            g.nodes[prev]["blocking"] = True
    return g


def _drop_implied_virtual(g: nx.MultiDiGraph, limit: int = 4000) -> nx.MultiDiGraph:
    """Without the virtual (ordering-only) edges that other edges already imply: a virtual edge
    ``u -> v`` is not drawn when ``v`` is reachable from ``u`` another way (or ``u -> v`` is also
    a data edge)."""
    if g.number_of_edges() > limit:
        return g
    order = {n: i for i, n in enumerate(g.nodes)}
    for u, v, key, attrs in list(g.edges(keys=True, data=True)):
        if edge_category(attrs) != "virtual" or order[u] >= order[v]:
            continue
        g.remove_edge(u, v, key)
        forward = nx.DiGraph((a, b) for a, b in g.edges() if order[a] < order[b])
        if not (u in forward and v in forward and nx.has_path(forward, u, v)):
            g.add_edge(u, v, key, **attrs)
    return g


# ----------------------------------------------------------------------------------------------
# Edge styling
# ----------------------------------------------------------------------------------------------


def edge_category(attrs: Mapping[str, Any]) -> str:
    """The style class of an edge: ``virtual``, ``host``, a width label, or ``unknown``."""
    if attrs.get("virtual") or attrs.get("kind") not in ("RAW", "WAR", "WAW"):
        return "virtual"
    if attrs.get("host"):
        return "host"
    width = attrs.get("width")
    return width if width in WIDTH_COLORS else "unknown"


def edge_color(attrs: Mapping[str, Any]) -> str:
    """Stroke colour of an edge: by width, grey for host edges, blue-grey for virtual ones."""
    cat = edge_category(attrs)
    if cat == "virtual":
        return VIRTUAL_COLOR
    if cat == "host":
        return HOST_COLOR
    return WIDTH_COLORS.get(cat, UNKNOWN_COLOR)


def _conditions_text(conditions: Any) -> str:
    if not conditions:
        return ""
    if isinstance(conditions, Mapping):
        return "; ".join(f"{label} when {cond}" for label, cond in conditions.items())
    return str(conditions)


def _witness_text(witness: Any) -> str:
    if witness is None or witness == {}:
        return ""
    if isinstance(witness, Mapping) and "text" in witness:
        return str(witness["text"])
    return str(witness)


# ----------------------------------------------------------------------------------------------
# Layout
# ----------------------------------------------------------------------------------------------


@dataclass
class _Box:
    node: Any
    kind: str
    text: str
    title: str
    layer: int
    w: float
    h: float
    x: float = 0.0  # centre
    y: float = 0.0  # top
    reserved: float = 0.0  # room kept free on the right (a self-loop and its label)

    @property
    def cx(self) -> float:
        return self.x

    @property
    def bottom(self) -> float:
        return self.y + self.h

    @property
    def right(self) -> float:
        return self.x + self.w / 2

    @property
    def mid(self) -> float:
        return self.y + self.h / 2


def _loops_text(loops: Any) -> str:
    if not loops:
        return ""
    its = []
    for lp in loops:
        if isinstance(lp, Mapping):
            its.append(str(lp.get("iterator", "?")))
        else:
            its.append(str(getattr(lp, "iterator", lp)))
    return " [" + ", ".join(its) + "]"


def node_text(node: Any, attrs: Mapping[str, Any]) -> str:
    """The label drawn in a node: ``#id kernel [host-loop iterators]`` for launches."""
    kind = attrs.get("kind", "launch")
    loops = _loops_text(attrs.get("host_loops"))
    if kind == "launch" or attrs.get("kernel"):
        return f"#{node} {attrs.get('kernel') or attrs.get('label') or ''}".rstrip() + loops
    if attrs.get("blocking"):
        loops += " (blocking)"
    name = attrs.get("op") or ""
    label = str(attrs.get("label") or "")
    if ":" in label:  # "H3: clEnqueueWriteBuffer" -> the call's name
        name = label.split(":", 1)[1].strip() or name
    elif label:
        name = label
    return f"#{node} {name or kind}".rstrip() + loops


def _node_title(node: Any, attrs: Mapping[str, Any]) -> str:
    lines = [f"#{node} ({attrs.get('kind', 'launch')})"]
    for key in ("label", "kernel", "global_size", "local_size"):
        if attrs.get(key) not in (None, "", ()):
            lines.append(f"{key}: {attrs[key]}")
    loops = _loops_text(attrs.get("host_loops"))
    if loops:
        lines.append(f"host loops:{loops}")
    return "\n".join(lines)


def _layers(g: nx.MultiDiGraph) -> dict[Any, int]:
    """Longest-path layers over the forward edges (host order = node insertion order).

    Back edges and self-loops (loop-carried dependences) are ignored, so cycles are fine; the
    forward edges form a DAG whose topological order is the host order.
    """
    order = {n: i for i, n in enumerate(g.nodes)}
    dag = nx.DiGraph()
    dag.add_nodes_from(g.nodes)
    dag.add_edges_from((u, v) for u, v in g.edges() if order[u] < order[v])
    layer: dict[Any, int] = {}
    for n in g.nodes:  # host order is a topological order of the forward edges
        layer[n] = max((layer[p] + 1 for p in dag.predecessors(n)), default=0)
    return layer


def host_loop_clusters(g: nx.MultiDiGraph) -> dict[Any, str]:
    """Node -> the host loop nest it runs in (``host loop [l, t]``), for nodes inside one: the
    default grouping of a UAR drawing, so a loop body reads as one block."""
    return {n: f"host loop{_loops_text(loops)}" for n, loops in g.nodes(data="host_loops")
            if loops}


def _layout(g: nx.MultiDiGraph, clusters: Mapping[Any, str], reserve: Mapping[Any, float]
            ) -> dict[Any, _Box]:
    """Boxes in longest-path layers, each row ordered so that the members of a cluster sit
    side by side; ``reserve`` is room kept free right of a node (its self-loop and label)."""
    layer = _layers(g)
    boxes: dict[Any, _Box] = {}
    for n, attrs in g.nodes(data=True):
        kind = str(attrs.get("kind", "launch"))
        text = node_text(n, attrs)
        w = max(70.0, CHAR_W * len(text) + 20)
        if kind == "sync":  # a bar with its label on the right
            w = max(60.0, CHAR_W * len(text) * 0.5)
        h = float(SYNC_H if kind == "sync" else NODE_H)
        boxes[n] = _Box(n, kind, text, _node_title(n, attrs), layer[n], w, h,
                        reserved=reserve.get(n, 0.0))
    order = {n: i for i, n in enumerate(g.nodes)}
    first_of: dict[str, int] = {}
    for n in g.nodes:
        if n in clusters:
            first_of.setdefault(clusters[n], order[n])
    rows: dict[int, list[_Box]] = {}
    for b in sorted(boxes.values(), key=lambda b: (first_of.get(clusters.get(b.node, ""),
                                                                order[b.node]), order[b.node])):
        rows.setdefault(b.layer, []).append(b)

    def slot(b: _Box) -> float:
        return b.w + b.reserved

    row_w = {k: sum(slot(b) for b in r) + NODE_GAP * (len(r) - 1) for k, r in rows.items()}
    inner_w = max(row_w.values(), default=0.0)
    for k, row in rows.items():
        x = MARGIN + 12 + (inner_w - row_w[k]) / 2
        for b in row:
            b.x = x + b.w / 2
            b.y = MARGIN + 24 + k * LAYER_GAP + (NODE_H - b.h) / 2
            x += slot(b) + NODE_GAP
    return boxes


# ----------------------------------------------------------------------------------------------
# SVG
# ----------------------------------------------------------------------------------------------


def _fmt(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


@dataclass
class _Route:
    """Where one bundle of edges (all the edges from one node to another) runs."""

    src: _Box
    dst: _Box
    lane: Optional[float] = None  # x of the vertical run right of the boxes it passes

    def path(self, k: int, n: int) -> str:
        """The ``k``-th of ``n`` parallel edges, fanned by a few pixels."""
        s, d = self.src, self.dst
        off = (k - (n - 1) / 2) * 5
        if s.node == d.node:  # self-loop on the right side
            r = s.right
            bulge = 26 + 3 * k
            pts = ((r, s.mid - 6), (r + bulge, s.mid - 18 - 2 * k),
                   (r + bulge, s.mid + 18 + 2 * k), (r, s.mid + 6))
            return "M{} {} C{} {} {} {} {} {}".format(*map(_fmt, (x for p in pts for x in p)))
        if self.lane is None:  # next layer down: straight through the gap between the rows
            p0, p3 = (s.cx + off, s.bottom), (d.cx + off, d.y)
            dy = (d.y - s.bottom) / 2
            pts = (p0, (p0[0], p0[1] + dy), (p3[0], p3[1] - dy), p3)
            return "M{} {} C{} {} {} {} {} {}".format(*map(_fmt, (x for p in pts for x in p)))
        # around the boxes in between: out through the gap below the source, along the lane,
        # in through the gap above the destination (never across another box)
        lane = self.lane + off
        below, above = self.below(), d.y - 14  # close to the box: clear of frame labels
        x0, x3 = s.cx + off, d.cx + off
        return (f"M{_fmt(x0)} {_fmt(s.bottom)} C{_fmt(x0)} {_fmt(below)} {_fmt(x0)} "
                f"{_fmt(below)} {_fmt((x0 + lane) / 2)} {_fmt(below)} L{_fmt(lane - 8)} "
                f"{_fmt(below)} Q{_fmt(lane)} {_fmt(below)} {_fmt(lane)} "
                f"{_fmt(below + (8 if above > below else -8))} L{_fmt(lane)} "
                f"{_fmt(above + (-8 if above > below else 8))} Q{_fmt(lane)} {_fmt(above)} "
                f"{_fmt(lane - 8)} {_fmt(above)} L{_fmt((x3 + lane) / 2)} {_fmt(above)} "
                f"C{_fmt(x3)} {_fmt(above)} {_fmt(x3)} {_fmt(above)} {_fmt(x3)} {_fmt(d.y)}")

    def below(self) -> float:
        """The y a lane route leaves its source's row at."""
        return self.src.bottom + 16

    def anchor(self) -> tuple[float, float]:
        """Where the bundle's label starts."""
        s, d = self.src, self.dst
        if s.node == d.node:
            return s.right + 34, s.mid + 4
        if self.lane is None:
            return (s.cx + d.cx) / 2 + 6, (s.bottom + d.y) / 2 + 4
        return self.lane + 6, (s.mid + d.mid) / 2


def _routes(g: nx.MultiDiGraph, boxes: Mapping[Any, _Box]) -> dict[tuple[Any, Any], _Route]:
    """One route per connected pair; pairs not in neighbouring rows get lanes of their own, right
    of every box in the rows they span."""
    routes: dict[tuple[Any, Any], _Route] = {}
    lanes = 0
    pairs = sorted({(u, v) for u, v in g.edges()},
                   key=lambda uv: (abs(boxes[uv[1]].layer - boxes[uv[0]].layer),
                                   boxes[uv[0]].layer))
    for u, v in pairs:
        s, d = boxes[u], boxes[v]
        route = _Route(s, d)
        if u != v and d.layer != s.layer + 1:
            lo, hi = sorted((s.layer, d.layer))
            right = max(b.right + b.reserved for b in boxes.values() if lo <= b.layer <= hi)
            route.lane = right + 22 + 14 * lanes
            lanes += 1
        routes[(u, v)] = route
    return routes


def bundle_label(edges: Iterable[Mapping[str, Any]]) -> str:
    """One label for all the data edges between two nodes: kinds per array
    (``d_c WAR/WAW, d_h RAW``), so parallel dependences do not stack labels."""
    kinds: dict[str, list[str]] = {}
    for attrs in edges:
        if edge_category(attrs) == "virtual":
            continue
        ks = kinds.setdefault(str(attrs.get("array") or ""), [])
        if attrs.get("kind") not in ks:
            ks.append(str(attrs.get("kind")))
    return ", ".join(f"{a} {'/'.join(ks)}".strip() for a, ks in kinds.items())


def _edge_title(g: nx.MultiDiGraph, u: Any, v: Any, attrs: Mapping[str, Any]) -> str:
    def name(n: Any) -> str:
        return node_text(n, g.nodes[n])

    lines = [f"{name(u)} \u2192 {name(v)}"]
    if edge_category(attrs) == "virtual":
        lines.append(f"virtual ({attrs.get('reason') or attrs.get('kind') or 'order'})")
    else:
        lines.append(f"array: {attrs.get('array')}")
        lines.append(f"kind: {attrs.get('kind')}")
        lines.append(f"width: {attrs.get('width')}")
        cond = _conditions_text(attrs.get("conditions"))
        if cond:
            lines.append(f"conditions: {cond}")
        if attrs.get("loop_carried"):
            lines.append("loop-carried")
        if attrs.get("host"):
            lines.append("host edge")
        wit = _witness_text(attrs.get("witness"))
        if wit:
            lines.append(f"witness: {wit}")
    return "\n".join(lines)


def _marker_defs(prefix: str) -> list[str]:
    colors = {**WIDTH_COLORS, "host": HOST_COLOR, "virtual": VIRTUAL_COLOR,
              "unknown": UNKNOWN_COLOR}
    out = ["<defs>"]
    for cat, color in colors.items():
        out.append(
            f'<marker id="{prefix}-{cat}" viewBox="0 0 10 10" refX="9" refY="5" '
            f'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
            f'<path d="M0 0 L10 5 L0 10 z" fill="{color}"/></marker>'
        )
    out.append("</defs>")
    return out


def _node_svg(b: _Box) -> list[str]:
    left = b.x - b.w / 2
    title = f"<title>{_esc(b.title)}</title>"
    attrs = f'class="pf-node pf-{_esc(b.kind)}" data-node="{_esc(b.node)}"'
    if b.kind == "sync":
        return [
            f"<g {attrs}>{title}"
            f'<rect x="{_fmt(left)}" y="{_fmt(b.y)}" width="{_fmt(b.w)}" height="{_fmt(b.h)}" '
            f'rx="2" fill="#37474f"/>'
            f'<text x="{_fmt(left + b.w + 6)}" y="{_fmt(b.y + b.h)}" font-size="11" '
            f'fill="#37474f" style="{FONT}">{_esc(b.text)}</text></g>'
        ]
    host = b.kind != "launch"
    fill, stroke, rx = ("#eceff1", "#90a4ae", 14) if host else ("#e3f2fd", "#1565c0", 3)
    return [
        f"<g {attrs}>{title}"
        f'<rect x="{_fmt(left)}" y="{_fmt(b.y)}" width="{_fmt(b.w)}" height="{_fmt(b.h)}" '
        f'rx="{rx}" fill="{fill}" stroke="{stroke}" stroke-width="1.3"/>'
        f'<text x="{_fmt(b.x)}" y="{_fmt(b.y + b.h / 2 + 4)}" text-anchor="middle" '
        f'font-size="12" fill="#102027" style="{FONT}">{_esc(b.text)}</text></g>'
    ]


def _cluster_svg(label: str, members: list[_Box]
                 ) -> tuple[list[str], float, tuple[float, float, float, float]]:
    """A dashed frame around ``members`` with its label in the top-left corner; the frame's
    right end and the label's box (edge labels keep off it)."""
    x0 = min(b.x - b.w / 2 for b in members) - 12
    x1 = max(b.right + b.reserved for b in members) + 12
    y0 = min(b.y for b in members) - 32
    y1 = max(b.bottom for b in members) + 10
    return [f'<g class="pf-cluster"><rect x="{_fmt(x0)}" y="{_fmt(y0)}" width="{_fmt(x1 - x0)}" '
            f'height="{_fmt(y1 - y0)}" rx="8" fill="#fafafa" stroke="#9e9e9e" '
            f'stroke-dasharray="4,3"/><text x="{_fmt(x0 + 6)}" y="{_fmt(y0 + 12)}" '
            f'font-size="10" fill="#616161" style="{FONT}">{_esc(label)}</text></g>'], x1, \
        (x0 + 6, y0 + 3, x0 + 6 + LABEL_CHAR_W * len(label), y0 + 14)


def _legend(x: float, y: float, prefix: str) -> tuple[list[str], float, float]:
    items: list[tuple[str, str, str]] = [
        ("thread", WIDTH_COLORS["thread"], ""), ("block", WIDTH_COLORS["block"], ""),
        ("global", WIDTH_COLORS["global"], ""), ("host", HOST_COLOR, ""),
        ("virtual", VIRTUAL_COLOR, ' stroke-dasharray="5,4"'),
    ]
    out = [f'<g class="pf-legend" transform="translate({_fmt(x)},{_fmt(y)})">']
    cx = 0.0
    for label, color, dash in items:
        out.append(
            f'<line x1="{_fmt(cx)}" y1="6" x2="{_fmt(cx + 26)}" y2="6" stroke="{color}" '
            f'stroke-width="2"{dash} marker-end="url(#{prefix}-{label})"/>'
            f'<text x="{_fmt(cx + 32)}" y="10" font-size="11" fill="#263238" '
            f'style="{FONT}">{label}</text>'
        )
        cx += 32 + CHAR_W * len(label) + 18
    shapes = [("launch", "#e3f2fd", "#1565c0", 3, 14), ("host op", "#eceff1", "#90a4ae", 7, 14),
              ("sync", "#37474f", "#37474f", 1, 6)]
    for label, fill, stroke, rx, h in shapes:
        out.append(
            f'<rect x="{_fmt(cx)}" y="{_fmt(6 - h / 2)}" width="22" height="{h}" rx="{rx}" '
            f'fill="{fill}" stroke="{stroke}"/>'
            f'<text x="{_fmt(cx + 28)}" y="10" font-size="11" fill="#263238" '
            f'style="{FONT}">{label}</text>'
        )
        cx += 28 + CHAR_W * len(label) + 18
    out.append("</g>")
    return out, cx, 20.0


def _place_label(x: float, y: float, text: str, taken: list[tuple[float, float, float, float]]
                 ) -> tuple[float, float]:
    """The first spot at or below ``(x, y)`` where ``text`` overlaps no label or box drawn."""
    w = LABEL_CHAR_W * len(text)
    for _ in range(40):
        if not any(x < x1 and x0 < x + w and y - 9 < y1 and y0 < y + 2
                   for x0, y0, x1, y1 in taken):
            break
        y += 11
    taken.append((x, y - 9, x + w, y + 2))
    return x, y


def uar_to_svg(uar: Any, launches_only: bool = False,
               clusters: Optional[Mapping[Any, str]] = None) -> str:
    """An SVG drawing of the UAR graph (standalone, well-formed XML).

    ``clusters`` (node -> name) frames nodes together; the default frames each host loop's
    body.  All the edges between two nodes share one route and one label.
    """
    g = _graph(uar, launches_only)
    clusters = host_loop_clusters(g) if clusters is None else clusters
    prefix = f"pfuar{next(_ids)}"
    bundles: dict[tuple[Any, Any], list[tuple[Any, dict]]] = {}
    for u, v, key, attrs in g.edges(keys=True, data=True):
        bundles.setdefault((u, v), []).append((key, attrs))
    loop_labels = {u: bundle_label(a for _, a in es) for (u, v), es in bundles.items() if u == v}
    reserve = {n: 40 + LABEL_CHAR_W * len(text) for n, text in loop_labels.items()}
    boxes = _layout(g, clusters, reserve)
    routes = _routes(g, boxes)
    out_edges: list[str] = []
    labels: list[str] = []
    taken = [(b.x - b.w / 2, b.y, b.right, b.bottom) for b in boxes.values()]
    right = max((b.right + b.reserved for b in boxes.values()), default=0.0)
    frames: list[str] = []
    for name in dict.fromkeys(clusters[n] for n in g.nodes if n in clusters):
        svg, x1, label_box = _cluster_svg(name, [boxes[n] for n in g.nodes
                                                 if clusters.get(n) == name])
        frames += svg
        taken.append(label_box)
        right = max(right, x1)
    for (u, v), parallel in bundles.items():
        route = routes[(u, v)]
        right = max(right, route.lane or 0.0)
        for k, (key, attrs) in enumerate(parallel):
            cat = edge_category(attrs)
            dash = ' stroke-dasharray="5,4"' if cat == "virtual" else ""
            marker = cat if cat in WIDTH_COLORS or cat in ("host", "virtual") else "unknown"
            out_edges.append(
                f'<g class="pf-edge pf-{_esc(cat)}" data-src="{_esc(u)}" data-dst="{_esc(v)}" '
                f'data-key="{_esc(key)}" data-width="{_esc(attrs.get("width"))}">'
                f"<title>{_esc(_edge_title(g, u, v, attrs))}</title>"
                f'<path d="{route.path(k, len(parallel))}" fill="none" '
                f'stroke="{edge_color(attrs)}" stroke-width="2"{dash} '
                f'marker-end="url(#{prefix}-{marker})"/></g>')
        text = bundle_label(a for _, a in parallel)
        if text:  # data edges (host ones too) are labelled; virtual ones keep the tooltip
            worst = max((a for _, a in parallel if edge_category(a) != "virtual"),
                        key=lambda a: _SEVERITY.get(edge_category(a), 0))
            x, y = _place_label(*route.anchor(), text, taken)
            right = max(right, x + LABEL_CHAR_W * len(text))
            labels.append(f'<text class="pf-edge-label" data-src="{_esc(u)}" '
                          f'data-dst="{_esc(v)}" x="{_fmt(x)}" y="{_fmt(y)}" font-size="10" '
                          f'fill="{edge_color(worst)}" stroke="white" stroke-width="3" '
                          f'paint-order="stroke" style="{FONT}">{_esc(text)}</text>')
    bottom = max([y for *_, y in taken]
                 + [r.below() + 6 for r in routes.values() if r.lane is not None], default=0.0)
    legend_y = bottom + MARGIN
    legend, legend_w, legend_h = _legend(MARGIN, legend_y, prefix)
    width = max(right + MARGIN, legend_w + 2 * MARGIN)
    total_h = legend_y + legend_h + MARGIN / 2
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="polyfuse-uar" '
        f'width="{_fmt(width)}" height="{_fmt(total_h)}" '
        f'viewBox="0 0 {_fmt(width)} {_fmt(total_h)}">',
        f"<title>{_esc(g.graph.get('name') or 'UAR')}</title>",
        *_marker_defs(prefix),
        '<rect x="0" y="0" width="100%" height="100%" fill="white"/>',
        *frames, *out_edges,  # edges before nodes, so that nodes are drawn over their ends
    ]
    for b in boxes.values():
        out.extend(_node_svg(b))
    out.extend(labels)
    out.extend(legend)
    out.append("</svg>")
    return "\n".join(out)


#: which edge of a bundle colours its label: the one that constrains fusion most
_SEVERITY = {"host": 1, "thread": 2, "block": 3, "global": 4, "unknown": 5}


def _dot_str(value: Any) -> str:
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def uar_to_dot(uar: Any, launches_only: bool = False,
               clusters: Optional[Mapping[Any, str]] = None) -> str:
    """The drawing of :func:`uar_to_svg` as Graphviz DOT, for ``dot -Tpng`` or another layout.

    The same conventions: a cluster per host loop (or per ``clusters`` name), one edge per
    connected pair drawn as parallel lines coloured by width (``color="a:b"``) with one
    ``xlabel`` (outside the line, so Graphviz keeps labels apart), virtual edges dashed.
    """
    g = _graph(uar, launches_only)
    clusters = host_loop_clusters(g) if clusters is None else clusters
    out = [f"digraph {_dot_str(g.graph.get('name') or 'UAR')} {{",
           '  graph [rankdir=TB, newrank=true, forcelabels=true, nodesep=0.35, ranksep=0.55];',
           '  node [fontname="DejaVu Sans Mono", fontsize=11, shape=box];',
           '  edge [fontname="DejaVu Sans Mono", fontsize=9, penwidth=1.6, arrowsize=0.7];']
    for k, name in enumerate(dict.fromkeys(clusters[n] for n in g.nodes if n in clusters)):
        members = " ".join(_dot_str(n) for n in g.nodes if clusters.get(n) == name)
        out.append(f"  subgraph cluster_{k} {{ label={_dot_str(name)}; labeljust=l; "
                   f'style="rounded,dashed"; color="#9e9e9e"; fontsize=10; {members} }}')
    for n, attrs in g.nodes(data=True):
        kind = attrs.get("kind", "launch")
        text, tip = node_text(n, attrs), _node_title(n, attrs)
        if kind == "sync":
            style = (f'label="", xlabel={_dot_str(text)}, height=0.08, width=1.2, '
                     f'style=filled, fillcolor="#37474f", color="#37474f"')
        elif kind == "launch" or attrs.get("kernel"):
            style = (f'label={_dot_str(text)}, style=filled, fillcolor="#e3f2fd", '
                     f'color="#1565c0"')
        else:
            style = (f'label={_dot_str(text)}, style="rounded,filled", fillcolor="#eceff1", '
                     f'color="#90a4ae"')
        out.append(f"  {_dot_str(n)} [{style}, tooltip={_dot_str(tip)}];")
    bundles: dict[tuple[Any, Any], list[dict]] = {}
    for u, v, attrs in g.edges(data=True):
        bundles.setdefault((u, v), []).append(attrs)
    for (u, v), edges in bundles.items():
        data = [a for a in edges if edge_category(a) != "virtual"]
        if data:
            worst = max(data, key=lambda a: _SEVERITY.get(edge_category(a), 0))
            colors = ":".join(dict.fromkeys(edge_color(a) for a in data))
            tip = "\n\n".join(_edge_title(g, u, v, a) for a in data)
            out.append(f"  {_dot_str(u)} -> {_dot_str(v)} [color={_dot_str(colors)}, "
                       f"xlabel={_dot_str(bundle_label(data))}, "
                       f"fontcolor={_dot_str(edge_color(worst))}, tooltip={_dot_str(tip)}];")
        if len(data) < len(edges):
            out.append(f"  {_dot_str(u)} -> {_dot_str(v)} [color={_dot_str(VIRTUAL_COLOR)}, "
                       f"style=dashed, tooltip={_dot_str('virtual (order)')}];")
    out.append("}")
    return "\n".join(out) + "\n"


def write_text(text: str, path: Union[str, os.PathLike, None]) -> str:
    """``text``, also written to ``path`` (UTF-8) when one is given: what every ``to_svg``
    and ``to_dot`` does, so a script saves a drawing without cutting it out of HTML."""
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text


# ----------------------------------------------------------------------------------------------
# HTML
# ----------------------------------------------------------------------------------------------

_TABLE_STYLE = (
    "border-collapse:collapse;font-size:12px;margin-top:8px;"
    "font-family:Menlo,Consolas,'DejaVu Sans Mono',monospace"
)
_CELL = "border:1px solid #cfd8dc;padding:2px 6px;text-align:left;vertical-align:top"


def _badge(width: Any, category: str) -> str:
    color = {"host": HOST_COLOR, "virtual": VIRTUAL_COLOR}.get(
        category, WIDTH_COLORS.get(str(width), UNKNOWN_COLOR))
    return (f'<span class="pf-width pf-{_esc(width)}" style="color:white;background:{color};'
            f'border-radius:3px;padding:0 4px">{_esc(width)}</span>')


def _get(edge: Any, name: str, default: Any = None) -> Any:
    if isinstance(edge, Mapping):
        return edge.get(name, default)
    return getattr(edge, name, default)


def _edge_rows(g: nx.MultiDiGraph) -> Iterable[str]:
    for u, v, attrs in g.edges(data=True):
        cat = edge_category(attrs)
        if cat == "virtual":
            continue
        flags = " \u21bb" if attrs.get("loop_carried") else ""
        cells = [
            f"{_esc(node_text(u, g.nodes[u]))} \u2192 {_esc(node_text(v, g.nodes[v]))}{flags}",
            _esc(attrs.get("array")),
            _esc(attrs.get("kind")),
            _badge(attrs.get("width"), cat),
            _esc(_conditions_text(attrs.get("conditions"))),
            _esc(_witness_text(attrs.get("witness"))),
        ]
        yield ('<tr class="pf-edge-row">'
               + "".join(f'<td style="{_CELL}">{c}</td>' for c in cells) + "</tr>")


def edges_table_html(uar: Any, launches_only: bool = False) -> str:
    """A compact table of the data edges (virtual edges left out)."""
    g = _graph(uar, launches_only)
    head = "".join(f'<th style="{_CELL};background:#eceff1">{h}</th>'
                   for h in ("src \u2192 dst", "array", "kind", "width", "conditions",
                             "witness"))
    rows = list(_edge_rows(g))
    if not rows:
        rows = [f'<tr><td style="{_CELL}" colspan="6">no data dependence</td></tr>']
    return (f'<table class="pf-edges" style="{_TABLE_STYLE}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")


def uar_to_html(uar: Any, launches_only: bool = False) -> str:
    """The SVG drawing followed by the edge table, in one ``<div>`` (well-formed XML)."""
    return (f'<div class="polyfuse-uar-view">{uar_to_svg(uar, launches_only)}'
            f"{edges_table_html(uar, launches_only)}</div>")


def edge_to_html(edge: Any) -> str:
    """One edge (a UAR ``Edge`` or a networkx edge-attribute dict): relation, conditions, witness.

    Conditions are listed one per finer label; the relation is shown as isl prints it, so it can
    be pasted back into ``isl.Map(...)``.
    """
    width = _get(edge, "width")
    attrs = {k: _get(edge, k) for k in ("virtual", "kind", "host", "width")}
    cat = edge_category(attrs)
    src_name = _get(edge, "src_kernel") or "host"
    dst_name = _get(edge, "dst_kernel") or "host"
    src, dst = _get(edge, "src"), _get(edge, "dst")
    head = (f"#{_esc(src)} {_esc(src_name)} \u2192 #{_esc(dst)} {_esc(dst_name)}"
            if src is not None else f"{_esc(src_name)} \u2192 {_esc(dst_name)}")
    facts = [f"array <b>{_esc(_get(edge, 'array'))}</b>", f"kind <b>{_esc(_get(edge, 'kind'))}</b>",
             f"width {_badge(width, cat)}"]
    if _get(edge, "loop_carried"):
        facts.append("loop-carried")
    if _get(edge, "host"):
        facts.append("host edge")
    relation = _get(edge, "relation_str") or _get(edge, "relation")
    conditions = _get(edge, "conditions") or {}
    if isinstance(conditions, Mapping) and conditions:
        cond_html = "<ul>" + "".join(
            f"<li>{_badge(label, label)} when <code>{_esc(cond)}</code></li>"
            for label, cond in conditions.items()) + "</ul>"
    elif conditions:
        cond_html = f"<code>{_esc(conditions)}</code>"
    else:
        cond_html = f"<i>none: {_esc(width)} for every parameter value</i>"
    witness = _witness_text(_get(edge, "witness"))
    wit_html = f"<code>{_esc(witness)}</code>" if witness else "<i>none</i>"
    return (
        '<div class="pf-edge-view" style="font-size:13px">'
        f"<div><b>{head}</b></div>"
        f"<div>{' &#183; '.join(facts)}</div>"
        "<div>relation:</div>"
        f'<pre style="white-space:pre-wrap;margin:2px 0 6px 0">{_esc(relation)}</pre>'
        f"<div>conditions: {cond_html}</div>"
        f"<div>witness: {wit_html}</div>"
        "</div>"
    )


class RichUAR:
    """Wraps a UAR so that Jupyter shows the drawing and the edge table."""

    def __init__(self, uar: Any, table: bool = True, launches_only: bool = False):
        self.uar = uar
        self.table = table
        self.launches_only = launches_only

    def _repr_html_(self) -> str:
        if self.table:
            return uar_to_html(self.uar, self.launches_only)
        return uar_to_svg(self.uar, self.launches_only)

    def _repr_svg_(self) -> str:
        return uar_to_svg(self.uar, self.launches_only)


def show(uar: Any, table: bool = True, launches_only: bool = False) -> RichUAR:
    """``show(uar)`` as the last line of a notebook cell displays it richly."""
    return RichUAR(uar, table, launches_only)
