"""A memory snapshot as a graph: what the assistant remembers, linked to where it came from.

:func:`build_memory_graph` is pure (items in, :class:`GraphSpec` out) and works for every method:
H²Memory's layers get their own links (user → background aspects, principles → topic outlines,
situations → logs), every other item links to its session and to the items its ``item:``
provenance names. Raw logs are summarised as one "N logs" node per item unless that item is
expanded, so a year of logs stays readable. :func:`render_pyvis_html` draws it with pyvis at
precomputed positions (no physics: a thousand nodes paint at once), inlines vis-network, strips
every external tag, and keeps all text from data escaped: the page shows it, never runs it.
"""

from __future__ import annotations

import hashlib
import html
import math
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

from memory.types import MemoryItem
from palset.dataset import Session, User
from ui.memory.graph_layout import force_layout

USER_NODE = "user"
# pseudo-layers for nodes that are not memory items (shown in the legend and toggles like layers)
USER_LAYER, SESSION_LAYER, LOG_LAYER, TURN_LAYER = "user", "source session", "source log", "source turn"
SOURCE_LAYERS = (USER_LAYER, SESSION_LAYER, LOG_LAYER, TURN_LAYER)

LAYER_COLOURS = {
    USER_LAYER: "#111827", SESSION_LAYER: "#9ca3af", LOG_LAYER: "#d1d5db", TURN_LAYER: "#e5e7eb",
    "background": "#7c3aed", "principle": "#dc2626", "topic_outline": "#f59e0b", "situation": "#2563eb",
    "log_graph": "#0891b2", "session_logs": "#64748b", "session_dialogue": "#94a3b8", "turn": "#f97316",
    "log": "#60a5fa", "session": "#fb923c", "summary": "#16a34a", "log_summary": "#0d9488", "event": "#db2777",
    "portrait": "#9333ea", "memory": "#059669",
}
FALLBACK_COLOURS = ("#ef4444", "#84cc16", "#06b6d4", "#a855f7", "#eab308", "#14b8a6", "#f43f5e", "#6366f1")
LABEL_CHARS, TITLE_CHARS = 30, 1200  # a label's width in Latin characters (a CJK character counts two)
CJK_FONT = "'Noto Sans CJK SC', 'Source Han Sans SC', 'WenQuanYi Micro Hei', 'Microsoft YaHei', 'PingFang SC', sans-serif"


@dataclass(frozen=True)
class GraphNode:
    id: str
    label: str  # HTML-escaped, clipped
    title: str  # HTML-escaped full text (tooltip)
    layer: str
    colour: str
    size: float = 12.0
    group: str = ""
    x: float = 0.0
    y: float = 0.0


@dataclass(frozen=True)
class GraphEdge:
    source: str
    target: str
    label: str = ""
    dashes: bool = False


@dataclass
class GraphSpec:
    nodes: list[GraphNode] = field(default_factory=list)
    edges: list[GraphEdge] = field(default_factory=list)
    layer_counts: dict[str, int] = field(default_factory=dict)  # every layer present, before filtering

    def node(self, node_id: str) -> GraphNode | None:
        return next((n for n in self.nodes if n.id == node_id), None)


def layer_colour(layer: str) -> str:
    """A fixed colour per known layer; unknown layers get a stable colour from their name."""
    if layer in LAYER_COLOURS:
        return LAYER_COLOURS[layer]
    return FALLBACK_COLOURS[int(hashlib.md5(layer.encode()).hexdigest(), 16) % len(FALLBACK_COLOURS)]


def _width(ch: str) -> int:
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def display_clip(text: str, width: int = LABEL_CHARS) -> str:
    """``text`` on one line, cut to ``width`` display columns (a wide CJK character takes two) with an ellipsis:
    Chinese labels as long on screen as English ones, not twice as long."""
    flat = " ".join(text.split())
    if sum(_width(ch) for ch in flat) <= width:
        return flat
    used, out = 0, []
    for ch in flat:
        if used + _width(ch) > width - 1:
            break
        out.append(ch)
        used += _width(ch)
    return "".join(out).rstrip() + "…"


def item_label(item: MemoryItem, width: int = LABEL_CHARS) -> str:
    """A node's label from the item's text, never its id; an item without text says what it is (its layer and
    aspect) and that it is empty."""
    if item.text.strip():
        return display_clip(item.text, width)
    aspect = item.meta.get("aspect") or item.meta.get("aspects") or ""
    what = f"{item.layer.replace('_', ' ')}" + (f" · {aspect}" if isinstance(aspect, str) and aspect else "")
    return f"{what} (empty)"


