"""Rich Jupyter display of a UAR: an SVG drawing of the graph and HTML tables of its edges.

Drawn by hand (no graphviz binary, no system package): Jupyter users get a picture wherever pip
works.  Everything reads ``uar.to_networkx()`` (a ``MultiDiGraph``; node attributes ``kind``
in {launch, host, sync}, ``kernel``, ``label``, ``host_loops``; edge attributes ``width``,
``kind``, ``array``, ``relation``, ``loop_carried``, ``host``, ``conditions``, ``witness``,
``virtual``), so the display depends on that view only.  Output is well-formed XML: every piece
of user text (kernel names, isl strings) is escaped.

* :func:`uar_to_svg` — layered drawing: launches as boxes, host operations as rounded boxes,
  synchronizations as bars, dependences as curved arrows coloured by width, tooltips, a legend.
* :func:`uar_to_html` — the drawing plus a compact table of the edges.
* :func:`edge_to_html` — one edge: relation, conditions, witness.
"""

from __future__ import annotations

import html
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

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
        keep = [n for n, k in g.nodes(data="kind") if (k or "launch") == "launch"]
        g = nx.MultiDiGraph(g.subgraph(keep))
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


def _layout(g: nx.MultiDiGraph) -> tuple[dict[Any, _Box], float, float]:
    layer = _layers(g)
    boxes: dict[Any, _Box] = {}
    for n, attrs in g.nodes(data=True):
        kind = str(attrs.get("kind", "launch"))
        text = node_text(n, attrs)
        w = max(70.0, CHAR_W * len(text) + 20)
        if kind == "sync":  # a bar with its label on the right
            w = max(60.0, CHAR_W * len(text) * 0.5)
        h = float(SYNC_H if kind == "sync" else NODE_H)
        boxes[n] = _Box(n, kind, text, _node_title(n, attrs), layer[n], w, h)
    rows: dict[int, list[_Box]] = {}
    for b in boxes.values():
        rows.setdefault(b.layer, []).append(b)
    row_w = {k: sum(b.w for b in r) + NODE_GAP * (len(r) - 1) for k, r in rows.items()}
    inner_w = max(row_w.values(), default=0.0)
    # leave room on the right for back edges and self-loops
    width = inner_w + 2 * MARGIN + 90
    for k, row in rows.items():
        x = MARGIN + (inner_w - row_w[k]) / 2
        for b in row:
            b.x = x + b.w / 2
            b.y = MARGIN + k * LAYER_GAP + (NODE_H - b.h) / 2
            x += b.w + NODE_GAP
    height = MARGIN * 2 + (max(rows, default=0) + 1) * LAYER_GAP - (LAYER_GAP - NODE_H)
    return boxes, width, height


# ----------------------------------------------------------------------------------------------
# SVG
# ----------------------------------------------------------------------------------------------


