"""Which stance instrument to trust: the rules or a judge model, as measured on the labelled corpora's held-out split
(:mod:`.corpus`), stored in the run store (table ``instrument_scores``, migration 151) so the pages read records and
never measure.

``pal simulate corpus --save`` stores a measurement; :func:`advice` compares the newest one of the configured judge
model with the newest one of the rules under the current rulebook. The judge is offered as the instrument only where
it is at least as accurate in every language, more accurate in one, and reads no more rejections as acceptance; the
rules stay the guard while generating and the offline fallback either way.
"""

from __future__ import annotations

import logging
import sqlite3
import time

from pydantic import BaseModel, ConfigDict, Field

from backends.store.db import Database
from evaluation.simfidelity.corpus import CorpusScore

log = logging.getLogger(__name__)


class InstrumentScores(BaseModel):
    """One instrument's figures on the corpora (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")
    instrument: str  # "rule" or "judge"
    model: str = ""  # the judge model ("" for the rules)
    version: str  # the rulebook fingerprint (rules) or the judge prompt's version
    scores: list[CorpusScore]
    created_at: float = Field(default_factory=time.time)

    @property
    def key(self) -> str:
        return f"{self.instrument}/{self.model}/{self.version}"

    def held_out(self, rule: str = "stance") -> dict[str, CorpusScore]:
        """language → the test split's score of ``rule``."""
        return {s.language: s for s in self.scores if s.split == "test" and s.rule == rule}


class InstrumentStore:
    def __init__(self, db: Database):
        self.db = db

    def save(self, scores: InstrumentScores) -> None:
        with self.db.write() as conn:
            conn.execute("INSERT OR REPLACE INTO instrument_scores VALUES (?, ?, ?, ?, ?, ?)",
                         (scores.key, scores.instrument, scores.model, scores.version, scores.model_dump_json(),
                          scores.created_at))

    def latest(self, instrument: str, model: str = "", version: str | None = None) -> InstrumentScores | None:
        """The newest stored measurement of ``instrument`` (and ``model``, ``version`` where given); None: none, or a
        run store made before migration 151."""
        sql = "SELECT data FROM instrument_scores WHERE instrument=? AND model=?"
        args: list[str] = [instrument, model]
        if version is not None:
            sql, args = sql + " AND version=?", [*args, version]
        try:
            with self.db.read() as conn:
                row = conn.execute(sql + " ORDER BY created_at DESC LIMIT 1", args).fetchone()
        except sqlite3.OperationalError as e:
            if "no such table: instrument_scores" not in str(e):
                raise
            log.info("this run store has no instrument_scores table (made before migration 151)")
            return None
        return InstrumentScores.model_validate_json(row[0]) if row else None


class Advice(BaseModel):
    """What the page says about the stance instrument."""

    model_config = ConfigDict(extra="forbid")
    judge_better: bool
    text: str


def _share(s: CorpusScore) -> float:
    return (s.reject_as_accept or 0) / s.rejections if s.rejections else 0.0


def advice(rules: InstrumentScores | None, judge: InstrumentScores | None) -> Advice | None:
    """Whether the judge beats the rules on the held-out stance corpus (None: one of them was never measured)."""
    if rules is None or judge is None:
        return None
    r, j = rules.held_out(), judge.held_out()
    languages = sorted(set(r) & set(j))
    if not languages:
        return None
    figures = "; ".join(f"{lang}: judge {_pct(j[lang].accuracy)} vs rules {_pct(r[lang].accuracy)}" for lang in languages)
    better = (all((j[lang].accuracy or 0) >= (r[lang].accuracy or 0) for lang in languages)
              and any((j[lang].accuracy or 0) > (r[lang].accuracy or 0) for lang in languages)
              and all(_share(j[lang]) <= _share(r[lang]) for lang in languages))
    if better:
        return Advice(judge_better=True, text=f"The judge {judge.model} reads the held-out stance corpus better than "
                                              f"the rules ({figures}): it is offered as the stance instrument; the "
                                              "rules stay the simulator's guard and the offline fallback.")
    return Advice(judge_better=False, text=f"The rules read the held-out stance corpus at least as well as the judge "
                                           f"{judge.model} ({figures}).")


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f} %"
