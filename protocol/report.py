"""The paper's tables for one experiment, from exactly the records its units produced.

Single-turn (per method): restatement BLEU-1…4 and G-score, proposal BLEU-1…4, S-score — each with its
bootstrap CI (:func:`evaluation.aggregate.leaderboard`) and, next to it, how many predictions were invalid and how
many planned items are missing (dropped: a unit that failed or has not run). FairEval (per method against the
baseline and aspect): win/tie/lose, the adjusted win rate with its CI (:func:`evaluation.aggregate.aggregate_judgments`),
invalid judge samples and dropped topics. Rendered as Markdown, CSV or LaTeX.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel

from backends.csvsafe import rows_to_csv_lines
from evaluation.aggregate import aggregate_judgments, leaderboard
from evaluation.faireval import Judgment
from evaluation.simfidelity.aggregate import leaderboard as simulator_board
from evaluation.simfidelity.store import SimFidelityStore
from evaluation.store import EvalStore
from evaluation.tasks import TaskResult
from jobs.types import Unit
from protocol.config import ExperimentConfig

Format = str  # markdown | csv | latex
FORMATS = ("markdown", "csv", "latex")
SINGLE_COLS = [("R-B1", "restatement_bleu1"), ("R-B2", "restatement_bleu2"), ("R-B3", "restatement_bleu3"),
               ("R-B4", "restatement_bleu4"), ("G", "g_score"), ("P-B1", "proposal_bleu1"), ("P-B2", "proposal_bleu2"),
               ("P-B3", "proposal_bleu3"), ("P-B4", "proposal_bleu4"), ("S", "s_score")]


class Report(BaseModel):
    name: str
    baseline: str
    single: list[dict]
    faireval: list[dict]
    units: dict[str, int]
    simulators: list[dict] = []  # the simulator-fidelity leaderboard of the experiment's runs (its checked ones)


def experiment_records(units: Iterable[Unit], evals: EvalStore) -> tuple[list[TaskResult], list[Judgment], dict]:
    """The task results and judgments the experiment's finished units stored, and what is missing per method."""
    results: list[TaskResult] = []
    judgments: list[Judgment] = []
    dropped: dict[tuple[str, str], int] = {}
    for u in units:
        if u.kind == "eval.tasks":
            method = u.payload["method"]
            if u.status != "done" or not u.result:
                for task in u.payload["tasks"]:
                    dropped[(method, task)] = dropped.get((method, task), 0) + 1
                continue
            results += [r for k in u.result["results"] if (r := evals.get_result(k)) is not None]
        elif u.kind == "eval.judge":
            method = u.label.split(" ")[1]
            if u.status != "done" or not u.result:
                dropped[(method, u.payload["aspect"])] = dropped.get((method, u.payload["aspect"]), 0) + 1
                continue
            judgments.append(evals.load_judgment(u.result["judgment_key"]))
    return results, judgments, dropped


def simulator_rows(units: Iterable[Unit], store: SimFidelityStore) -> list[dict]:
    """The simulator-fidelity leaderboard over the results the experiment's ``sim.fidelity`` units stored."""
    found = [r for u in units if u.kind == "sim.fidelity" and u.status == "done" and u.result
             if (r := store.get(u.result["key"])) is not None]
    return simulator_board(found)


def build_report(exp: ExperimentConfig, units: list[Unit], evals: EvalStore,
                 simfidelity: SimFidelityStore | None = None) -> Report:
    results, judgments, dropped = experiment_records(units, evals)
    single = leaderboard(results, seed=exp.bootstrap_seed)
    for row in single:
        m = row["method"]
        row["g_invalid"] = sum(1 for r in results if r.method == m and r.task == "restatement" and r.g_ok is False)
        for task in ("restatement", "proposal", "selection"):
            row[f"{task}_dropped"] = dropped.get((m, task), 0)
    order = {m: i for i, m in enumerate(exp.all_methods)}
    single.sort(key=lambda r: order.get(r["method"], 99))
    fair = aggregate_judgments(judgments, exp.threshold, seed=exp.bootstrap_seed)
    for row in fair:
        row["invalid_judgments"] = row["invalid"]
        row["dropped"] = dropped.get((row["method_a"], row["aspect"]), 0)
    counts: dict[str, int] = {}
    for u in units:
        counts[u.status] = counts.get(u.status, 0) + 1
    sims = simulator_rows(units, simfidelity) if simfidelity is not None else []
    return Report(name=exp.name, baseline=exp.baseline, single=single, faireval=fair, units=counts, simulators=sims)


