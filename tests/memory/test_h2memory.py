"""H²Memory with a scripted LLM: windows, components, background, outlines, principles, retrieval."""

import json
import threading

import numpy as np
import pytest

from backends.llm.errors import Cancelled
from memory.methods.h2_parts import (
    clean_edges,
    components,
    constrained_kmeans,
    join_small_groups,
    shared_logs,
    tile_spans,
    windows,
)
from memory.store import dialogue_stage, logs_stage
from testkit.h2_fake import h2_reply, situation_group


def test_windows_are_ten_logs_with_ten_of_context():
    w = windows(25)
    assert w[0] == (list(range(10)), [])
    assert w[1] == (list(range(10, 20)), list(range(10)))
    assert w[2] == (list(range(20, 25)), list(range(10, 20)))


def test_a_session_of_at_most_shared_logs_is_sent_whole_else_each_call_its_own_logs():
    entries = {f"log_{j}": {"timestamp": f"2024-01-{j + 1:02d} 09:00", "content": f"did {j}"} for j in range(5)}
    assert json.loads(shared_logs(entries, [3, 1], limit=5)) == entries  # whole session, in session order
    assert list(json.loads(shared_logs(entries, [3, 1], limit=4))) == ["log_1", "log_3"]  # too long: own logs only


@pytest.mark.parametrize("language", ["en", "zh"])
def test_log_graph_and_situation_prompts_start_with_one_prefix(language):
    """Both logs-stage prompts open with the same system message and the session's logs, word for word, in each
    wording, so the server's prompt cache serves that prefix to every window and situation of a session."""
    from backends.prompts import load_prompt

    logs = json.dumps({"log_0": {"timestamp": "2024-01-01 09:00", "content": "跑步"}}, ensure_ascii=False)
    graph = load_prompt("memory/h2_log_graph", language=language).messages(
        session_logs=logs, targets="log_0", allowed="log_0")
    situation = load_prompt("memory/h2_situation", language=language).messages(
        session_logs=logs, logs="log_0 [2024-01-01 09:00] 跑步", language="x")
    assert graph[0] == situation[0] and graph[0]["role"] == "system"
    head = graph[1]["content"][:graph[1]["content"].index(logs) + len(logs)]
    assert situation[1]["content"].startswith(head) and head.count("\n") <= 2


def test_edges_only_point_to_earlier_logs_inside_the_window():
    rels = [{"log": "log_12", "caused_by": ["log_3", "log_13"], "follows": ["log_3", "log_11"]},
            {"log": "log_5", "caused_by": ["log_1"], "follows": []}]
    assert clean_edges(rels, list(range(10, 20)), list(range(10))) == [(3, 12, "caused_by"), (11, 12, "follows")]


def test_components_include_singletons_in_log_order():
    assert components(6, [(0, 2, "follows"), (2, 4, "caused_by"), (1, 3, "follows")]) == [[0, 2, 4], [1, 3], [5]]


def test_small_groups_join_the_group_nearest_in_time():
    # logs at hours 0..7; the graph linked 0-1-2 and 5-6-7, left 3 (an hour after 2) and 4 (an hour before 5) alone
    times = [0, 1, 2, 3, 6, 7, 8, 9]
    found = [[0, 1, 2], [3], [4], [5, 6, 7]]
    assert join_small_groups(found, times, 2) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert join_small_groups(found, times, 1) == found  # 1: Mem-PAL's components, untouched
    # the smallest joins first, the earlier on ties: [3] → [0, 1, 2]; then [4] (3 h from log 3, 1 h from log 5) → 5
    assert join_small_groups(found, times, 4) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert join_small_groups(found, times, 5) == [[0, 1, 2, 3, 4, 5, 6, 7]]  # until one group is left
    assert join_small_groups([[0], [1]], [0, 5], 3) == [[0, 1]]
    assert join_small_groups([[0, 2], [1]], [0, 1, 2], 2) == [[0, 1, 2]]  # gap: the closest member, not the first


def test_constrained_kmeans_gives_every_cluster_two_members():
    rng = np.random.default_rng(0)
    vecs = np.vstack([rng.normal(c, 0.1, size=(n, 4)) for c, n in ((0, 9), (5, 1), (10, 6))])
    labels, centers = constrained_kmeans(vecs, k=8)
    assert np.bincount(labels).min() >= 2 and len(centers) == len(set(labels.tolist())) <= 8