def escape(text: object) -> str:
    """Escape for HTML (quotes included): a node's label and title never become markup."""
    return html.escape(str(text), quote=True)


# ---------------------------------------------------------------- provenance


def parse_ref(ref: str) -> tuple[str, str, int | None]:
    """``log:S:j`` → ("log", S, j); ``turn:S:t`` → ("turn", S, t); ``item:ID`` → ("item", ID, None)."""
    kind, _, rest = ref.partition(":")
    if kind in ("log", "turn"):
        sample_id, _, num = rest.rpartition(":")
        if sample_id and num.isdigit():
            return kind, sample_id, int(num)
    return kind, rest, None


def refs_of(item: MemoryItem, kind: str) -> list[tuple[str, int]]:
    """(sample id, number) of the item's ``log`` or ``turn`` provenance."""
    out = []
    for ref in item.provenance:
        k, sid, num = parse_ref(ref)
        if k == kind and num is not None:
            out.append((sid, num))
    return out


def item_refs(item: MemoryItem) -> list[str]:
    """Ids of the items this one derives from: ``item:`` provenance, principle members."""
    ids = [parse_ref(r)[1] for r in item.provenance if r.startswith("item:")]
    ids += [str(m) for m in item.meta.get("members", []) if isinstance(m, str)]
    return list(dict.fromkeys(ids))


def log_text(user: User | None, sample_id: str, j: int) -> str:
    session = _session(user, sample_id)
    if session is None or not 0 <= j < len(session.logs):
        return f"log {j} of {sample_id} (not in this dataset)"
    lg = session.logs[j]
    return f"[{lg.timestamp:%Y-%m-%d %H:%M}] {lg.content}"


def turn_text(user: User | None, sample_id: str, t: int) -> str:
    session = _session(user, sample_id)
    if session is None or not 1 <= t <= len(session.turns):
        return f"turn {t} of {sample_id} (not in this dataset)"
    turn = session.turns[t - 1]
    return f"user: {turn.user.content}\nassistant: {turn.assistant.content}"


def _session(user: User | None, sample_id: str) -> Session | None:
    return user.session(sample_id) if user is not None else None


# ---------------------------------------------------------------- building


class _Builder:
    """Collects nodes and edges once; :func:`build_memory_graph` filters and lays them out."""

    def __init__(self, items: list[MemoryItem], user: User | None, expand: set[str]):
        self.items = {i.id: i for i in items}
        self.user, self.expand = user, expand
        self.nodes: dict[str, dict] = {}
        self.edges: dict[tuple[str, str], GraphEdge] = {}

    def add_node(self, node_id: str, label: str, title: str, layer: str, importance: float = 1.0) -> None:
        if node_id not in self.nodes:
            self.nodes[node_id] = {"label": label, "title": title, "layer": layer, "importance": importance}

    def add_edge(self, source: str, target: str, label: str = "", dashes: bool = False) -> None:
        if source != target and (source, target) not in self.edges and (target, source) not in self.edges:
            self.edges[(source, target)] = GraphEdge(source, target, label, dashes)

    def build(self) -> None:
        name = self.user.name if self.user is not None else "user"
        self.add_node(USER_NODE, name, f"{name}\nthe user whose memory this is", USER_LAYER, 3.0)
        for item in self.items.values():
            self.add_node(item.id, item_label(item), _item_title(item), item.layer, max(item.importance, 0.1))
        for item in self.items.values():
            self._link(item)

    def session_node(self, sample_id: str) -> str:
        node_id = f"session:{sample_id}"
        session = _session(self.user, sample_id)
        when = f" · {session.dialogue_timestamp:%Y-%m-%d}" if session else ""
        split = f" ({session.split})" if session else ""
        self.add_node(node_id, f"{sample_id}{when}", f"session {sample_id}{split}{when}", SESSION_LAYER, 1.2)
        self.add_edge(USER_NODE, node_id)
        return node_id

    def _link(self, item: MemoryItem) -> None:
        layer = item.layer
        if layer == "background":
            self.add_edge(USER_NODE, item.id)
        elif layer not in ("principle",) and item.session_id:
            self.add_edge(self.session_node(item.session_id), item.id)
        for source in item_refs(item):
            if source in self.items:
                self.add_edge(item.id, source)
        self._link_logs(item)
        if item.id in self.expand:
            for sid, t in refs_of(item, "turn"):
                node_id = f"turn:{sid}:{t}"
                text = turn_text(self.user, sid, t)
                self.add_node(node_id, f"turn {t} · {display_clip(text, LABEL_CHARS - 9)}", f"{sid} turn {t}\n{text}",
                              TURN_LAYER, 0.6)
                self.add_edge(item.id, node_id)

    def _link_logs(self, item: MemoryItem) -> None:
        logs = refs_of(item, "log")
        if item.id in self.expand:
            for sid, j in logs:
                self.add_node(f"log:{sid}:{j}", display_clip(log_text(self.user, sid, j)),
                              f"{sid} log {j}\n{log_text(self.user, sid, j)}", LOG_LAYER, 0.6)
                self.add_edge(item.id, f"log:{sid}:{j}")
            self._log_graph_edges(item)
        elif len(logs) > 1 or (logs and item.layer == "situation"):
            lines = [log_text(self.user, sid, j) for sid, j in logs[:12]]
            more = f"\n… and {len(logs) - 12} more" if len(logs) > 12 else ""
            node_id = f"logs:{item.id}"
            self.add_node(node_id, f"{len(logs)} log{'s' if len(logs) != 1 else ''}",
                          f"{len(logs)} logs behind {item.id}\n" + "\n".join(lines) + more, LOG_LAYER, 0.8)
            self.add_edge(item.id, node_id)

    def _log_graph_edges(self, item: MemoryItem) -> None:
        """A session's log graph (``meta.edges`` of log indices) between log nodes already drawn."""
        graphs = [i for i in self.items.values() if i.layer == "log_graph" and i.session_id in
                  {sid for sid, _ in refs_of(item, "log")}]
        for graph in graphs:
            for edge in graph.meta.get("edges", []):
                if isinstance(edge, list | tuple) and len(edge) >= 2:
                    a, b = f"log:{graph.session_id}:{edge[0]}", f"log:{graph.session_id}:{edge[1]}"
                    if a in self.nodes and b in self.nodes:
                        self.add_edge(a, b, str(edge[2]) if len(edge) > 2 else "", dashes=True)


