"""Every intervention in a simulated user's turns, read from the record: drafts sent back, turns composed from the
model's decision, openings sent as the user query.

A turn recorded with its drafts (``Utterance.drafts_kept``) says all of it. A turn stored before drafts were kept
still says how many calls it took (``attempts``) and, in its ``fallback`` text, whether it was composed and from
which decision; that much is derived here (:func:`decision_of`), and the summary says plainly that the reasons its
drafts were sent back were not kept. The figures that read turns (simulator fidelity, FairEval judgments, exports)
take their intervention counts from :func:`summarise`, so every figure can be shown beside what shaped it.
"""

from __future__ import annotations

import ast
import logging
import re
from collections import Counter
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from palset.vocab import Act
from sim.types import COMPOSED, Draft, TurnDecision, Utterance

log = logging.getLogger(__name__)

Kind = Literal["none", "asked again", "composed", "user query"]
NOT_KEPT = ("recorded before drafts were kept: the attempts and the fallback text are on record, the drafts and the "
            "reasons they were sent back are not")
_REPR = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
_FALLBACK = re.compile(rf"^{re.escape(COMPOSED)} \((?P<field>guessed|accept): (?P<value>yes|no)"
                       rf"(?:; its words (?P<kept>kept|left out): (?P<clause>{_REPR}))?\)")
_ACTS: dict[str, Act] = {"guessed": Act.REQUIREMENT_CONFIRMATION, "accept": Act.SOLUTION_FEEDBACK}


def decision_of(utt: Utterance) -> TurnDecision | None:
    """The structured decision a judging turn was composed from: the one on record, else the one its ``fallback``
    text names (``derived``), else None (the turn's words are a draft: nobody structured them)."""
    if utt.decision is not None:
        return utt.decision
    if not utt.composed:
        return None
    m = _FALLBACK.match(utt.fallback)
    if m is None:
        log.warning("turn %s: a composed turn whose fallback names no decision: %.120s", utt.turn_no, utt.fallback)
        return None
    clause = ""
    if m.group("clause"):
        try:
            clause = str(ast.literal_eval(m.group("clause")))
        except (ValueError, SyntaxError) as e:
            log.warning("turn %s: the clause in the fallback text is not a string literal (%s)", utt.turn_no, e)
    field = "guessed" if m.group("field") == "guessed" else "accept"
    return TurnDecision(act=_ACTS[field], field=field,
                        value=m.group("value") == "yes", clause=clause, clause_kept=m.group("kept") == "kept",
                        derived=True)


def kind_of(utt: Utterance) -> Kind:
    """The strongest intervention in the turn: composed, sent as the user query, asked again, or none."""
    if utt.composed:
        return "composed"
    if utt.fallback:
        return "user query"
    return "asked again" if utt.attempts > 1 else "none"


def first_draft(utt: Utterance) -> str | None:
    """The model's first draft of the turn, where it is known: the first one on record, or the turn's words when it
    was stored before drafts were kept and its first draft was sent as it was; None otherwise (a turn decided at
    once has no draft; a stored turn asked again did not keep its first)."""
    if utt.drafts:
        return utt.drafts[0].text
    if not utt.drafts_kept and utt.attempts == 1 and not utt.fallback:
        return utt.content
    return None


def drafted(utt: Utterance) -> bool:
    """Whether a model drafted the turn (the User-LLM's prompt is on it), so its drafts are worth recording: a
    reference simulator's fixed phrase or a dataset turn replayed has none."""
    return utt.drafts_kept or (utt.prompt_name is not None and not utt.prompt_name.startswith("reference/"))


def simulated_turns(utterances: Iterable[Utterance]) -> list[Utterance]:
    """The user turns a simulator wrote (turns a person typed are left out)."""
    return [u for u in utterances if u.side == "user" and u.actor == "simulator"]


class Interventions(BaseModel):
    """What intervened in a set of simulated user turns (one run, one arm of a judgment, a simulator's runs)."""

    model_config = ConfigDict(extra="forbid")
    user_turns: int = 0
    asked_again: int = 0  # more than one call (a draft sent back, or a decision asked after the drafts)
    composed: int = 0  # composed from the model's decision (the decision is the model's, the words are not)
    user_query: int = 0  # openings sent as the dataset's user query instead of a draft
    intervened: int = 0  # any of the three
    drafted: int = 0  # turns a model drafted (not a reference simulator's phrase nor a dataset turn replayed)
    drafts_kept: int = 0  # turns whose drafts and reasons are on record
    reasons: dict[str, int] = Field(default_factory=dict)  # reason → drafts sent back for it (turns with drafts kept)
    decisions: dict[str, int] = Field(default_factory=dict)  # "accept: yes" … → composed turns

    @property
    def intervention_share(self) -> float | None:
        return self.intervened / self.user_turns if self.user_turns else None

    @property
    def composed_share(self) -> float | None:
        return self.composed / self.user_turns if self.user_turns else None

    @property
    def note(self) -> str:
        """What the record cannot say, in words ("" when every turn kept its drafts)."""
        missing = self.drafted - self.drafts_kept
        return "" if missing <= 0 else f"{missing} of {self.user_turns} turn(s) {NOT_KEPT}"

    def figures(self) -> dict[str, float | int | None]:
        """The counts and shares, flat (exports, the leaderboard, a judgment's arm)."""
        return {"user_turns": self.user_turns, "intervened": self.intervened, "asked_again": self.asked_again,
                "composed": self.composed, "user_query": self.user_query, "drafts_kept": self.drafts_kept,
                "intervention_share": self.intervention_share, "composed_share": self.composed_share}

    def __add__(self, other: Interventions) -> Interventions:
        both = [self, other]
        return Interventions(**{name: sum(getattr(x, name) for x in both)
                                for name in ("user_turns", "asked_again", "composed", "user_query", "intervened",
                                             "drafted", "drafts_kept")},
                             reasons=dict(Counter(self.reasons) + Counter(other.reasons)),
                             decisions=dict(Counter(self.decisions) + Counter(other.decisions)))


def summarise(utterances: Iterable[Utterance]) -> Interventions:
    """The interventions in the simulated user turns among ``utterances``."""
    turns = simulated_turns(utterances)
    kinds = [kind_of(u) for u in turns]
    reasons: Counter[str] = Counter(r for u in turns for d in u.drafts for r in d.reasons)
    decisions: Counter[str] = Counter()
    for u in turns:
        if (d := decision_of(u)) is not None and u.composed:
            decisions[f"{d.field}: {'yes' if d.value else 'no'}"] += 1
    return Interventions(user_turns=len(turns), asked_again=sum(u.attempts > 1 for u in turns),
                         composed=kinds.count("composed"), user_query=kinds.count("user query"),
                         intervened=sum(k != "none" for k in kinds), drafted=sum(drafted(u) for u in turns),
                         drafts_kept=sum(u.drafts_kept for u in turns),
                         reasons=dict(reasons), decisions=dict(decisions))


def drafts_of(sent_back: Iterable[tuple[str, Iterable[str]]], last: str, replaced_why: str = "") -> list[Draft]:
    """The drafts of one turn as the utterance records them: each draft sent back with its reasons, then the last
    one — kept, or, when the turn's words replaced it (``replaced_why``: composed, or the user query sent), with
    that reason. No last draft (``last`` empty: none was usable) adds nothing."""
    drafts = [Draft(text=text, reasons=list(reasons)) for text, reasons in sent_back]
    if last:
        drafts.append(Draft(text=last, reasons=[replaced_why] if replaced_why else [], kept=not replaced_why))
    return drafts