def test_constrained_kmeans_finds_the_clusters_sklearns_checked_fits_find(monkeypatch):
    """Skipping scikit-learn's own checks and its second OpenMP thread changes no cluster: the same labels and centres
    as fits that check, on every thread the machine offers."""
    import contextlib

    import sklearn
    import threadpoolctl

    rng = np.random.default_rng(3)
    vecs = rng.normal(size=(23, 16)).astype(np.float32)
    fast = [constrained_kmeans(vecs, k=k, seed=seed) for k in (3, 8) for seed in (0, 7)]
    monkeypatch.setattr(sklearn, "config_context", lambda **_: contextlib.nullcontext())
    monkeypatch.setattr(threadpoolctl, "threadpool_limits", lambda **_: contextlib.nullcontext())
    checked = [constrained_kmeans(vecs, k=k, seed=seed) for k in (3, 8) for seed in (0, 7)]
    for (labels, centers), (labels2, centers2) in zip(fast, checked):
        assert labels.tolist() == labels2.tolist() and np.array_equal(centers, centers2)


def test_constrained_kmeans_refuses_vectors_that_are_not_finite():
    vecs = np.ones((6, 4))
    vecs[2, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        constrained_kmeans(vecs, k=2)


def test_tile_spans_repairs_gaps_and_overlaps():
    assert tile_spans([[1, 2], [4, 6]], 6) == [(1, 3), (4, 6)]
    assert tile_spans([[2, 5]], 5) == [(1, 5)]


def build(build_memory, user, **kw):
    builder, fake = build_memory("h2memory", user, h2_reply, **kw)
    builder.run()
    return builder, fake


def test_full_build_layers_and_provenance(build_memory, tiny_user):
    builder, fake = build(build_memory, tiny_user)
    final = {i.id: i for i in builder.store.items_as_of(builder.build_id, dialogue_stage(3))}
    layers = {i.layer for i in final.values()}
    assert layers == {"log_graph", "situation", "background", "topic_outline", "principle"}
    for s in tiny_user.sessions:
        sits = [i for i in final.values() if i.layer == "situation" and i.session_id == s.sample_id]
        assert len(sits) == 2  # even and odd chains
        assert all(p.startswith(f"log:{s.sample_id}:") for i in sits for p in i.provenance)  # never cross sessions
        graph = final[f"{s.sample_id}_log_graph"]
        assert all(0 <= a < b < len(s.logs) for a, b, _ in graph.meta["edges"])
    outline = final[f"{tiny_user.sessions[0].sample_id}_topic0"]
    assert outline.text.startswith("refined: ") and outline.meta["requirement_original"].startswith("needs help")
    assert any(p.startswith("turn:") for p in outline.provenance) and any(p.startswith("item:") for p in outline.provenance)


def test_the_index_holds_every_layer_h2memory_searches_and_only_those(build_memory, tiny_user, monkeypatch):
    """Building and retrieving search only indexed layers, and each of those holds every version of its layer."""
    from memory.index import VectorIndex

    searched: set[str] = set()
    search = VectorIndex.search
    monkeypatch.setattr(VectorIndex, "search", lambda self, layer, *a, **k: searched.add(layer) or search(self, layer, *a, **k))
    builder, _ = build(build_memory, tiny_user)
    trace = builder.retrieve("needs help with work", "requirement", current=tiny_user.sessions[-1])
    indexed = set(builder.impl.indexed_layers or ())
    assert searched and searched <= indexed and trace.items
    versions = builder.store.versions(builder.build_id)
    for layer in builder.impl.layers:
        expected = sum(v[0].layer == layer for v in versions) if layer in indexed else 0
        assert builder.index.count(layer) == expected, layer
    assert any(v[0].layer not in indexed for v in versions)  # some layers are kept, just not embedded


def test_background_is_versioned_per_session(build_memory, tiny_user):
    builder, _ = build(build_memory, tiny_user)
    uid = tiny_user.uid
    texts = [next(i.text for i in builder.store.items_as_of(builder.build_id, logs_stage(k)) if i.id == f"{uid}_background_work")
             for k in range(4)]
    assert len(set(texts)) == 4
    diff = builder.store.diff(builder.build_id, logs_stage(2), since=dialogue_stage(1))
    assert [b.id for b, _ in diff.changed] == [f"{uid}_background_work"]
    assert {i.layer for i in diff.added} == {"log_graph", "situation"}


def test_principles_cluster_history_topics_then_update_on_query_sessions(build_memory, tiny_user):
    builder, _ = build(build_memory, tiny_user)
    after_history = builder.store.items_as_of(builder.build_id, dialogue_stage(2))
    principles = [i for i in after_history if i.layer == "principle"]
    topics = [i for i in after_history if i.layer == "topic_outline"]
    assert principles and all(len(p.meta["members"]) >= 2 for p in principles)
    assert sum(len(p.meta["members"]) for p in principles) == len(topics) == 6
    assert all(t.meta["cluster"] is not None for t in topics)
    final = builder.store.items_as_of(builder.build_id, dialogue_stage(3))
    query_topics = [i for i in final if i.layer == "topic_outline" and i.session_id == tiny_user.query[0].sample_id]
    assert query_topics and all(t.meta["cluster"] is not None for t in query_topics)
    counts_before = sum(p.meta["count"] for p in principles)
    counts_after = sum(p.meta["count"] for p in final if p.layer == "principle")
    assert counts_after == counts_before + len(query_topics)
    assert any(p.meta["principle"] == "adjusted" for p in final if p.layer == "principle")


def test_incremental_build_equals_full_build_and_resumes(build_memory, tiny_user, tmp_path, monkeypatch):
    full, fake_full = build(build_memory, tiny_user)
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "other"))
    step, fake_step = build_memory("h2memory", tiny_user, h2_reply, dataset="ds2")
    cancel = threading.Event()
    with pytest.raises(Cancelled):
        step.run(progress=lambda done, total, what: cancel.set() if done == 3 else None, cancel=cancel)
    assert step.store.done_stages(step.build_id) == [0, 1, 2]
    for k in range(len(tiny_user.sessions)):
        step.run(until_session=k)
    a = {(i.id, i.text) for i in full.store.items_as_of(full.build_id, dialogue_stage(3))}
    b = {(i.id, i.text) for i in step.store.items_as_of(step.build_id, dialogue_stage(3))}
    assert a == b
    # every LLM call is recorded once per build (cache hits included): resuming redid nothing
    assert step.llm.store.totals(run_id=step.build_id).calls == full.llm.store.totals(run_id=full.build_id).calls


