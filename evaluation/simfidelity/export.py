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