def _item_title(item: MemoryItem) -> str:
    head = f"{item.id} · {item.layer} · {item.session_id}"
    extra = [f"{k}: {v}" for k, v in item.meta.items() if k in ("aspect", "aspects", "preference", "principle",
                                                             "general_requirement", "turn_span")]
    if item.meta.get("joined_by_time"):  # logs the Log Graph left (nearly) alone, joined to this situation by time
        extra.append("joined by time, no relation: " + ", ".join(f"log_{j}" for j in item.meta["joined_by_time"]))
    text = item.text if len(item.text) <= TITLE_CHARS else item.text[:TITLE_CHARS] + "…"
    return "\n".join([head, text, *extra])


def neighbourhood(edges: Iterable[GraphEdge], focus: str, hops: int) -> set[str]:
    """The nodes within ``hops`` links of ``focus`` (either direction), ``focus`` included."""
    links: dict[str, set[str]] = {}
    for e in edges:
        links.setdefault(e.source, set()).add(e.target)
        links.setdefault(e.target, set()).add(e.source)
    seen, frontier = {focus}, {focus}
    for _ in range(hops):
        frontier = {n for f in frontier for n in links.get(f, ())} - seen
        seen |= frontier
    return seen


def build_memory_graph(items: Iterable[MemoryItem], user: User | None, expand: set[str] | None = None,
                       layers: set[str] | None = None, layout: bool = True, focus: str | None = None,
                       hops: int = 1) -> GraphSpec:
    """Nodes and edges of a memory snapshot; ``expand`` shows each log/turn of those items,
    ``layers`` (default: all) keeps only nodes of those layers (memory layers or :data:`SOURCE_LAYERS`),
    ``focus`` (an item id) only that item's neighbourhood of ``hops`` links (the user node is a hub, so it is no
    path between items)."""
    b = _Builder(list(items), user, set(expand or ()))
    b.build()
    counts: dict[str, int] = {}
    for data in b.nodes.values():
        counts[data["layer"]] = counts.get(data["layer"], 0) + 1
    keep = {nid for nid, d in b.nodes.items() if layers is None or d["layer"] in layers}
    if focus is not None and focus in b.nodes:
        hub_free = [e for e in b.edges.values() if USER_NODE not in (e.source, e.target) or focus == USER_NODE]
        keep &= neighbourhood(hub_free, focus, hops) | {focus}
    edges = [e for e in b.edges.values() if e.source in keep and e.target in keep]
    degree = {nid: 0 for nid in keep}
    for e in edges:
        degree[e.source] += 1
        degree[e.target] += 1
    positions = force_layout(list(keep), [(e.source, e.target) for e in edges]) if layout else {}
    nodes = []
    for nid, d in b.nodes.items():
        if nid not in keep:
            continue
        x, y = positions.get(nid, (0.0, 0.0))
        nodes.append(GraphNode(id=nid, label=escape(d["label"]), title=escape(d["title"]), layer=d["layer"],
                               colour=layer_colour(d["layer"]), size=_size(d["importance"], degree[nid]),
                               group=d["layer"], x=x, y=y))
    return GraphSpec(nodes=nodes, edges=edges, layer_counts=counts)


