"""The quality report of one generated user: counts, log-type coverage, repairs, pos/neg balance, retries."""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel, Field

from palset.vocab import LogType, parse_log_type
from synth.store import StepRecord


class QualityReport(BaseModel):
    months: int = 0
    situations: int = 0
    history_sessions: int = 0
    query_sessions: int = 0
    topics: int = 0
    logs: int = 0
    turns: int = 0
    log_types: dict[str, int] = Field(default_factory=dict)  # all 8 types, 0 when absent
    log_type_coverage: float = 0.0  # share of the 8 types present
    fixes: dict[str, int] = Field(default_factory=dict)  # tolerable errors repaired, by kind
    candidates_pos: int = 0
    candidates_neg: int = 0
    dialogue_solutions_pos: int = 0  # solutions given feedback in the dialogues
    dialogue_solutions_neg: int = 0
    retries: dict[str, int] = Field(default_factory=dict)  # validation retries per step
    calls: dict[str, int] = Field(default_factory=dict)

    def lines(self) -> list[str]:
        """Plain-text summary (CLI, page)."""
        covered = sum(1 for n in self.log_types.values() if n)
        return [
            f"{self.months} month(s), {self.situations} situations, {self.history_sessions} history + "
            f"{self.query_sessions} query sessions, {self.topics} topics, {self.logs} logs, {self.turns} turns",
            f"log types: {covered}/8 covered ({', '.join(f'{k} {v}' for k, v in self.log_types.items() if v)})",
            f"pos/neg: candidates {self.candidates_pos}/{self.candidates_neg}, "
            f"dialogue feedback {self.dialogue_solutions_pos}/{self.dialogue_solutions_neg}",
            "repairs: " + (", ".join(f"{k}: {v}" for k, v in self.fixes.items()) or "none"),
            "retries: " + (", ".join(f"{k} {v}" for k, v in self.retries.items() if v) or "none"),
        ]


def build_report(records: dict[str, StepRecord]) -> QualityReport:
    """From whatever steps are finished (a partial run gives a partial report)."""
    r = QualityReport()
    out = {name: rec.output for name, rec in records.items()}
    if tl := out.get("timeline"):
        r.months = len(tl["months"])
    if sits := out.get("situations"):
        r.situations = len(sits["situations"])
    if choice := out.get("dialogue_choice"):
        r.history_sessions, r.query_sessions = len(choice["history"]), len(choice["query"])
    if fw := out.get("requirement_framework"):
        r.topics = sum(len(t) for t in fw["situations"].values())
    counts: Counter[str] = Counter()
    if logs := out.get("logs"):
        for per in logs["situations"].values():
            r.logs += len(per)
            counts.update(_type_name(lg["type"]) for lg in per)
    r.log_types = {t.value: counts.get(t.value, 0) for t in LogType}
    r.log_type_coverage = sum(1 for n in r.log_types.values() if n) / len(LogType)
    if sp := out.get("solution_preference"):
        for per in sp["situations"].values():
            r.candidates_pos += sum(len(t["pos_list"]) for t in per)
            r.candidates_neg += sum(len(t["neg_list"]) for t in per)
    if dl := out.get("dialogues"):
        _dialogue_counts(r, dl)
    for name, rec in records.items():
        r.retries[name] = rec.retries
        r.calls[name] = rec.calls
        for kind, n in rec.fixes.items():
            r.fixes[kind] = r.fixes.get(kind, 0) + n
    return r


def _type_name(label: str) -> str:
    try:
        return parse_log_type(label).value
    except ValueError:
        return LogType.DEVICE_OPERATION.value


def _dialogue_counts(r: QualityReport, dialogues: dict[str, Any]) -> None:
    """Turns, and the liked/disliked solutions the dialogues were told to give feedback on."""
    for turns in dialogues["situations"].values():
        r.turns += len(turns)
    for framework in dialogues.get("frameworks", {}).values():
        for part in framework.values():
            if isinstance(part, dict):
                r.dialogue_solutions_pos += part.get("feedback") == "pos"
                r.dialogue_solutions_neg += part.get("feedback") == "neg"
