"""The simulator-fidelity leaderboard and the checker-agreement rows as flat rows and CSV (the Evaluate and Review
pages' downloads and ``pal simulate fidelity --format csv``)."""

from __future__ import annotations

from backends.csvsafe import rows_to_csv
from evaluation.simfidelity.types import CHECKS_VERSION

BOARD_COLUMNS = ("acceptance_rate", "implied_acceptance", "over_cooperation", "verdict_consistency", "truthful_rate",
                 "vagueness_gap", "vague_rate", "persona_rate", "schedule_adherence")


def board_rows(board: list[dict]) -> list[dict]:
    """The leaderboard flat: one row per simulator, each distance with its p-value."""
    rows = []
    for r in board:
        row = {"simulator": r["simulator"], "model": r["simulator_model"], "runs": r["runs"], "passed": r["passed"],
               "no_gold": r["no_gold"], "turns": r["turns"], **{k: r[k] for k in BOARD_COLUMNS}}
        for name, d in r["distances"].items():
            row[f"{name}_distance"], row[f"{name}_p"] = d["distance"], d["p"]
            row[f"{name}_simulated"], row[f"{name}_reference"] = d["simulated"], d["reference"]
        row["seconds_per_run"] = r["seconds_per_run"]
        rows.append(row)
    return rows


def board_csv(board: list[dict]) -> str:
    """The leaderboard as CSV (formula-like cells neutralised), with its checks' version on every row."""
    rows = [{**r, "checks_version": CHECKS_VERSION} for r in board_rows(board)]
    return rows_to_csv(rows) if rows else "simulator,model,runs\n"


def checker_csv(report: dict) -> str:
    """A ``simturn`` batch's automatic checks against people, one row per item and question."""
    return rows_to_csv(report["items"]) if report["items"] else "item_no,item_key,question,automatic,human_majority\n"


def _fmt(value: float | None) -> str:
    return "     –" if value is None else f"{value:6.3f}"


def board_text(board: list[dict]) -> str:
    """The leaderboard as a plain-text table (``pal simulate fidelity``, the bench)."""
    heads = ("accept", "implied", "overcoop", "verdict", "truthful", "vaguegap", "vague", "persona", "schedule")
    lines = [f"{'simulator':<18} {'model':<28} {'runs':>4} " + " ".join(f"{h:>8}" for h in heads) + "  length D (p)"]
    for r in board:
        d = r["distances"]["length"]
        ks = "–" if d["distance"] is None else f"{d['distance']:.3f} ({d['p']:.3g})"
        lines.append(f"{r['simulator']:<18} {r['simulator_model'][:28]:<28} {r['runs']:>4} "
                     + " ".join(f"{_fmt(r[k]):>8}" for k in BOARD_COLUMNS) + f"  {ks}")
        if r["no_gold"]:
            lines.append(f"{'':<18} {r['no_gold']} run(s): n/a — no gold")
    lines.append("rates over checked user turns; over-cooperation = acceptance − implied; --json for every turn's "
                 "evidence")
    return "\n".join(lines)
