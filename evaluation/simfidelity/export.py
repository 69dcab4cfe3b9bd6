"""The simulator-fidelity leaderboard and the checker-agreement rows as flat rows and CSV (the Evaluate and Review
pages' downloads and ``pal simulate fidelity --format csv``)."""

from __future__ import annotations

from backends.csvsafe import rows_to_csv
from evaluation.simfidelity.aggregate import HEADLINE, VIEWS
from evaluation.simfidelity.registry import RATES
from evaluation.simfidelity.types import CHECKS_VERSION

BOARD_COLUMNS = HEADLINE  # the verdict figures, every registered check's rate (registry order), the vagueness gap
# the plain-text table's short heads: the verdict figures' here, each check's its name
SHORT_HEADS = {"acceptance_rate": "accept", "implied_acceptance": "implied", "over_cooperation": "overcoop",
               "disliked_acceptance": "dislikeA", "vagueness_gap": "vaguegap", **RATES}
INTERVENTION_COLUMNS = ("intervention_share", "composed_share", "user_turns", "intervened", "composed", "drafts_kept")


def figures_on(row: dict, on: str) -> dict:
    """A leaderboard row's figures ``on`` "kept" (the turns as sent) or "first drafts"."""
    return row if on == "kept" else row["first_drafts"]


def board_rows(board: list[dict]) -> list[dict]:
    """The leaderboard flat: two rows per simulator (its figures on what was kept and on the model's first drafts),
    each with the interventions of its turns and each distance with its p-value."""
    rows = []
    for r in board:
        for on in VIEWS:
            figures = figures_on(r, on)
            row = {"simulator": r["simulator"], "model": r["simulator_model"], "on": on, "runs": r["runs"],
                   "passed": r["passed"], "no_gold": r["no_gold"], "turns": figures["turns"],
                   **{k: figures.get(k) for k in BOARD_COLUMNS},
                   **{k: r["interventions"][k] for k in INTERVENTION_COLUMNS},
                   "first_draft_unknown": r["first_drafts"]["unknown"]}
            for name, d in r["distances"].items():
                row[f"{name}_distance"], row[f"{name}_p"] = d["distance"], d["p"]
                row[f"{name}_simulated"], row[f"{name}_reference"] = d["simulated"], d["reference"]
            row["seconds_per_run"] = r["seconds_per_run"]
            row["interventions_note"] = r["interventions"]["note"]
            row["first_drafts_note"] = r["first_drafts"]["note"]
            rows.append(row)
    return rows


def board_csv(board: list[dict]) -> str:
    """The leaderboard as CSV (formula-like cells neutralised), with its checks' version on every row."""
    rows = [{**r, "checks_version": CHECKS_VERSION} for r in board_rows(board)]
    return rows_to_csv(rows) if rows else "simulator,model,on,runs\n"


def checker_csv(report: dict) -> str:
    """A ``simturn`` batch's automatic checks against people, one row per item and question."""
    return rows_to_csv(report["items"]) if report["items"] else "item_no,item_key,question,automatic,human_majority\n"


def _fmt(value: float | int | None) -> str:
    return "     –" if value is None else f"{value:6.3f}"


def board_text(board: list[dict]) -> str:
    """The leaderboard as a plain-text table (``pal simulate fidelity``, the bench): per simulator its figures on
    what was kept and on the first drafts, with the share of turns intervened in and composed."""
    heads = [SHORT_HEADS[k][:8] for k in BOARD_COLUMNS]
    lines = [f"{'simulator':<18} {'model':<28} {'on':<6} {'runs':>4} {'turns':>5} "
             + " ".join(f"{h:>8}" for h in heads) + f" {'interv':>7} {'composed':>8}  length D (p)"]
    for r in board:
        d = r["distances"]["length"]
        ks = "–" if d["distance"] is None else f"{d['distance']:.3f} ({d['p']:.3g})"
        i = r["interventions"]
        for on in VIEWS:
            figures = figures_on(r, on)
            lines.append(f"{r['simulator']:<18} {r['simulator_model'][:28]:<28} {on.split()[0]:<6} {r['runs']:>4} "
                         f"{figures['turns']:>5} " + " ".join(f"{_fmt(figures.get(k)):>8}" for k in BOARD_COLUMNS)
                         + f" {_fmt(i['intervention_share']):>7} {_fmt(i['composed_share']):>8}  "
                         + (ks if on == "kept" else ""))
        if r["first_drafts"]["note"]:
            lines.append(f"{'':<18} first drafts: {r['first_drafts']['note']}")
        if i["note"]:
            lines.append(f"{'':<18} {i['note']}")
        if r["no_gold"]:
            lines.append(f"{'':<18} {r['no_gold']} run(s): n/a — no gold")
    lines.append("rates over checked user turns; kept: the turns as sent, first: the model's first drafts; "
                 "over-cooperation = acceptance − implied; dislikeA: share of disliked candidates accepted; interv/composed: share of turns intervened in / composed "
                 "from the decision; --json for every turn's evidence")
    return "\n".join(lines)