def _size(importance: float, degree: int) -> float:
    return round(min(8 + 3 * math.sqrt(degree) * min(importance, 3.0), 48), 1)


# ---------------------------------------------------------------- rendering

_EXTERNAL_TAG = re.compile(
    r"<script\b[^>]*\bsrc\s*=\s*[\"']?(?:https?:)?//[^>]*>.*?</script\s*>"
    r"|<link\b[^>]*\bhref\s*=\s*[\"']?(?:https?:)?//[^>]*>",
    re.IGNORECASE | re.DOTALL,
)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_HEADING = re.compile(r"<center>\s*<h1>\s*</h1>\s*</center>", re.IGNORECASE)
_NETWORK_CALL = "network = new vis.Network(container, data, options);"
# Labels and titles arrive HTML-escaped; decode them into plain strings / text nodes for display,
# so nothing from data is ever parsed as HTML (vis draws labels on a canvas).
_DECODE_JS = """
function palDecode(s) {
  return String(s).replace(/&(#x[0-9a-f]+|#[0-9]+|lt|gt|amp|quot);/gi, function (m, e) {
    var k = e.toLowerCase();
    if (k === 'lt') return '<'; if (k === 'gt') return '>'; if (k === 'amp') return '&'; if (k === 'quot') return '"';
    return String.fromCodePoint(k.charAt(1) === 'x' ? parseInt(k.slice(2), 16) : parseInt(k.slice(1), 10));
  });
}
nodes.update(nodes.get().map(function (n) {
  var tip = document.createElement('div');
  tip.style.whiteSpace = 'pre-wrap'; tip.style.maxWidth = '420px'; tip.style.fontFamily = 'sans-serif';
  tip.style.fontSize = '12px';
  tip.textContent = palDecode(n.title || '');
  return {id: n.id, label: palDecode(n.label || ''), title: tip};
}));
"""
_HREF = re.compile(r"(?i)h(ref)")  # pyvis switches to an innerHTML tooltip when a title contains "href"
OPTIONS = {
    "physics": {"enabled": False},
    "interaction": {"hover": True, "tooltipDelay": 120, "navigationButtons": False, "hideEdgesOnDrag": True},
    "edges": {"smooth": False, "color": {"color": "#cbd5e1", "highlight": "#475569"}, "width": 1,
              "arrows": {"to": {"enabled": True, "scaleFactor": 0.4}}, "font": {"size": 9, "color": "#64748b"}},
    "nodes": {"shape": "dot", "font": {"size": 14, "face": CJK_FONT, "strokeWidth": 3, "strokeColor": "#ffffff"},
              "borderWidth": 1},
}


def render_pyvis_html(graph: GraphSpec, height: int = 640) -> str:
    """A self-contained HTML page (vis-network inlined, no external request) drawing ``graph``."""
    from pyvis.network import Network

    net = Network(height=f"{height - 4}px", width="100%", directed=True, cdn_resources="in_line")
    for n in graph.nodes:
        net.add_node(n.id, label=_HREF.sub(r"&#104;\1", n.label), title=_HREF.sub(r"&#104;\1", n.title),
                     color=n.colour, size=n.size, x=n.x, y=n.y, physics=False)  # no vis group: it would override the colour
    for e in graph.edges:
        net.add_edge(e.source, e.target, title=escape(e.label) if e.label else None, dashes=e.dashes)
    net.options = OPTIONS
    page = net.generate_html()
    page = _COMMENT.sub("", _EXTERNAL_TAG.sub("", page))
    page = _HEADING.sub("", page)
    if _NETWORK_CALL in page:
        page = page.replace(_NETWORK_CALL, _DECODE_JS + _NETWORK_CALL, 1)
    return page.replace("<head>", '<head>\n<style>body{margin:0} .card{border:none}</style>', 1)


def graph_summary(graph: GraphSpec) -> dict:
    """Counts for captions and tests: nodes per layer and edges."""
    per_layer: dict[str, int] = {}
    for n in graph.nodes:
        per_layer[n.layer] = per_layer.get(n.layer, 0) + 1
    return {"nodes": len(graph.nodes), "edges": len(graph.edges), "per_layer": per_layer}

