"""Stored runs read again under the simulator's current rules: which turns would it ask again today, and why.

A run keeps the turns it was recorded with; the rules that make the simulator ask a turn again (the user's turn
rules of :mod:`sim.rulebook`, the assistant's reasons in :func:`sim.assistant.why_asked_again`) change. ``pal runs
check`` lists the turns of stored runs that the rules of this rulebook (:func:`sim.rulebook.rulebook_version`) would
not have kept, each with the rule that fires, so a recording can name the runs to record anew
(``make demo-workspace REDO=…``) instead of someone reading them all.

The same functions as the simulator, on what a record holds: a user turn against the persona rule (its echo
source: the assistant's message before it) and the user's earlier turns; an assistant reply against its earlier
replies and the user's message before it, and against the act's instruction (a reply that is only the instruction);
every user turn against the topic's requirement, implicit needs and solutions (:func:`sim.prompting.hidden_need`).
A user turn composed from the model's decision or falling back to the user query (``fallback``) is not the model's
draft and is not checked. Pure: no model, no store."""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel, ConfigDict

from palset.dataset import User
from sim.acts import act_name, definition
from sim.assistant import why_asked_again, without_copied_note
from sim.persona_check import user_turn_reasons
from sim.prompting import hidden_need
from sim.rulebook import rule_of_reason, rulebook_version
from sim.simulator import user_name
from sim.types import RunRecord


class TurnSlip(BaseModel):
    """One turn of a stored run that the current rules would have asked again."""

    model_config = ConfigDict(extra="forbid")

    turn_no: int
    side: str
    reasons: list[str]
    text: str
    rules: list[str] = []  # the user's turn rules behind ``reasons`` (sim.rulebook); an assistant's reason names none


class RunCheck(BaseModel):
    """A stored run read again: its turns that the current rules would not keep (none: it passes)."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    user_id: str
    method: str
    task_id: str
    turns: int
    slips: list[TurnSlip]
    rulebook: str = ""  # the rulebook it was read under


def check_run(record: RunRecord, user: User) -> RunCheck:
    """The turns of ``record`` (a run of ``user``) that the simulator's current rules would ask again."""
    name = user_name(user)
    session = user.session(record.spec.sample_id)
    topic = next((t for t in session.topics if t.key == record.spec.topic_key), None) if session else None
    hidden = hidden_need(topic, record.spec.free_query) if topic is not None else None
    instruction_language = "zh" if user.language == "zh" else "en"
    earlier: dict[str, list[str]] = {"user": [], "assistant": []}
    said = last_reply = ""
    slips = []
    for u in record.utterances:
        reasons: list[str] = []
        if u.side == "user":
            if not u.fallback:
                reasons += user_turn_reasons(u.content, user.language, [last_reply], name, earlier["user"], hidden)
            said = u.content
        else:
            instruction = f"{act_name(u.act, instruction_language)} " \
                          f"{definition('assistant', u.act, instruction_language)}"
            if without_copied_note(u.content, "", instruction) is None:
                reasons.append("only the act's instruction")
            if why := why_asked_again(u.content, u.act, earlier["assistant"], said):
                reasons.append(why)
            last_reply = u.content
        earlier[u.side].append(u.content)
        if reasons:
            reasons = list(dict.fromkeys(reasons))
            rules = [r for r in dict.fromkeys(rule_of_reason(x) for x in reasons) if r]
            slips.append(TurnSlip(turn_no=u.turn_no, side=u.side, reasons=reasons, text=u.content, rules=rules))
    spec = record.spec
    return RunCheck(run_id=record.run_id, user_id=spec.user_id, method=spec.method,
                    task_id=f"{spec.sample_id}_{spec.topic_key}", turns=len(record.utterances), slips=slips,
                    rulebook=rulebook_version())


def reason_counts(checks: list[RunCheck]) -> Counter[str]:
    """How many turns each reason holds, over ``checks`` (a turn with two reasons counts in both)."""
    return Counter(reason for c in checks for s in c.slips for reason in s.reasons)