def test_retrieval_follows_the_spec(build_memory, tiny_user):
    builder, _ = build(build_memory, tiny_user)
    current = tiny_user.query[0]
    req = builder.retrieve("sleep after night shifts", "requirement", current)
    sits = [r.item for r in req.items if r.item.layer == "situation"]
    topics = [r.item for r in req.items if r.item.layer == "topic_outline"]
    assert sits and all(s.session_id == current.sample_id for s in sits) and len(sits) <= 3
    assert topics and all(t.session_index < current.index for t in topics) and len(topics) <= 3
    assert "rejected" not in req.context and "accepted" not in req.context  # no preference content
    assert "general type: general need" in req.context
    sol = builder.retrieve("sleep after night shifts", "solution", current)
    assert "The user's principles" in sol.context and "rejected:" in sol.context and "meditation app" in sol.context
    assert 0 < sol.tokens < sol.full_history_tokens


def test_forgetting_an_item_forgets_what_derives_from_it(build_memory, tiny_user):
    builder, _ = build(build_memory, tiny_user)
    current = tiny_user.query[0]
    before = builder.retrieve("needs help with sleep", "requirement", current)
    target = next(r.item for r in before.items if r.item.layer == "topic_outline")
    forgotten = builder.forget({target.id})
    assert target.id in forgotten
    principle_ids = {i.id for i in builder.store.items_as_of(builder.build_id, 10**6, include_forgotten=True)
                     if i.layer == "principle" and f"item:{target.id}" in i.provenance}
    assert principle_ids <= forgotten  # derived items go too
    after = builder.retrieve("needs help with sleep", "requirement", current)
    assert target.id not in {r.item.id for r in after.items}
    assert not set(r.item.id for r in after.items) & forgotten