def _cell(metric: dict) -> str:
    lo, hi = metric["ci"]
    return f"{metric['value']:.1f} [{lo:.1f}, {hi:.1f}]" if metric["n"] else "–"


def single_rows(report: Report) -> tuple[list[str], list[list[str]]]:
    head = ["method", *(name for name, _ in SINGLE_COLS), "invalid (R/G/P/S)", "dropped (R/P/S)"]
    rows = []
    for r in report.single:
        inv = f"{r['restatement_invalid']}/{r['g_invalid']}/{r['proposal_invalid']}/{r['selection_invalid']}"
        drop = f"{r['restatement_dropped']}/{r['proposal_dropped']}/{r['selection_dropped']}"
        rows.append([r["method"], *(_cell(r[key]) for _, key in SINGLE_COLS), inv, drop])
    return head, rows


def fair_rows(report: Report) -> tuple[list[str], list[list[str]]]:
    head = ["method", "vs", "aspect", "win", "tie", "lose", "adjusted win rate [95% CI]", "invalid judgments",
            "invalid samples", "dropped", "position consistency", "position-decided"]
    rows = []
    for r in report.faireval:
        lo, hi = r["adjusted_win_rate_ci"]
        rate = f"{r['adjusted_win_rate']:.3f} [{lo:.3f}, {hi:.3f}]" if r["n"] else "–"
        decided = f"{r['position_decided']}/{r['decided']}" if "decided" in r else "–"  # faireval_summary v2
        rows.append([r["method_a"], r["method_b"], r["aspect"], str(r["win"]), str(r["tie"]), str(r["lose"]), rate,
                     str(r["invalid_judgments"]), f"{r['invalid_samples']}/{r['samples']}", str(r["dropped"]),
                     _share(r.get("position_consistency")), decided])
    return head, rows


def _share(value: float | None, signed: bool = False) -> str:
    return "–" if value is None else (f"{value:+.3f}" if signed else f"{value:.3f}")


def simulator_table(report: Report) -> tuple[list[str], list[list[str]]]:
    head = ["simulator", "model", "runs", "acceptance", "implied", "over-cooperation", "verdict consistency",
            "truthful", "vagueness gap", "persona", "schedule", "length KS D (p)", "no gold"]
    rows = []
    for r in report.simulators:
        length = r["distances"]["length"]
        ks = "–" if length["distance"] is None else f"{length['distance']:.3f} ({length['p']:.3g})"
        rows.append([r["simulator"], r["simulator_model"], str(r["runs"]), _share(r["acceptance_rate"]),
                     _share(r["implied_acceptance"]), _share(r["over_cooperation"], True),
                     _share(r["verdict_consistency"]), _share(r["truthful_rate"]), _share(r["vagueness_gap"], True),
                     _share(r["persona_rate"]), _share(r["schedule_adherence"]), ks, str(r["no_gold"])])
    return head, rows


def render(report: Report, fmt: Format = "markdown") -> str:
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r} ({', '.join(FORMATS)})")
    tables = [("Single-turn tasks (BLEU ×100, G-score 0–100, S-score −100–100; 95% bootstrap CIs over topics)",
               *single_rows(report)),
              (f"FairEval against {report.baseline} (k samples per order, both orders)", *fair_rows(report))]
    if report.simulators:
        tables.append(("Simulator fidelity (rates over checked user turns; FIDELITY.md, Simulator fidelity)",
                       *simulator_table(report)))
    if fmt == "csv":  # every cell neutralised: a method or topic name like =HYPERLINK(…) stays text in a spreadsheet
        return rows_to_csv_lines([line for title, head, rows in tables for line in ([title], head, *rows)])
    if fmt == "latex":
        return "\n\n".join(_latex(title, head, rows) for title, head, rows in tables) + "\n"
    out = [f"# Experiment {report.name}", "",
           "Units: " + ", ".join(f"{n} {s}" for s, n in sorted(report.units.items()))]
    for title, head, rows in tables:
        out += ["", f"## {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(out) + "\n"


def _latex(title: str, head: list[str], rows: list[list[str]]) -> str:
    def esc(text: str) -> str:
        for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"), ("#", r"\#"),
                     ("–", "--"), ("−", "-"), ("×", r"$\times$")):
            text = text.replace(a, b)
        return text

    lines = [r"\begin{table}[t]", r"\centering", rf"\caption{{{esc(title)}}}", r"\begin{tabular}{l" + "r" * (len(head) - 1) + "}",
             r"\toprule", " & ".join(esc(h) for h in head) + r" \\", r"\midrule"]
    lines += [" & ".join(esc(c) for c in row) + r" \\" for row in rows]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines)
