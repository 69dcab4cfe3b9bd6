"""The memory graph: links per layer, log aggregation, layer toggles, escaping, a self-contained page, scale."""

import re
import time

import pytest

from memory.types import MemoryItem
from palset.loader import load_dataset
from tests.conftest import DEMO
from ui.memory.graph import (
    LOG_LAYER,
    SESSION_LAYER,
    USER_LAYER,
    USER_NODE,
    build_memory_graph,
    graph_summary,
    render_pyvis_html,
)

SCRIPT = "<script>window.__pwned=1</script>"
IMG = '<img src=x onerror="window.__pwned=1">'
EXTERNAL_TAG = re.compile(r"<(?:script|link)\b[^>]*\b(?:src|href)\s*=\s*[\"']?(?:https?:)?//", re.IGNORECASE)


@pytest.fixture(scope="module")
def user():
    return load_dataset(DEMO).users["1001"]


def h2_items(user) -> list[MemoryItem]:
    """A small H²Memory-shaped snapshot over the user's first two sessions."""
    s0, s1 = user.sessions[0].sample_id, user.sessions[1].sample_id

    def item(id_, layer, sid, text="text", provenance=(), **meta):
        return MemoryItem(id=id_, layer=layer, text=text, session_id=sid, session_index=int(sid[-1]),
                          provenance=list(provenance), meta=meta)

    return [
        item(f"{s0}_situation0", "situation", s0, "Busy week at the store", [f"log:{s0}:{j}" for j in range(5)],
             aspects=["work"], log_ids=list(range(5)), joined_by_time=[3, 4]),
        item(f"{s0}_situation1", "situation", s0, "Knee pain", [f"log:{s0}:{j}" for j in (5, 6)],
             aspects=["health"], log_ids=[5, 6]),
        item(f"{s0}_log_graph", "log_graph", s0, "graph", edges=[[0, 1, "caused_by"], [1, 2, "follows"], [5, 6, "follows"]]),
        item("1001_background_work", "background", s1, "Runs a hardware store", aspect="work"),
        item(f"{s0}_topic1", "topic_outline", s0, "Finance the store", [f"turn:{s0}:1", f"turn:{s0}:2",
             f"item:{s0}_situation0"], turn_span=[1, 2], solutions=[], preference="", requirement_original="r", cluster=0),
        item(f"{s1}_topic1", "topic_outline", s1, "Plan the shop", [f"turn:{s1}:1"], turn_span=[1, 1], solutions=[],
             preference="", requirement_original="r", cluster=0),
        item("1001_cluster0", "principle", s1, "Prefers low-risk options", [f"item:{s0}_topic1", f"item:{s1}_topic1"],
             general_requirement="money", principle="low risk", members=[f"{s0}_topic1", f"{s1}_topic1"]),
    ]


def edge_set(graph) -> set[tuple[str, str]]:
    return {(e.source, e.target) for e in graph.edges}


def test_h2memory_layers_are_linked_to_user_sessions_members_and_logs(user):
    items = h2_items(user)
    s0, s1 = user.sessions[0].sample_id, user.sessions[1].sample_id
    g = build_memory_graph(items, user)
    edges = edge_set(g)
    assert (USER_NODE, "1001_background_work") in edges
    assert {("1001_cluster0", f"{s0}_topic1"), ("1001_cluster0", f"{s1}_topic1")} <= edges
    assert (f"session:{s1}", f"{s1}_topic1") in edges and (f"session:{s0}", f"{s0}_situation0") in edges
    assert (f"{s0}_topic1", f"{s0}_situation0") in edges  # item: provenance
    assert (USER_NODE, f"session:{s0}") in edges
    assert not any(e[0] == "1001_cluster0" and e[1].startswith("session:") for e in edges)
    assert g.node(USER_NODE).label == "Dale Brennan"
    colours = {n.layer: n.colour for n in g.nodes}
    assert len(set(colours.values())) == len(colours)  # one colour per layer here