def test_bad_model_output_never_breaks_the_build(build_memory, tiny_user):
    builder, fake = build_memory("h2memory", tiny_user, lambda req: "I am a tiny model and I like turtles")
    info = builder.run()
    assert info.stages_done == 8
    items = builder.store.items_as_of(builder.build_id, dialogue_stage(3))
    assert {i.layer for i in items} >= {"situation", "topic_outline", "background"}
    notes = [n for ns in builder.store.notes(builder.build_id).values() for n in ns]
    assert any("fallback used" in n for n in notes)


def test_principles_update_once_per_touched_cluster_with_the_references_inputs(build_memory, tiny_user):
    """The query dialogue's two topics join one cluster → one requirement update (fed only the
    new requirements) and one principle update (fed the general requirement, the principle and the new
    preferences), not two calls per topic."""
    import json

    from testkit.requests import prompt_text, schema_name

    tiny_user.query[0].turns[0].user.content = "QUERY DIALOGUE: I sleep badly after my night shifts."

    def reply(req):
        if schema_name(req) == "OutlineOut" and "QUERY DIALOGUE" in prompt_text(req):  # two topics about sleep
            return json.dumps({"topics": [
                {"turn_span": [1, 4], "requirement": "needs help with sleep after night shifts",
                 "solution_list": [], "preference": "wants earplugs, not pills"},
                {"turn_span": [5, 8], "requirement": "needs help with sleep after night shifts",
                 "solution_list": [], "preference": "likes a fixed bedtime"}]})
        return h2_reply(req)

    builder, fake = build_memory("h2memory", tiny_user, reply)
    builder.run()
    by_schema: dict[str, list[str]] = {}
    for r in fake.requests:
        by_schema.setdefault(schema_name(r), []).append(prompt_text(r))
    (req_prompt,) = by_schema["RequirementAdjustOut"]
    (pri_prompt,) = by_schema["PrincipleAdjustOut"]
    assert req_prompt.count("- refined: needs help with sleep after night shifts") == 2
    assert "earplugs" not in req_prompt and "bedtime" not in req_prompt  # no preferences in the requirement update
    assert "general need" in req_prompt
    assert "Kind of need: general need" in pri_prompt and "likes concrete fixes" in pri_prompt
    assert "- wants earplugs, not pills" in pri_prompt and "- likes a fixed bedtime" in pri_prompt
    assert "refined:" not in pri_prompt  # the principle update sees preferences, not requirements
    final = builder.store.items_as_of(builder.build_id, dialogue_stage(3))
    (touched,) = [p for p in final if p.layer == "principle" and p.session_index == tiny_user.query[0].index]
    assert touched.meta["principle"] == "adjusted" and touched.meta["general_requirement"] == "general need"
    query_ids = {i.id for i in final if i.layer == "topic_outline" and i.session_id == tiny_user.query[0].sample_id}
    assert query_ids <= set(touched.meta["members"]) and len(query_ids) == 2


def _loose_graph(req):
    """H2_reply, except the log graph links only logs 0-1-2-3 and 6-7-8-9 of each session (4 and 5 left alone)."""
    from testkit.requests import schema_name

    if schema_name(req) != "LogGraphOut":
        return h2_reply(req)
    targets = req.response_format["json_schema"]["schema"]["properties"]["relations"]["items"]["properties"]["log"]["enum"]
    links = {"log_1": ["log_0"], "log_2": ["log_1"], "log_3": ["log_2"], "log_7": ["log_6"], "log_8": ["log_7"],
             "log_9": ["log_8"]}
    return json.dumps({"relations": [{"log": t, "caused_by": [], "follows": links.get(t, [])} for t in targets]})