def _fmt(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def _bezier_mid(p0, p1, p2, p3) -> tuple[float, float]:
    return tuple(0.125 * a + 0.375 * b + 0.375 * c + 0.125 * d
                 for a, b, c, d in zip(p0, p1, p2, p3))  # type: ignore[return-value]


def _edge_path(src: _Box, dst: _Box, k: int, n: int) -> tuple[str, tuple[float, float]]:
    """A cubic Bézier from ``src`` to ``dst``; ``k`` of ``n`` parallel edges fans out."""
    spread = (k - (n - 1) / 2) * 16
    if src.node == dst.node:  # self-loop on the right side
        r = src.right
        bulge = 34 + 26 * k
        p0, p1 = (r, src.mid - 5), (r + bulge, src.mid - 20 - 6 * k)
        p2, p3 = (r + bulge, src.mid + 20 + 6 * k), (r, src.mid + 5)
    elif dst.layer > src.layer:  # downwards
        dy = (dst.y - src.bottom) / 2
        # an edge skipping layers bends to the right of the nodes (and edges) between its ends
        bend = 0.0 if dst.layer - src.layer == 1 else 0.6 * max(src.w, dst.w) + 12 * k
        p0 = (src.cx + spread * 0.5 + bend / 3, src.bottom)
        p3 = (dst.cx + spread * 0.5 + bend / 3, dst.y)
        p1 = (p0[0] + spread + bend, p0[1] + dy)
        p2 = (p3[0] + spread + bend, p3[1] - dy)
    else:  # same layer or a back edge: around the right side
        bulge = 46 + 16 * k + 0.25 * abs(src.mid - dst.mid)
        p0, p3 = (src.right, src.mid + spread * 0.2), (dst.right, dst.mid + spread * 0.2)
        p1 = (max(src.right, dst.right) + bulge, p0[1])
        p2 = (max(src.right, dst.right) + bulge, p3[1])
    d = "M{} {} C{} {} {} {} {} {}".format(*map(_fmt, (*p0, *p1, *p2, *p3)))
    return d, _bezier_mid(p0, p1, p2, p3)


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


def uar_to_svg(uar: Any, launches_only: bool = False) -> str:
    """An SVG drawing of the UAR graph (standalone, well-formed XML)."""
    g = _graph(uar, launches_only)
    prefix = f"pfuar{next(_ids)}"
    boxes, width, height = _layout(g)
    legend_y = height + 6
    legend, legend_w, legend_h = _legend(MARGIN, legend_y, prefix)
    width = max(width, legend_w + 2 * MARGIN)
    total_h = legend_y + legend_h + MARGIN / 2
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="polyfuse-uar" '
        f'width="{_fmt(width)}" height="{_fmt(total_h)}" '
        f'viewBox="0 0 {_fmt(width)} {_fmt(total_h)}">',
        f"<title>{_esc(g.graph.get('name') or 'UAR')}</title>",
        *_marker_defs(prefix),
        '<rect x="0" y="0" width="100%" height="100%" fill="white"/>',
    ]
    # edges first so that nodes are drawn over their ends
    groups: dict[tuple[Any, Any], list[tuple[Any, dict]]] = {}
    placed: list[tuple[float, float, float]] = []  # edge labels drawn: (x, y, width)
    for u, v, key, attrs in g.edges(keys=True, data=True):
        groups.setdefault((u, v), []).append((key, attrs))
    for (u, v), parallel in groups.items():
        for k, (key, attrs) in enumerate(parallel):
            d, (mx, my) = _edge_path(boxes[u], boxes[v], k, len(parallel))
            cat = edge_category(attrs)
            color = edge_color(attrs)
            dash = ' stroke-dasharray="5,4"' if cat == "virtual" else ""
            marker = cat if cat in WIDTH_COLORS or cat in ("host", "virtual") else "unknown"
            # data edges (host ones too) are labelled; virtual ones keep the tooltip
            label = ("" if cat == "virtual"
                     else f"{attrs.get('array') or ''} {attrs.get('kind')}")
            text = ""
            if label.strip():
                lx, ly, lw = mx + 4, my - 3 + 11 * k, 6.0 * len(label.strip())
                while any(abs(ly - py) < 11 and lx < px + pw and px < lx + lw
                          for px, py, pw in placed):
                    ly += 11  # below the labels already drawn there
                placed.append((lx, ly, lw))
                text = (f'<text x="{_fmt(lx)}" y="{_fmt(ly)}" font-size="10" '
                        f'fill="{color}" style="{FONT}">{_esc(label.strip())}</text>')
            out.append(
                f'<g class="pf-edge pf-{_esc(cat)}" data-src="{_esc(u)}" data-dst="{_esc(v)}" '
                f'data-key="{_esc(key)}" data-width="{_esc(attrs.get("width"))}">'
                f"<title>{_esc(_edge_title(g, u, v, attrs))}</title>"
                f'<path d="{d}" fill="none" stroke="{color}" stroke-width="2"{dash} '
                f'marker-end="url(#{prefix}-{marker})"/>{text}</g>'
            )
    for b in boxes.values():
        out.extend(_node_svg(b))
    out.extend(legend)
    out.append("</svg>")
    return "\n".join(out)


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
