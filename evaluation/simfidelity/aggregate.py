"""A run's figures from its turn checks, and the simulator-fidelity leaderboard: one row per simulator (variant and
model) over its checked runs, with the distribution distances between its user turns and the dataset's own.

Rates pool the turns of every run of the row (a rate's ``n`` is its denominator). Over-cooperation is the
acceptance rate minus the rate the gold preferences imply, both over the verdicts whose proposal matched a pos or
neg candidate. Distribution distances compare every simulated user turn of the row with the dataset's own user
turns of the same topics (each topic once): length (tokens) by the two-sample Kolmogorov–Smirnov test (distance
= its D), questions per turn by the Mann–Whitney U test (distance = the difference of the means), first-person
rate by Fisher's exact test (distance = the difference of the rates); each with its p-value. A run without gold
counts in ``no_gold`` and in no figure.

Every figure is reported three ways: on what was kept (the turns as sent), on the model's first drafts (the same
checks on each turn's first draft, where it is known — a rule that sent a draft back while generating is then not
counted as the model's success) and beside the interventions (drafts asked again, turns composed from the
decision, openings sent as the user query) of the same turns.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from evaluation.simfidelity.registry import CHECK_SPECS, RATES
from evaluation.simfidelity.types import RunFidelity, TurnChecks
from sim.interventions import Interventions

VERDICT_FIGURES = ("acceptance_rate", "implied_acceptance", "over_cooperation", "disliked_acceptance")
# the verdict figures, then each registered check's pass rate in registry order, then the vagueness gap
HEADLINE = (*VERDICT_FIGURES, *(s.figure for s in CHECK_SPECS), "vagueness_gap")
VIEWS = ("kept", "first drafts")  # the figures on what was sent, and on the model's first drafts (where known)
DISTANCES = ("length", "questions", "first_person")


def _rate(hits: int, n: int) -> float | None:
    return hits / n if n else None


def turn_tallies(turns: Sequence[TurnChecks]) -> dict[str, int]:
    """Counts behind every figure (pass and applicable per check; accepted / implied over matched verdicts)."""
    t: dict[str, int] = defaultdict(int)
    for turn in turns:
        for c in turn.checks:
            if c.outcome != "n/a":
                t[f"{c.check}_n"] += 1
                t[f"{c.check}_pass"] += c.outcome == "pass"
            if c.check == "verdict":
                t["verdicts"] += 1
                t["verdict_no_candidate"] += bool(c.evidence.get("no_candidate"))
                if "expected" in c.evidence and c.evidence.get("stance", {}).get("label") != "invalid":
                    t["verdict_matched"] += 1
                    t["accepted"] += c.evidence["stance"]["label"] == "accept"
                    t["implied"] += c.evidence["expected"] == "accept"
                    t["disliked"] += c.evidence["expected"] == "reject"
                    t["accepted_disliked"] += (c.evidence["expected"] == "reject"
                                               and c.evidence["stance"]["label"] == "accept")
    return dict(t)


def figures_from(t: dict[str, int], gaps: Sequence[float]) -> dict[str, float | None]:
    out: dict[str, float | None] = {name: _rate(t.get(f"{check}_pass", 0), t.get(f"{check}_n", 0))
                                    for name, check in RATES.items()}
    out["acceptance_rate"] = _rate(t.get("accepted", 0), t.get("verdict_matched", 0))
    out["implied_acceptance"] = _rate(t.get("implied", 0), t.get("verdict_matched", 0))
    a, i = out["acceptance_rate"], out["implied_acceptance"]
    out["over_cooperation"] = None if a is None or i is None else a - i
    out["disliked_acceptance"] = _rate(t.get("accepted_disliked", 0), t.get("disliked", 0))
    out["vagueness_gap"] = float(np.mean(gaps)) if gaps else None
    return out


def gaps_of(turns: Sequence[TurnChecks]) -> list[float]:
    return [c.evidence["gap"] for t in turns for c in t.checks if c.check == "vague" and c.outcome != "n/a"]


def run_figures(turns: Sequence[TurnChecks]) -> tuple[dict[str, float | None], dict[str, int]]:
    """(figures, counts) of one run."""
    t = turn_tallies(turns)
    return figures_from(t, gaps_of(turns)), t


def distances(simulated: Sequence[dict[str, float]], reference: Sequence[dict[str, float]]) -> dict[str, dict]:
    """Per feature: the simulated and reference means, the distance and the two-sample test's p-value (None with
    fewer than two turns on a side)."""
    from scipy import stats

    out: dict[str, dict] = {}
    for name in DISTANCES:
        a = np.array([f[name] for f in simulated], dtype=float)
        b = np.array([f[name] for f in reference], dtype=float)
        row: dict = {"simulated": float(a.mean()) if a.size else None, "reference": float(b.mean()) if b.size else None,
                     "n_simulated": int(a.size), "n_reference": int(b.size), "distance": None, "p": None}
        if a.size >= 2 and b.size >= 2:
            if name == "length":
                res = stats.ks_2samp(a, b)
                row.update(distance=float(res.statistic), p=float(res.pvalue), test="Kolmogorov–Smirnov")
            elif name == "questions":
                same = np.all(a == a[0]) and np.all(b == a[0])
                p = 1.0 if same else float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)
                row.update(distance=float(a.mean() - b.mean()), p=p, test="Mann–Whitney U")
            else:
                table = [[int(a.sum()), int(a.size - a.sum())], [int(b.sum()), int(b.size - b.sum())]]
                row.update(distance=float(a.mean() - b.mean()), p=float(stats.fisher_exact(table).pvalue),
                           test="Fisher's exact")
        out[name] = row
    return out


def interventions_of(results: Sequence[RunFidelity]) -> dict:
    """The interventions in the runs' simulated user turns, summed: counts, shares, what the record cannot say, and
    how many results were made before interventions were measured (checks v6)."""
    summed = Interventions()
    for r in results:
        if r.interventions is not None:
            summed = summed + r.interventions
    unmeasured = sum(r.interventions is None for r in results)
    note = summed.note + (f"{'; ' if summed.note else ''}{unmeasured} result(s) checked before interventions were "
                          "measured (check again)" if unmeasured else "")
    return {**summed.figures(), "reasons": summed.reasons, "decisions": summed.decisions, "note": note,
            "unmeasured": unmeasured}


def first_draft_figures(results: Sequence[RunFidelity]) -> dict:
    """The row's figures on the model's first drafts: pooled like the kept ones, over the turns whose first draft
    is known (``unknown``: the others)."""
    turns = [t for r in results for t in r.first_drafts]
    tallies = turn_tallies(turns)
    unknown = sum(r.counts_first.get("first_draft_unknown", len(r.turns)) for r in results)
    note = (f"{unknown} turn(s) whose first draft is not known are left out: turns stored before drafts were kept "
            "and asked again, so these figures cover the turns whose first draft was sent as it was — a selection "
            "that reads high; runs recorded now keep every draft") if unknown else ""
    return {**figures_from(tallies, gaps_of(turns)), "counts": tallies, "turns": len(turns), "unknown": unknown,
            "note": note}


def leaderboard(results: Sequence[RunFidelity]) -> list[dict]:
    """One row per (simulator variant, simulator model): pooled figures, their counts, the distribution distances,
    runs checked, runs passing every check and runs without gold; reference simulators first."""
    groups: dict[tuple[str, str], list[RunFidelity]] = defaultdict(list)
    for r in results:
        groups[(r.simulator, r.simulator_model)].append(r)
    rows = []
    for (variant, model), rs in groups.items():
        gold = [r for r in rs if r.no_gold is None]
        turns = [t for r in gold for t in r.turns]
        tallies = turn_tallies(turns)
        reference: dict[tuple[str, str], list[dict[str, float]]] = {(r.sample_id, r.topic_key): r.reference for r in gold}
        row = {"simulator": variant, "simulator_model": model, "runs": len(rs), "no_gold": len(rs) - len(gold),
               "passed": sum(r.passed is True for r in gold), "users": sorted({r.user_id for r in gold}),
               "methods": sorted({r.method for r in gold}), "turns": len(turns),
               **figures_from(tallies, gaps_of(turns)), "counts": tallies,
               "distances": distances([t.features for t in turns], [f for fs in reference.values() for f in fs]),
               "seconds_per_run": float(np.mean([r.seconds for r in rs])) if rs else None,
               "first_drafts": first_draft_figures(gold), "interventions": interventions_of(gold),
               "checks_versions": sorted({r.checks_version for r in rs})}
        rows.append(row)
    order = {"replay": 0, "always-accept": 1, "random-verdict": 2}
    return sorted(rows, key=lambda r: (order.get(r["simulator"], 3), r["simulator"], r["simulator_model"]))