@pytest.mark.parametrize("min_logs, groups", [(1, 4), (4, 2)])
def test_logs_the_graph_leaves_alone_join_the_situation_nearest_in_time(build_memory, tiny_user, min_logs, groups):
    builder, fake = build_memory("h2memory", tiny_user, _loose_graph, config={"min_situation_logs": min_logs})
    builder.run(until_session=0)
    session = tiny_user.sessions[0]
    sits = sorted((i for i in builder.store.items_as_of(builder.build_id, dialogue_stage(0)) if i.layer == "situation"),
                  key=lambda i: i.meta["log_ids"][0])
    assert len(sits) == groups
    assert sorted(j for i in sits for j in i.meta["log_ids"]) == list(range(len(session.logs)))  # every log, once
    from testkit.requests import schema_name

    asked = [r for r in fake.requests if schema_name(r) == "SituationOut"]
    assert len(asked) == groups  # one summary per situation, none for the groups that joined
    if min_logs == 1:
        assert all(not i.meta["joined_by_time"] for i in sits)
    else:
        times = [lg.timestamp for lg in session.logs]
        joined = {j for i in sits for j in i.meta["joined_by_time"]}
        assert joined == {4, 5}
        for j in joined:  # each loose log sits with the chain whose nearest log is closest in time
            own = next(i for i in sits if j in i.meta["log_ids"])
            other = next(i for i in sits if j not in i.meta["log_ids"])
            gap = {i.id: min(abs((times[j] - times[k]).total_seconds()) for k in i.meta["log_ids"] if k not in joined)
                   for i in (own, other)}
            assert gap[own.id] <= gap[other.id]


def test_a_blank_situation_reply_is_replaced_by_its_logs(build_memory, tiny_user):
    """A model that answers a situation with blanks (the bundled 135M model did) leaves no empty situation: the
    group's own logs stand for it, as when the reply is unusable."""
    import json

    from testkit.requests import schema_name

    def reply(req):
        if schema_name(req) == "SituationOut":
            return json.dumps({"situation": "   ", "situation_aspects": ["work"]})
        return h2_reply(req)

    builder, _ = build_memory("h2memory", tiny_user, reply)
    builder.run(until_session=0)
    session = tiny_user.sessions[0]
    sits = [i for i in builder.store.items_as_of(builder.build_id, dialogue_stage(0)) if i.layer == "situation"]
    assert len(sits) == 2
    for item in sits:
        logs = [session.logs[j].content for j in item.meta["log_ids"]]
        assert item.text and item.text.split()[0] in logs[0] and item.meta["aspects"] == ["work"]


def test_a_blank_refinement_keeps_the_outlines_requirement(build_memory, tiny_user):
    import json

    from testkit.requests import schema_name

    def reply(req):
        if schema_name(req) == "RefinedOut":
            return json.dumps({"requirement": "  "})
        return h2_reply(req)

    builder, _ = build_memory("h2memory", tiny_user, reply)
    builder.run(until_session=0)
    outlines = [i for i in builder.store.items_as_of(builder.build_id, dialogue_stage(0)) if i.layer == "topic_outline"]
    assert outlines and all(i.text and i.text == i.meta["requirement_original"] for i in outlines)


def _h2_builder(home, user, fake):
    """A build over its own workspace (its own response cache), answered by ``fake``."""
    from backends.config import ROLES
    from backends.embeddings import HashEmbedder
    from backends.vectorstore import BruteForceStore
    from memory.build import MemoryBuilder
    from testkit.workspace import make_workspace

    ws = make_workspace(home)
    embedder = HashEmbedder()
    return MemoryBuilder("ds", user, "h2memory", ws.memory, BruteForceStore(embedder), embedder,
                         llm=ws.llm(session_id="t", providers=dict.fromkeys(ROLES, fake)))


def _h2_reply_with_slips(req):
    """H2_reply, except the situations starting at an odd log never get a valid answer (notes and fallbacks)."""
    from testkit.requests import schema_name

    prompt = next(m.content for m in req.messages if m.role == "user")
    if schema_name(req) == "SituationOut" and situation_group(prompt)[0].startswith(("log_1 ", "log_3 ")):
        return "not json"
    return h2_reply(req)


def _stored(builder):
    """Every stored version with the stages it lived in, every stage's notes and cost, in stored order."""
    stages = [(s, n) for s, n in sorted(builder.store.notes(builder.build_id).items())]
    info = builder.store.info(builder.build_id)
    return ([(item.model_dump(), opened, closed) for item, opened, closed in builder.store.versions(builder.build_id)],
            stages, (info.stages_done, info.llm_calls, info.tokens_in, info.tokens_out))