def test_logs_are_aggregated_per_situation_unless_expanded(user):
    items = h2_items(user)
    s0 = user.sessions[0].sample_id
    g = build_memory_graph(items, user)
    assert g.node(f"logs:{s0}_situation0").label == "5 logs"
    assert g.node(f"logs:{s0}_situation1").label == "2 logs"
    assert not any(n.id.startswith("log:") for n in g.nodes)
    assert "Busy" not in g.node(f"logs:{s0}_situation0").title and user.sessions[0].logs[0].content[:20] in \
        g.node(f"logs:{s0}_situation0").title.replace("&#x27;", "'").replace("&quot;", '"').replace("&amp;", "&")

    assert "joined by time, no relation: log_3, log_4" in g.node(f"{s0}_situation0").title
    assert "joined by time" not in g.node(f"{s0}_situation1").title

    g = build_memory_graph(items, user, expand={f"{s0}_situation0"})
    assert g.node(f"logs:{s0}_situation0") is None and g.node(f"logs:{s0}_situation1") is not None
    logs = [n for n in g.nodes if n.id.startswith("log:")]
    assert len(logs) == 5 and all(n.layer == LOG_LAYER for n in logs)
    dashed = {(e.source, e.target, e.label) for e in g.edges if e.dashes}
    assert dashed == {(f"log:{s0}:0", f"log:{s0}:1", "caused_by"), (f"log:{s0}:1", f"log:{s0}:2", "follows")}
    g = build_memory_graph(items, user, expand={f"{s0}_topic1"})
    assert {n.id for n in g.nodes if n.id.startswith("turn:")} == {f"turn:{s0}:1", f"turn:{s0}:2"}


def test_layer_toggles_filter_nodes_and_their_edges(user):
    items = h2_items(user)
    full = build_memory_graph(items, user, layout=False)
    assert full.layer_counts["situation"] == 2 and full.layer_counts[SESSION_LAYER] == 2
    g = build_memory_graph(items, user, layers={"situation", "background", USER_LAYER}, layout=False)
    assert {n.layer for n in g.nodes} == {"situation", "background", USER_LAYER}
    ids = {n.id for n in g.nodes}
    assert all(e.source in ids and e.target in ids for e in g.edges)
    assert g.layer_counts == full.layer_counts  # legend counts stay those of the whole snapshot
    assert build_memory_graph(items, user, layers=set()).nodes == []


def test_generic_method_items_link_to_sessions_and_item_provenance(user):
    s = user.sessions[2]
    items = [MemoryItem(id=f"{s.sample_id}_turn{t}", layer="turn", text=f"turn {t}", session_id=s.sample_id,
                        session_index=2, provenance=[f"turn:{s.sample_id}:{t}"]) for t in (1, 2)]
    items.append(MemoryItem(id="sum", layer="summary", text="summary", session_id=s.sample_id, session_index=2,
                            provenance=[f"item:{s.sample_id}_turn1", "item:missing"]))
    items.append(MemoryItem(id="sl", layer="session_logs", text="logs", session_id=s.sample_id, session_index=2,
                            provenance=[f"log:{s.sample_id}:{j}" for j in range(3)]))
    g = build_memory_graph(items, user)
    edges = edge_set(g)
    assert (f"session:{s.sample_id}", f"{s.sample_id}_turn1") in edges and ("sum", f"{s.sample_id}_turn1") in edges
    assert g.node("logs:sl").label == "3 logs"  # several raw logs behind one item are grouped too
    assert graph_summary(g)["per_layer"]["turn"] == 2


def test_text_from_data_is_escaped_in_labels_titles_and_html(user):
    s0 = user.sessions[0].sample_id
    items = [
        MemoryItem(id="evil1", layer="situation", text=SCRIPT, session_id=s0, session_index=0, provenance=[f"log:{s0}:0"]),
        MemoryItem(id="evil2", layer=IMG, text=IMG + " see href", session_id=s0, session_index=0),
    ]
    g = build_memory_graph(items, user, expand={"evil1"})
    for n in g.nodes:
        for text in (n.label, n.title):
            assert "<script" not in text and "<img" not in text and '"' not in text
    assert "&lt;script&gt;" in g.node("evil1").label and "&lt;img" in g.node("evil2").title
    page = render_pyvis_html(g)
    assert SCRIPT not in page and "<img" not in page and "window.__pwned" in page  # present only as escaped data
    assert "popup.innerHTML" not in page  # "href" in a title must not switch pyvis to its innerHTML tooltip
    assert "palDecode" in page and "textContent" in page


