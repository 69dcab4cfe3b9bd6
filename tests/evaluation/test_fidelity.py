"""Memory fidelity: gold against itself scores 1.0 everywhere, shuffled log groups score ARI ≈ 0, and hand-made
memories give the values their definitions predict, metric by metric."""

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
from evaluation.fidelity.compute import compute_fidelity
from evaluation.fidelity.service import measure_build
from evaluation.fidelity.types import FidelityConfig
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

    def __init__(self):
        self.axis: dict[str, int] = {}

    def embed_documents(self, texts):
        for t in texts:
            self.axis.setdefault(t, len(self.axis))
        out = np.zeros((len(texts), 4096), dtype=np.float32)
        for row, t in enumerate(texts):
            out[row, self.axis[t]] = 1.0
        return out

    embed_queries = embed_documents


def dialogue_snapshots(user):
    stages = gold_stages(user)
    return [dict(stages[dialogue_stage(p)]) for p in range(len(user.sessions))]


FIGURES_ONE = ("situation_ari", "situation_nmi", "requirement_recall", "requirement_similarity", "requirement_bleu1",
               "preference_recall", "preference_precision", "background_coverage", "text_recall", "text_precision")


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
            if name.startswith("requirement") and row.requirements == 0:
                continue
            assert value == pytest.approx(1.0, abs=1e-5), (row.sample_id, name, value)
        assert row.polarity_errors == 0 and all(v == pytest.approx(1.0) for v in row.background.values())
    assert report.misses == [] and report.unavailable == {}


def test_shuffled_log_groups_score_ari_near_zero(demo_user):
    snaps = dialogue_snapshots(demo_user)
    last = snaps[-1]
    situations = [i for i in last.values() if i.layer == "situation"]
    refs = [r for i in situations for r in i.provenance]
    aris = []
    for seed in range(5):
        shuffled = refs[:]
        random.Random(seed).shuffle(shuffled)  # same group sizes, logs dealt at random
        fake, at = dict(last), 0
        for item in situations:
            n = len(item.provenance)
            fake[item.id] = item.model_copy(update={"provenance": shuffled[at:at + n]})
            at += n
        report = compute_fidelity(demo_user, "gold", [*snaps[:-1], fake], HashEmbedder())
        aris.append(report.final.situation_ari)
        assert report.final.situation_nmi < 0.6
    assert abs(float(np.mean(aris))) < 0.03 and max(abs(a) for a in aris) < 0.06
    assert any(m.kind == "split" for m in report.misses)


# ---------------------------------------------------------------- hand-made values, metric by metric


def test_grouping_scores_known_values():
    assert fm.grouping_scores(list("aabb"), list("xxyy")) == pytest.approx((1.0, 1.0))
    ari, nmi = fm.grouping_scores(list("aabb"), list("xyxy"))
    assert ari == pytest.approx(-0.5) and nmi == pytest.approx(0.0)
    ari, _ = fm.grouping_scores(list("aaabbb"), list("xxxxxx"))
    assert ari == pytest.approx(0.0)
    assert fm.grouping_scores([], []) is None
    with pytest.raises(ValueError, match="differ in length"):
        fm.grouping_scores(["a"], [])


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
    """Gold minus one requirement, minus the work background, with one principle's polarities swapped."""
    snaps = dialogue_snapshots(demo_user)
    last = snaps[-1]
    topics = sorted(i.id for i in last.values() if i.layer == "topic_outline")
    principle = next(i for i in last.values() if i.layer == "principle")
    swapped = principle.model_copy(update={"meta": {**principle.meta, "pos": principle.meta["neg"],
                                                    "neg": principle.meta["pos"]}})
    work = f"{demo_user.uid}_background_work"
    fake = {**_drop(last, topics[0], work), principle.id: swapped}
    report = compute_fidelity(demo_user, "gold", [*snaps[:-1], fake], OneHot())
    row = report.final
    assert row.requirement_recall == pytest.approx((len(topics) - 1) / len(topics))
    assert row.requirement_similarity == pytest.approx((len(topics) - 1) / len(topics))
    gold_prefs = fs.gold_preference_statements(last)
    flipped = len(fs.split_sentences(principle.meta["pos"])) + len(fs.split_sentences(principle.meta["neg"]))
    assert row.preferences == len(gold_prefs) and row.polarity_errors == flipped
    assert row.preference_recall == pytest.approx(1.0) and row.preference_precision == pytest.approx(1.0)
    assert row.background["work"] == 0.0 and row.background["health"] == 1.0
    assert row.background_coverage == pytest.approx(0.75)
    gold_text = fs.all_statements(last)
    lost = set(fs.all_statements({work: last[work]})) | set(fs.all_statements({topics[0]: last[topics[0]]}))
    assert row.text_recall == pytest.approx(1 - len({s.text for s in lost}) / len(gold_text), abs=0.01)
    assert row.situation_ari == pytest.approx(1.0)
    kinds = {(m.layer, m.kind) for m in report.misses}
    assert {("requirement", "missed"), ("preference", "polarity"), ("background", "missed")} <= kinds
    assert next(m for m in report.misses if m.layer == "requirement").text == last[topics[0]].text


def test_methods_without_the_layers_are_measured_at_the_text_level(demo_user):
    """An agentic-style memory: one item holding every gold requirement as a bullet list."""
    snaps = dialogue_snapshots(demo_user)
    reqs = [i.text for i in snaps[-1].values() if i.layer == "topic_outline"]
    blob = MemoryItem(id="u_memory", layer="memory", text="\n".join(f"- {r}" for r in reqs), session_id="x",
                      session_index=0)
    memories = [{} for _ in snaps[:-1]] + [{"u_memory": blob}]
    report = compute_fidelity(demo_user, "agentic", memories, OneHot())
    row = report.final
    assert not report.layered and row.situation_ari is None and "situation" in report.unavailable
    assert row.requirement_recall == pytest.approx(1.0) and row.requirement_bleu1 == pytest.approx(1.0)
    assert row.preference_recall == 0.0 and row.preference_precision is None and row.polarity_errors is None
    assert "preference_precision" in report.unavailable and report.scopes["requirement"].startswith("every statement")
    assert row.text_precision == pytest.approx(1.0)
    assert row.text_recall == pytest.approx(len(reqs) / row.gold_statements)
    first = report.sessions[0]
    assert first.requirement_recall == 0.0 and first.text_precision is None  # an empty memory recalls nothing


def test_a_session_grouping_baseline_scores_between(demo_user, tmp_path):
    embedder = HashEmbedder()
    builder = MemoryBuilder("demo", demo_user, "full-history", make_workspace(tmp_path).memory,
                            BruteForceStore(embedder), embedder)
    builder.run()
    report = measure_build(builder, make_workspace(tmp_path).fidelity)
    assert 0.0 < report.final.situation_ari < 1.0  # one group per session: sessions hold 1–3 situations
    assert report.scopes["situation"] == "log groups of layer 'session_logs'"


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
    row = report.final
    assert row.situation_ari is None and row.preference_recall is None
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
    assert second.final.requirement_recall < 1.0
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
