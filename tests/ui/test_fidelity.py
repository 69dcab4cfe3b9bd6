"""Pure builders behind the fidelity views and the oracle labels: curves skip figures a method cannot have, the
gold memory is the dashed 1.0 line, misses filter by layer, a figure that cannot be measured reads "n/a" with its
reason, reference rows come first, and gold is named an oracle upper bound in every table."""

from __future__ import annotations

import pytest

from backends.embeddings import HashEmbedder
from evaluation.aggregate import leaderboard
from evaluation.bias import length_bias
from evaluation.fidelity.board import leaderboard as fidelity_leaderboard
from evaluation.fidelity.compute import compute_fidelity
from evaluation.fidelity.types import FidelityConfig
from memory.methods.gold import gold_stages
from memory.store import dialogue_stage
from memory.types import MemoryItem
from palset.loader import load_dataset
from tests.conftest import DEMO
from ui import fidelity as fc
from ui.evaluate.data import aggregates_frame, leaderboard_frame
from ui.evaluate.fidelity import board_frame, missing_references
from ui.methods import method_label
from ui.simulate.runs import runs_frame


@pytest.fixture(scope="module")
def demo_user():
    return load_dataset(DEMO).users["1000"]


def _reports(user):
    gold = [gold_stages(user)[dialogue_stage(p)] for p in range(len(user.sessions))]
    blob = MemoryItem(id="m", layer="memory", text="The user likes tea.", session_id="x", session_index=0)
    strict = FidelityConfig(threshold=0.99)
    return (compute_fidelity(user, "gold", gold, HashEmbedder(), config=strict),
            compute_fidelity(user, "agentic", [{"m": blob}] * len(gold), HashEmbedder(), config=strict))


def test_curves_labels_and_tables(demo_user):
    gold, agentic = _reports(demo_user)
    fig = fc.fidelity_figure(agentic, "1000_sample3")
    names = [t.name for t in fig.data]
    assert "gold (oracle upper bound)" in names and "text precision" in names
    assert "situation κ (within sessions)" not in names
    assert list(fig.data[0].x) == [s.sample_id for s in demo_user.sessions]
    assert "cosine ≥ 0.99" in fig.layout.yaxis.title.text
    bars = fc.layer_counts_figure(gold_stages(demo_user)[-1], {}, "agentic")
    assert [t.name for t in bars.data] == ["gold (oracle upper bound)", "agentic"]
    assert sum(bars.data[0].y) == len(gold_stages(demo_user)[-1]) and sum(bars.data[1].y) == 0
    misses = fc.misses_frame(agentic, ["requirement"])
    assert len(misses) == 14 and set(misses["what"]) == {"not in the memory"}
    assert len(fc.misses_frame(agentic)) == len(agentic.misses)
    frame = fc.sessions_frame(gold)
    assert list(frame["situation_within"]) == ["1.000"] * 9 and fc.sessions_frame(agentic)["situation_within"].iloc[0] == "n/a"
    assert list(frame["headline"]).index("◀") == len(demo_user.history) - 1  # the last history session
    lines = fc.definitions_markdown(agentic)
    assert any(line.startswith("**situation_within** n/a: agentic does not group logs") for line in lines)
    assert any(line.startswith("**polarity_errors** n/a") for line in lines)
    assert any("Compared with: every statement" in line for line in lines) and lines[0].startswith("τ = 0.99")
    assert "n/a:" in fc.figure_help(agentic, "situation_within") and "n/a" not in fc.figure_help(gold, "text_recall")


def test_gold_is_an_oracle_upper_bound_wherever_a_method_is_named(demo_user):
    assert "oracle upper bound" in method_label("gold")
    board = board_frame(fidelity_leaderboard(list(_reports(demo_user))))
    assert list(board["row"]) == ["gold (oracle upper bound)", "agentic"]
    assert board.iloc[0]["text_recall"].startswith("1.000") and board.iloc[1]["situation_within"] == "n/a"
    assert "situation_within: agentic does not group logs" in board.iloc[1]["not measured"]
    lb = leaderboard_frame(leaderboard([]))
    assert lb.empty
    agg = aggregates_frame([{"method_a": "gold", "method_b": "rag-turn", "aspect": "both", "n": 1, "win": 1, "tie": 0,
                             "lose": 0, "invalid": 0, "adjusted_win_rate": 1.0, "adjusted_win_rate_ci": [1.0, 1.0],
                             "flip_rate": 0.0, "slot1_win_rate": 0.5, "invalid_samples": 0, "samples": 2,
                             "threshold": 0.0, "length_bias": length_bias([])}])
    assert agg.iloc[0]["method_a"] == "gold (oracle upper bound)" and agg.iloc[0]["method_b"] == "rag-turn"
    runs = runs_frame([{"run_id": "r", "user_id": "1000", "sample_id": "s", "topic_key": "topic-1", "method": "gold",
                        "mode": "fixed", "seed": "0", "status": "finished", "utterances": 3, "updated_at": 0.0}])
    assert runs.iloc[0]["method"] == "gold (oracle upper bound)"