@pytest.fixture
def long_user(tmp_path):
    """One filler user whose sessions have 25 logs (three log-graph windows each)."""
    from palset.loader import load_dataset
    from testkit.release import make_release

    root = make_release(tmp_path / "ds", users=1, sessions=4, logs_per_session=25, turns=8, query_sessions=1)
    return next(iter(load_dataset(root).users.values()))


def test_a_build_with_calls_in_flight_together_stores_exactly_what_one_by_one_stores(long_user, tmp_path):
    from backends.llm.fake import ScriptedLLM

    one_by_one = _h2_builder(tmp_path / "a", long_user, ScriptedLLM(_h2_reply_with_slips))
    one_by_one.run()
    fake = ScriptedLLM(_h2_reply_with_slips, slots=3, latency=0.1)
    together = _h2_builder(tmp_path / "b", long_user, fake)
    together.run()
    # calls went out together (the outline beside the first window, then the other windows: see the test below)
    assert fake.max_in_flight >= 2
    assert _stored(together) == _stored(one_by_one)
    calls = together.llm.store.by_prompt(together.build_id)  # every call of the build, response-cache hits included
    assert calls["memory/h2_topic_outline"][0] == len(long_user.sessions)  # each outline asked once (beside its logs)
    assert {k: v[:3] for k, v in calls.items()} == {k: v[:3] for k, v in
                                                    one_by_one.llm.store.by_prompt(one_by_one.build_id).items()}
    assert any("situation 1: model output invalid" in n for _, notes in _stored(together)[1] for n in notes)


def test_a_concurrent_build_cancelled_inside_a_stage_resumes_without_asking_again(long_user, tmp_path):
    from backends.llm.fake import ScriptedLLM

    one_by_one = _h2_builder(tmp_path / "a", long_user, fake_a := ScriptedLLM(h2_reply))
    one_by_one.run()
    cancel = threading.Event()

    def reply(req):
        if len(fake.requests) >= 2:  # inside the first stage's log-graph windows
            cancel.set()
        return h2_reply(req)

    fake = ScriptedLLM(reply, slots=3, latency=0.01)
    stopped = _h2_builder(tmp_path / "b", long_user, fake)
    with pytest.raises(Cancelled):
        stopped.run(cancel=cancel)
    assert stopped.store.done_stages(stopped.build_id) == []  # the stage was left unfinished, nothing half-stored
    sent_before = len(fake.requests)
    from testkit.requests import schema_name

    # no situation was asked after the cancel (the session's outline is asked beside its logs)
    assert {schema_name(r) for r in fake.requests} <= {"LogGraphOut", "OutlineOut"}
    stopped.run()
    assert _stored(stopped)[0] == _stored(one_by_one)[0]
    assert len(fake.requests) == len(fake_a.requests)  # the calls answered before the cancel came from the cache
    assert sent_before < len(fake_a.requests)


@pytest.mark.parametrize("slots", [2, 3])
def test_each_sessions_first_window_goes_alone_then_the_rest_together(long_user, tmp_path, slots):
    """The first log-graph window of a session is the only call of the session in flight (the others then find its
    prefix, the session's logs, in the server's cache); the windows after it go out together in the slots the
    session's outline, asked beside them, leaves free: one of two (so one slot's cache serves them all), two of
    three."""
    import time

    from backends.llm.fake import ScriptedLLM
    from testkit.requests import schema_name

    lock, running, seen = threading.Lock(), {}, []

    def reply(req):
        if schema_name(req) != "LogGraphOut":
            return h2_reply(req)
        prompt = next(m.content for m in req.messages if m.role == "user")
        targets = req.response_format["json_schema"]["schema"]["properties"]["relations"]["items"]["properties"]["log"]
        session, first = prompt.split("\n")[1][:40], "log_0" in targets["enum"]  # the session's first log, window 0
        with lock:
            running[session] = running.get(session, 0) + 1
        time.sleep(0.05)
        with lock:
            seen.append((first, running[session]))
            running[session] -= 1
        return h2_reply(req)

    fake = ScriptedLLM(reply, slots=slots, latency=0.05)
    _h2_builder(tmp_path, long_user, fake).run()
    assert len(seen) == 3 * len(long_user.sessions)  # three windows a session
    assert all(n == 1 for first, n in seen if first)  # window 0: alone
    assert max(n for first, n in seen if not first) == slots - 1  # windows 1 and 2: in the slots the outline leaves
