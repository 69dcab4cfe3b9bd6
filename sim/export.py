"""A simulation run as a file: JSON (the stored record, complete) or Markdown (a transcript a person reads).

Pure functions of a :class:`~sim.types.RunRecord`, shared by the Simulate page and the CLI.
"""

from __future__ import annotations

import time

from sim.interventions import NOT_KEPT, decision_of, kind_of, summarise
from sim.types import RunRecord, Utterance

SPEAKERS = {"simulator": "User (simulator)", "assistant": "Assistant", "human": "Person"}


def run_to_json(record: RunRecord) -> str:
    """The record exactly as stored: spec, status, schedule, settings and every utterance with its trace."""
    return record.model_dump_json(indent=1)


def speaker(side: str, actor: str) -> str:
    """Who spoke, in words: a person is named with the side they took over."""
    return f"Person (as {side})" if actor == "human" else SPEAKERS[actor]


def run_to_markdown(record: RunRecord) -> str:
    """A readable transcript: what was simulated, with which settings, then each utterance with its act."""
    lines = [f"# Simulation {record.run_id}", "", *_header(record), "", "## Transcript", ""]
    if not record.utterances:
        lines += ["(no utterance yet)", ""]
    for utt in record.utterances:
        lines += _utterance(utt)
    return "\n".join(lines).rstrip() + "\n"


def _header(record: RunRecord) -> list[str]:
    spec = record.spec
    mode = f"fixed ({record.schedule_source})" if spec.mode == "fixed" else f"free (at most {spec.max_turns} turns)"
    lines = [f"- User: {spec.user_id}",
             f"- Session and topic: {spec.sample_id} · {spec.topic_key}",
             f"- Memory method: {spec.method}",
             f"- Schedule: {mode}",
             f"- Seed: {spec.seed}",
             f"- Status: {record.status}" + (f" ({record.error})" if record.error else "")]
    if spec.simulator_variant != "llm":
        lines.append(f"- Simulated user: {spec.simulator_variant}")
    if spec.free_query:
        lines.append(f"- Opening question (typed): {spec.free_query}")
    if record.pair_id:
        lines.append(f"- Compared in pair: {record.pair_id}")
    for role, s in record.settings.items():
        lines.append(f"- {role}: {s.get('provider', '?')} · {s.get('model', '?')} · temperature {s.get('temperature', '?')}")
    if (i := summarise(record.utterances)).user_turns:
        lines.append(f"- Interventions: {i.intervened} of {i.user_turns} simulated user turn(s) intervened in "
                     f"({i.asked_again} asked again, {i.composed} composed from the decision, {i.user_query} sent as "
                     "the user query)" + (f"; {i.note}" if i.note else ""))
    if record.created_at:
        lines.append(f"- Created: {time.strftime('%Y-%m-%d %H:%M', time.localtime(record.created_at))}")
    return lines


def _utterance(utt: Utterance) -> list[str]:
    lines = [f"**Turn {utt.turn_no} · {speaker(utt.side, utt.actor)} · {utt.act.value}**", ""]
    lines += [f"> {line}" if line else ">" for line in utt.content.splitlines()] or [">"]
    notes = []
    if utt.retrieval_query:
        notes.append(f"retrieval query: {utt.retrieval_query}")
    if utt.trace:
        notes.append(f"memory context {utt.trace.get('tokens', 0):,} tokens of {utt.trace.get('full_history_tokens', 0):,} "
                     f"in the full history, {len(utt.trace.get('items', []))} item(s) retrieved")
    if notes:
        lines += ["", "_" + "; ".join(notes) + "_"]
    return [*lines, *_interventions(utt), ""]


def _interventions(utt: Utterance) -> list[str]:
    """What intervened in a simulated user turn: why its words are not a draft, its decision, each draft sent back
    with the reasons, or — for a turn stored before drafts were kept — that they were not kept."""
    if utt.side != "user" or utt.actor != "simulator" or kind_of(utt) == "none":
        return []
    lines = ["", f"_Intervention: {kind_of(utt)} ({utt.attempts} call(s))_"]
    if utt.fallback:
        lines.append(f"_Not the model's draft: {utt.fallback}_")
    if (decision := decision_of(utt)) is not None:
        lines.append(f"_Decision: {decision.field} = {'yes' if decision.value else 'no'} (stance {decision.stance}"
                     + ("; read back from the fallback text" if decision.derived else "") + ")_")
    for n, draft in enumerate(utt.drafts, 1):
        why = "kept" if draft.kept else "sent back: " + ("; ".join(draft.reasons) or "no reason recorded")
        lines.append(f"- draft {n} ({why}): {draft.text}")
    if not utt.drafts_kept:
        lines.append(f"_Drafts: {NOT_KEPT}._")
    return lines