def test_page_is_self_contained_and_static(user):
    page = render_pyvis_html(build_memory_graph(h2_items(user), user))
    assert not EXTERNAL_TAG.search(page)
    assert "cdn.jsdelivr" not in page and "cdnjs" not in page and "node_modules" not in page
    assert "new vis.Network" in page and len(page) > 500_000  # vis-network is inlined
    assert '"physics": false' in page and '"physics": {"enabled": false}' in page


def test_a_thousand_nodes_build_with_precomputed_positions(user):
    sessions = user.sessions
    items = [MemoryItem(id=f"i{n}", layer=("turn", "log", "summary")[n % 3], text=f"item {n}",
                        session_id=sessions[n % len(sessions)].sample_id, session_index=n % len(sessions),
                        provenance=[f"item:i{n - 1}"] if n % 3 == 2 else []) for n in range(1000)]
    started = time.perf_counter()
    g = build_memory_graph(items, user)
    page = render_pyvis_html(g)
    assert time.perf_counter() - started < 15
    assert len(g.nodes) == 1000 + 1 + len(sessions)
    positions = {(n.x, n.y) for n in g.nodes}
    assert len(positions) > 990
    xs = [n.x for n in g.nodes]
    assert max(xs) - min(xs) > 1000  # spread out in pixels, not a ball at the origin
    assert page.count('"physics": false') == len(g.nodes)


def test_labels_come_from_item_text_never_ids_and_cjk_is_clipped_by_width(user):
    from ui.memory.graph import LABEL_CHARS, display_clip, item_label

    items = h2_items(user)
    items.append(MemoryItem(id="1001_background_leisure", layer="background", text="", session_id="s",
                            session_index=0, meta={"aspect": "leisure"}))
    graph = build_memory_graph(items, user, layout=False)
    labels = {n.id: n.label for n in graph.nodes}
    assert all(labels[i.id] != i.id for i in items)  # no label is an internal id
    assert labels["1001_background_leisure"] == "background · leisure (empty)"
    zh = "年终要给一个店长打低分，这话怎么开口？我明白你的心里想要问这个问题" * 2
    clipped = display_clip(zh)
    assert clipped.endswith("…") and len(clipped) <= LABEL_CHARS // 2 + 1  # two columns per CJK character
    assert len(display_clip("x" * 200)) == LABEL_CHARS and display_clip("short  text") == "short text"
    assert item_label(items[0]) == "Busy week at the store"


def test_focus_keeps_the_selected_items_neighbourhood_without_going_through_the_user(user):
    items = h2_items(user)
    s0 = user.sessions[0].sample_id
    whole = build_memory_graph(items, user, layout=False)
    one = build_memory_graph(items, user, layout=False, focus="1001_cluster0", hops=1)
    ids = {n.id for n in one.nodes}
    assert "1001_cluster0" in ids and f"{s0}_topic1" in ids  # its members
    assert "1001_background_work" not in ids and USER_NODE not in ids  # not via the user hub
    two = {n.id for n in build_memory_graph(items, user, layout=False, focus="1001_cluster0", hops=2).nodes}
    assert ids < two < {n.id for n in whole.nodes} and f"{s0}_situation0" in two
    assert {(e.source, e.target) for e in one.edges} <= edge_set(whole)


def test_a_hundred_node_build_spreads_labels_apart(user):
    items = [MemoryItem(id=f"i{k}", layer="situation", text=f"situation number {k} with some words",
                        session_id=user.sessions[k % 3].sample_id, session_index=k % 3) for k in range(100)]
    graph = build_memory_graph(items, user)
    xs = sorted(n.x for n in graph.nodes)
    assert xs[-1] - xs[0] >= 1000  # room between labels (vis fits the drawing to the frame); the layout's float
    # arithmetic differs a little between machines and thread counts, so the bound keeps a margin
    html = render_pyvis_html(graph)
    assert "WenQuanYi Micro Hei" in html and '"size": 14' in html
