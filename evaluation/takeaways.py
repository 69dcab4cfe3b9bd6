"""Plain-language takeaways of the Evaluate page's leaderboards: one headline per method, computed from the stored
report rows (the fidelity board, a FairEval pair's aggregates, the single-turn board, the simulator-fidelity board).

A leaderboard of twenty rows and thirty columns does not say which method is better, by how much, or how sure the
figures are. Each function here reads the rows a board already computes and returns a typed :class:`Takeaway`:
a headline per method naming its main figure with the 95% interval, where it stands against the reference rows
(the weakest reference it is clearly below, else the strongest it is clearly above), the methods and references
whose intervals overlap (they *cannot be told apart*), the reference rows with a one-line meaning each, and, for an
empty board, why it is empty and the command that fills it. "Clearly" means the two 95% intervals do not overlap —
a conservative reading, stated beside the headlines.

The words, the records and the interval arithmetic are in :mod:`evaluation.takeaway_words`. Pure functions: rows
in, records out.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from evaluation.fidelity.references import REFERENCES
from evaluation.takeaway_words import (
    FIDELITY_FIGURES,
    REFERENCE_SIMULATORS,
    Estimate,
    Headline,
    Language,
    ReferenceNote,
    Takeaway,
    estimate_of,
    format_ci,
    format_value,
    join_names,
    method_label,
    number_or_none,
    peers,
    reference_label,
    say,
    standing,
    tie_sentences,
    wilson,
    words,
    words_version,
)

log = logging.getLogger(__name__)


# ---------------------------------------------------------------- memory fidelity


def measurement_key(row: dict) -> tuple[str, float, str]:
    return row["embedder"], row["threshold"], row["metric_version"]


def primary_measurement(rows: Sequence[dict]) -> tuple[str, float, str] | None:
    """The measurement (embedder, τ, definition) the headlines read: current before stale, then the one with the
    most methods, then the higher match precision (the embedder that tells needs apart best)."""
    keys: dict[tuple[str, float, str], list[dict]] = {}
    for r in rows:
        keys.setdefault(measurement_key(r), []).append(r)
    if not keys:
        return None

    def rank(k: tuple[str, float, str]) -> tuple:
        rs = keys[k]
        return (any(r["stale"] for r in rs), -sum(r["kind"] != "reference" for r in rs),
                -max((r.get("match_precision") or -1.0) for r in rs), k[0], k[1])
    return min(keys, key=rank)


def headline_figure(methods: Sequence[dict]) -> str:
    for name in FIDELITY_FIGURES:
        if any(r[name]["value"] is not None for r in methods):
            return name
    return FIDELITY_FIGURES[0]


def same_user_references(reports: Sequence[Any], key: tuple[str, float, str], users: Sequence[str],
                         figure: str) -> dict[str, Estimate]:
    """The reference rows' ``figure`` measured on exactly ``users`` (the same measurement), from the stored reports:
    a method measured on fewer users than the references is compared with them on its own users only."""
    from evaluation.fidelity.board import leaderboard

    wanted = set(users)
    subset = [r for r in reports if r.method in REFERENCES and r.method != "ref:gold" and r.user_id in wanted
              and (r.embedder, r.threshold, r.metric_version) == key]
    return {row["method"]: estimate_of(row[figure]) for row in leaderboard(subset)}


def fidelity_takeaway(rows: Sequence[dict], language: Language = "en", dataset: str = "DATASET",
                      reports: Sequence[Any] = ()) -> Takeaway:
    """Headlines of the memory-fidelity board (rows of :func:`evaluation.fidelity.board.leaderboard`). With the
    stored ``reports`` the rows came from, a method measured on other users than the reference rows is compared with
    the references on its own users (a mean over other users is no comparison)."""
    version = words_version()
    key = primary_measurement(rows)
    if key is None:
        return Takeaway(board="fidelity", language=language, version=version,
                        empty=say("empty_fidelity", language, dataset=dataset))
    group = [r for r in rows if measurement_key(r) == key]
    refs = [r for r in group if r["kind"] == "reference"]
    methods = [r for r in group if r["kind"] == "method"]
    figure = headline_figure(methods)
    ref_est = {r["method"]: estimate_of(r[figure]) for r in refs if r["method"] != "ref:gold"}
    ref_users = {r["method"]: sorted(r["users"]) for r in refs}
    ref_names = {n: reference_label(n, language) for n in ref_est}
    est = {r["method"]: estimate_of(r[figure]) for r in methods}
    users = {r["method"]: sorted(r["users"]) for r in methods}
    labels = {m: method_label(m) for m in est}
    headlines = []
    for m, e in est.items():
        if e.value is None:
            continue
        paired = bool(reports) and any(u != users[m] for u in ref_users.values())
        against = same_user_references(reports, key, users[m], figure) if paired else ref_est
        below, above, apart = standing(e, against)
        text = say("fidelity", language, method=labels[m], value=format_value(figure, e.value),
                   what=say(f"what_{figure}", language), ci=format_ci(figure, e, language))
        if below:
            text += say("below", language, reference=ref_names[below])
        elif apart:
            if above:
                text += say("above", language, reference=ref_names[above])
            text += say("apart_from", language, names=join_names([ref_names[n] for n in apart], language))
        elif above:
            text += say("above", language, reference=ref_names[above])
        if paired and (below or above or apart):
            text += say("paired", language, n=len(users[m]))
        headlines.append(Headline(board="fidelity", subject=m, label=labels[m], figure=figure, estimate=e, text=text,
                                  below=below, above=above, apart_from=apart, peers=peers(m, est),
                                  users=users[m], paired=paired))
    stale = any(r["stale"] for r in group)
    note = say("read_at", language, embedder=key[0], tau=f"{key[1]:g}", stale=say("stale", language) if stale else "")
    notes = [ReferenceNote(name=r["method"], label=reference_label(r["method"], language), meaning=r.get("expect", ""))
             for r in refs]
    return Takeaway(board="fidelity", language=language, version=version, headlines=headlines, note=note,
                    ties=tie_sentences({m: e for m, e in est.items() if e.value is not None}, labels, figure,
                                        language),
                    references=notes)


class FidelityBoard(NamedTuple):
    """The memory-fidelity leaderboard as the Evaluate page shows it: its rows and its takeaway."""

    rows: list[dict]
    takeaway: Takeaway


BOARD_MEMO = 16  # fidelity boards kept per process (datasets × languages × revisions)
_BOARDS: OrderedDict[tuple[str, str, str, int], FidelityBoard] = OrderedDict()
_BOARDS_LOCK = threading.Lock()


def fidelity_board(reports: Sequence[Any], revision: str, language: Language = "en",
                   dataset: str = "DATASET") -> FidelityBoard:
    """The leaderboard of the stored fidelity ``reports`` (:func:`evaluation.fidelity.board.leaderboard`, bootstrap
    CIs over users) and its takeaway (a bootstrap per method measured on other users than the references), computed
    once per process for each ``revision`` of the rows they were read from
    (:meth:`evaluation.fidelity.store.FidelityStore.latest_with_revision`: any report stored, replaced or judged
    changes it), language, dataset argument and version of the words. Pure, and seconds of a busy machine: the
    server computes the demo tour's board before its first view (:mod:`ui.warmup`). Each call gets its own copy
    of the rows."""
    from evaluation.fidelity.board import leaderboard

    key = (revision, language, dataset, words_version())
    with _BOARDS_LOCK:
        board = _BOARDS.get(key)
        if board is not None:
            _BOARDS.move_to_end(key)
    if board is None:
        rows = leaderboard(reports)
        board = FidelityBoard(rows, fidelity_takeaway(rows, language, dataset=dataset, reports=reports))
        with _BOARDS_LOCK:
            _BOARDS[key] = board
            while len(_BOARDS) > BOARD_MEMO:
                _BOARDS.popitem(last=False)
    return FidelityBoard(copy.deepcopy(board.rows), board.takeaway.model_copy(deep=True))


def fidelity_board_known(revision: str, language: Language = "en", dataset: str = "DATASET") -> bool:
    """Whether :func:`fidelity_board` of this revision, language and dataset is computed in this process."""
    with _BOARDS_LOCK:
        return (revision, language, dataset, words_version()) in _BOARDS


# ---------------------------------------------------------------- FairEval (one pair, per aspect)


def faireval_takeaway(rows: Sequence[dict], a: str, b: str, language: Language = "en",
                      dataset: str = "DATASET") -> Takeaway:
    """Headlines of a FairEval pair (rows of :func:`evaluation.aggregate.aggregate_judgments`, A's side): how often
    A wins, ties and loses, and whether the win rate with ties as half is clearly off 50%."""
    version = words_version()
    la, lb = method_label(a), method_label(b)
    if not rows:
        return Takeaway(board="faireval", language=language, version=version,
                        empty=say("empty_faireval", language, dataset=dataset, a=a, b=b))
    headlines = []
    for r in rows:
        aspect = say(f"aspect_{r['aspect']}", language) if f"aspect_{r['aspect']}" in words()["sentences"][language] \
            else r["aspect"]
        if not r.get("n"):
            headlines.append(Headline(board="faireval", subject=f"{a}|{b}|{r['aspect']}", label=la,
                                      figure="win_rate_adjusted", estimate=Estimate(value=None),
                                      text=say("faireval_none", language, a=la, b=lb, aspect=aspect)))
            continue
        low, high = (list(r.get("adjusted_win_rate_ci") or [None, None]) + [None, None])[:2]
        e = Estimate(value=float(r["win_rate_adjusted"] if "win_rate_adjusted" in r else r["adjusted_win_rate"]),
                     low=number_or_none(low), high=number_or_none(high), n=int(r["n"]))
        even = Estimate(value=0.5)
        text = say("faireval", language, a=la, b=lb, aspect=aspect, win=format_value("win_rate", r["win_rate"]),
                   tie=format_value("tie_rate", r["tie_rate"]), lose=format_value("lose_rate", r["lose_rate"]),
                   adjusted=format_value("win_rate_adjusted", e.value), ci=format_ci("win_rate_adjusted", e, language))
        verdict = "faireval_no_ci" if e.low is None or e.high is None else "faireval_better" \
            if even.clearly_below(e) else "faireval_worse" if e.clearly_below(even) else "faireval_apart"
        text += say(verdict, language, a=la, b=lb)
        headlines.append(Headline(board="faireval", subject=f"{a}|{b}|{r['aspect']}", label=la,
                                  figure="win_rate_adjusted", estimate=e, text=text,
                                  apart_from=[b] if verdict in ("faireval_apart", "faireval_no_ci") else []))
    return Takeaway(board="faireval", language=language, version=version, headlines=headlines)


# ---------------------------------------------------------------- single-turn tasks


def single_turn_takeaway(rows: Sequence[dict], language: Language = "en", dataset: str = "DATASET",
                         is_oracle: Callable[[str], bool] | None = None) -> Takeaway:
    """Headlines of the single-turn board (rows of :func:`evaluation.aggregate.leaderboard`): each method's G- and
    S-score with intervals, below the oracle where its G-score interval lies under the oracle's."""
    version = words_version()
    if not rows:
        return Takeaway(board="single_turn", language=language, version=version,
                        empty=say("empty_single_turn", language, dataset=dataset))
    oracle_of = is_oracle or (lambda m: m == "gold")
    oracles = {r["method"]: estimate_of(r["g_score"]) for r in rows if oracle_of(r["method"])}
    est = {r["method"]: estimate_of(r["g_score"]) for r in rows if not oracle_of(r["method"])}
    labels = {m: method_label(m) for m in [*est, *oracles]}
    headlines = []
    for r in rows:
        m = r["method"]
        if m not in est:
            continue
        g, s = est[m], estimate_of(r["s_score"])
        text = say("single_turn", language, method=labels[m], g=format_value("g_score", g.value),
                   gci=format_ci("g_score", g, language), s=format_value("s_score", s.value),
                   sci=format_ci("s_score", s, language))
        below, _, apart = standing(g, oracles)
        if below:
            text += say("single_turn_below", language, oracle=labels[below])
        headlines.append(Headline(board="single_turn", subject=m, label=labels[m], figure="g_score", estimate=g,
                                  text=text, below=below, apart_from=apart, peers=peers(m, est)))
    return Takeaway(board="single_turn", language=language, version=version, headlines=headlines,
                    ties=tie_sentences(est, labels, "g_score", language))


# ---------------------------------------------------------------- simulator fidelity


def is_reference_simulator(name: str) -> bool:
    """A reference simulator's row: replay, the floors, and their counterfactual probes ("always-accept probe")."""
    return name.split(" ", 1)[0] in REFERENCE_SIMULATORS


def simulator_subject(row: dict) -> str:
    return f"{row['simulator']} · {row['simulator_model']}"


def verdict_estimate(row: dict) -> Estimate:
    counts = row.get("counts") or {}
    return wilson(int(counts.get("verdict_pass", 0)), int(counts.get("verdict_n", 0)))


def simulator_takeaway(rows: Sequence[dict], language: Language = "en", dataset: str = "DATASET") -> Takeaway:
    """Headlines of the simulator-fidelity board (rows of :func:`evaluation.simfidelity.aggregate.leaderboard`):
    how often each simulator's verdicts match the hidden preferences (Wilson interval over its checked verdicts),
    its acceptance beside the acceptance gold implies, and the reference simulators it cannot be told apart from."""
    version = words_version()
    if not rows:
        return Takeaway(board="simulator", language=language, version=version,
                        empty=say("empty_simulator", language, dataset=dataset))
    sims = words().get("simulators", {})
    refs = {simulator_subject(r): verdict_estimate(r) for r in rows if is_reference_simulator(r["simulator"])}
    ref_names = {simulator_subject(r): r["simulator"] for r in rows if is_reference_simulator(r["simulator"])}
    est = {simulator_subject(r): verdict_estimate(r) for r in rows if not is_reference_simulator(r["simulator"])}
    headlines = []
    for r in rows:
        subject = simulator_subject(r)
        if subject not in est:
            continue
        e = est[subject]
        if e.value is None:
            text = say("simulator_unchecked", language, simulator=r["simulator"], model=r["simulator_model"])
            headlines.append(Headline(board="simulator", subject=subject, label=subject, figure="verdict_consistency",
                                      estimate=e, text=text))
            continue
        text = say("simulator", language, simulator=r["simulator"], model=r["simulator_model"],
                   verdict=format_value("verdict_consistency", e.value), ci=format_ci("verdict_consistency", e, language),
                   accepted=format_value("acceptance_rate", r.get("acceptance_rate")),
                   implied=format_value("implied_acceptance", r.get("implied_acceptance")))
        _, _, apart = standing(e, refs)
        if apart:
            text += say("simulator_apart", language, names=join_names([ref_names[n] for n in apart], language))
        headlines.append(Headline(board="simulator", subject=subject, label=subject, figure="verdict_consistency",
                                  estimate=e, text=text, apart_from=apart, peers=peers(subject, est)))
    notes = [ReferenceNote(name=simulator_subject(r), label=r["simulator"],
                           meaning=str(sims.get(r["simulator"].split(" ", 1)[0], {}).get(language, "")))
             for r in rows if is_reference_simulator(r["simulator"])]
    return Takeaway(board="simulator", language=language, version=version, headlines=headlines, references=notes,
                    ties=tie_sentences(est, {n: n for n in est}, "verdict_consistency", language))
