"""Pure builders behind the fidelity views and the oracle labels: curves skip figures a method cannot have, the
gold memory is the dashed 1.0 line, misses filter by layer, and gold is named an oracle upper bound in every table."""

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
from ui.evaluate.fidelity import board_frame
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
    assert "gold (oracle upper bound)" in names and "text recall" in names
    assert "situation ARI" not in names and "preference precision" not in names
    assert list(fig.data[0].x) == [s.sample_id for s in demo_user.sessions]
    assert "cosine ≥ 0.99" in fig.layout.yaxis.title.text
    bars = fc.layer_counts_figure(gold_stages(demo_user)[-1], {}, "agentic")
    assert [t.name for t in bars.data] == ["gold (oracle upper bound)", "agentic"]
    assert sum(bars.data[0].y) == len(gold_stages(demo_user)[-1]) and sum(bars.data[1].y) == 0
    misses = fc.misses_frame(agentic, ["requirement"])
    assert len(misses) == 14 and set(misses["what"]) == {"not in the memory"}
    assert len(fc.misses_frame(agentic)) == len(agentic.misses)
    frame = fc.sessions_frame(gold)
    assert list(frame["situation_ari"]) == ["1.000"] * 9 and fc.sessions_frame(agentic)["situation_ari"].iloc[0] == "–"
    lines = fc.definitions_markdown(agentic)
    assert any(line.startswith("**preference_precision** not measured") for line in lines)
    assert any("Compared with: every statement" in line for line in lines)


def test_gold_is_an_oracle_upper_bound_wherever_a_method_is_named(demo_user):
    assert "oracle upper bound" in method_label("gold")
    board = board_frame(fidelity_leaderboard(list(_reports(demo_user))))
    assert list(board["method"]) == ["gold (oracle upper bound)", "agentic"]
    assert board.iloc[0]["text_recall"].startswith("1.000")
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