def test_reference_rows_come_first_and_say_what_they_are(demo_user):
    from evaluation.fidelity.service import reference_reports

    dataset = load_dataset(DEMO)
    gold, agentic = _reports(demo_user)
    refs = reference_reports(dataset, "demo", dataset.users["1000"], HashEmbedder(), None,
                             config=FidelityConfig(threshold=0.99), names=("ref:empty", "ref:session-groups"))
    board = board_frame(fidelity_leaderboard([agentic, gold, *refs]))
    assert list(board["kind"]) == ["reference", "reference", "oracle", "method"]
    assert board.iloc[0]["row"].startswith("ref:empty (empty memory)") and board.iloc[1]["situation_within"].startswith("0.000")
    assert board.iloc[0]["text_precision"] == "n/a" and "states nothing" in board.iloc[0]["not measured"]
    compare = fc.compare_frame(agentic, refs, ("situation_within", "text_recall"))
    assert list(compare["memory"])[-1] == "agentic" and compare.iloc[0]["text_recall"] == "0.000"
    assert missing_references([gold, agentic]) == [("1000", "hash", 0.99)] and missing_references([gold, *refs]) == []
    import json

    exported = json.loads(fc.export_json(agentic, refs))
    assert [r["method"] for r in exported["references"]] == ["ref:empty", "ref:session-groups"]
    assert "situation_within" in exported["not_measured"] and exported["report"]["method"] == "agentic"


def test_a_report_stored_under_the_old_definition_reads_and_is_marked_stale(demo_user):
    import json

    gold, _ = _reports(demo_user)
    old = json.loads(gold.model_dump_json())
    for key in ("metric_version", "gold_version", "history_sessions", "threshold_source", "threshold_auc"):
        old.pop(key)
    for row in old["sessions"]:
        for key in [k for k in row if k not in ("sample_id", "position", "split", "requirement_recall", "text_recall")]:
            row.pop(key)
        row["situation_ari"], row["situation_nmi"] = 0.7, 0.89
    from evaluation.fidelity.types import FidelityReport

    report = FidelityReport.model_validate(old)
    assert report.metric_version == "1" and "measure again" in report.stale
    board = board_frame(fidelity_leaderboard([report, gold]))
    assert list(board["stale"]) == ["", report.stale] and board.iloc[1]["text_precision"] == "n/a"
    assert fc.sessions_frame(report)["situation_within"].iloc[0] == "n/a"


def test_a_v2_report_reads_stale_and_is_offered_to_be_measured_again(demo_user):
    """A report stored under fidelity v2 (no match precision, no default matcher, no distinct count) still opens,
    marked stale with its version; its (user, method) is offered to be measured again until a current one exists."""
    import json

    from evaluation.fidelity.types import FidelityReport
    from ui.evaluate.fidelity import stale_measurements

    gold, agentic = _reports(demo_user)
    old = json.loads(agentic.model_dump_json())
    old["metric_version"] = "2"
    for key in ("match_precision", "default_matcher"):
        old.pop(key)
    for row in old["sessions"]:
        row.pop("method_distinct")
    v2 = FidelityReport.model_validate(old)
    assert "fidelity v2" in v2.stale and v2.default_matcher == "embedding"
    assert stale_measurements([gold, v2]) == [("1000", "agentic")]
    assert stale_measurements([gold, v2, agentic]) == []  # measured again: the old one stays, nothing to offer
    frame = board_frame(fidelity_leaderboard([v2, agentic]))
    assert sorted(frame["stale"]) == ["", v2.stale] and {"match precision", "default matcher"} <= set(frame.columns)
