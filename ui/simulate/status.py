"""Where a simulation run is, in words a presenter can read aloud: turn n of N, the phase it is in, elapsed time and
an ETA from measured rates, and — once it ended — why it ended.

Everything is read from records: the run (its utterances, schedule, status) and the LLM calls accounted under it
since its last stored utterance (``llm_calls``: role, prompt, when each ended). A call of the side being written
after the first is that side asked again; a call of the user-decision prompt is a judging turn being composed from
the model's decision; the assistant's query-summary call is its memory search. The ETA is the utterances left
times the seconds per utterance this run has measured so far, or, before it has any, the mean of the same prompts'
answered calls in this home (:meth:`backends.store.runstore.RunStore.prompt_means`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from palset.vocab import Act
from sim.types import RunRecord

DECISION_PROMPT = "sim/user_decision"
QUERY_PROMPT = "sim/query_summary"
SIDE_PROMPTS = {"user": "sim/user_simulator", "assistant": "sim/assistant"}
SIDE_ROLE = {"user": "user_simulator", "assistant": "assistant"}


class RunStatus(BaseModel):
    """A run's position and pace as shown above its transcript."""

    model_config = ConfigDict(extra="forbid")
    turn: int  # the turn being written (or the last one, once ended)
    turns: int  # planned (fixed schedule) or allowed (free mode's limit)
    side: str | None = None  # the side being written; None once ended
    phase: str = ""  # drafting the user's turn · asked again (draft 2) · composing … · searching memory · …
    utterances: int = 0
    planned_utterances: int = 0
    elapsed_s: float = 0.0
    eta_s: float | None = None
    rate_s: float | None = None  # seconds per utterance the ETA uses
    rate_from: str = ""  # "this run" or "earlier runs' calls"
    ended: str = ""  # why the run ended ("" while it goes on)

    @property
    def fraction(self) -> float:
        return min(1.0, self.utterances / self.planned_utterances) if self.planned_utterances else 0.0


def planned_turns(record: RunRecord) -> int:
    return len(record.schedule) if record.spec.mode == "fixed" else int(record.spec.max_turns)


def _base(prompt: str | None) -> str:
    """A prompt name without its language suffix (``sim/assistant.zh`` → ``sim/assistant``)."""
    return (prompt or "").split(".")[0]


def phase_of(side: str, act: str, calls_since: Sequence[Mapping[str, object]]) -> str:
    """What the side being written is doing, from the calls accounted since the last stored utterance."""
    mine = [c for c in calls_since if c.get("role") == SIDE_ROLE[side]]
    drafts = [c for c in mine if _base(str(c.get("prompt_name"))) == SIDE_PROMPTS[side]]
    who = "the user's" if side == "user" else "the assistant's"
    if any(_base(str(c.get("prompt_name"))) == DECISION_PROMPT for c in mine):
        return (f"composing {who} {act} from the model's decision: {len(drafts)} draft(s) did not speak as the user"
                " — judging whether the assistant guessed right / the suggestion fits")
    if side == "assistant" and not drafts and any(_base(str(c.get("prompt_name"))) == QUERY_PROMPT for c in mine):
        return f"writing {who} {act}: memory searched, drafting the reply"
    if drafts:
        why = (" — the last draft broke a turn rule (the reasons are stored with the turn)" if side == "user"
               else " — the last reply was not usable")
        return f"asked again: drafting {who} {act}, draft {len(drafts) + 1}{why}"
    return f"drafting {who} {act}" + (" (searching memory first)" if side == "assistant" else "")


def end_reason(record: RunRecord) -> str:
    """Why a run ended, from its record ("" while it goes on)."""
    n_turns = len({u.turn_no for u in record.utterances})
    allowed = planned_turns(record)
    if record.status == "failed":
        return f"failed at turn {n_turns or 1}: {record.error or 'unknown error'} (every saved turn is kept; Resume)"
    if record.status == "stopped":
        return f"stopped by a person after {n_turns} of {allowed} turn(s) (Resume continues it)"
    if record.status != "finished":
        return ""
    if record.spec.mode == "fixed":
        return f"finished: all {allowed} scheduled turn(s) done"
    last = record.utterances[-1] if record.utterances else None
    if n_turns >= allowed:
        return f"finished: reached the free mode's limit of {allowed} turn(s)"
    if last is not None and last.act is Act.FEEDBACK_RESPONSE:
        return (f"finished after {n_turns} of up to {allowed} turn(s): the assistant answered the user's feedback "
                "on its suggestion — free mode's natural end")
    return (f"finished after {n_turns} of up to {allowed} turn(s): the simulated user ended the dialogue (its answer "
            "at that turn said the conversation was over)")


def next_side(record: RunRecord) -> tuple[int, str, str] | None:
    """(turn, side, act name) of the next utterance of a fixed run, or (turn, side, "") in free mode."""
    n = len(record.utterances)
    turn, side = n // 2 + 1, ("user" if n % 2 == 0 else "assistant")
    if turn > planned_turns(record):
        return None
    if record.spec.mode == "fixed":
        user_act, assistant_act = record.schedule[turn - 1]
        return turn, side, (user_act if side == "user" else assistant_act).value
    return turn, side, ""


def run_status(record: RunRecord, calls_since: Sequence[Mapping[str, object]], now: float, started: float,
               prompt_means: Mapping[str, tuple[int, float, float, float]] | None = None) -> RunStatus:
    """The run's status at ``now`` (``started``: when this stretch of work began, e.g. the job's start)."""
    turns = planned_turns(record)
    planned = 2 * turns
    utts = record.utterances
    elapsed = max(0.0, now - started)
    ended = end_reason(record)
    if ended:
        return RunStatus(turn=max((u.turn_no for u in utts), default=0), turns=turns, utterances=len(utts),
                         planned_utterances=len(utts) if record.status == "finished" else planned,
                         elapsed_s=elapsed, ended=ended)
    slot = next_side(record)
    turn, side, act = slot if slot is not None else (turns, None, "")
    phase = phase_of(side, act or "turn", calls_since) if side is not None else "finishing"
    rate, source = _rate(record, started, prompt_means or {})
    left = max(0, planned - len(utts))
    eta = left * rate if rate is not None else None
    return RunStatus(turn=turn, turns=turns, side=side, phase=phase, utterances=len(utts), planned_utterances=planned,
                     elapsed_s=elapsed, eta_s=eta, rate_s=rate, rate_from=source)


def _rate(record: RunRecord, started: float, means: Mapping[str, tuple[int, float, float, float]]
          ) -> tuple[float | None, str]:
    """Seconds per utterance: measured on this run's utterances since ``started``, else the mean
    answered call of the sides' prompts in this home, else unknown."""
    recent = sorted(u.created_at for u in record.utterances if u.created_at >= started)
    if recent:
        return (recent[-1] - started) / len(recent), "this run"
    per_side = [m[3] for name, m in means.items() if _base(name) in SIDE_PROMPTS.values() and m[0]]
    if per_side:
        return sum(per_side) / len(per_side), "earlier runs' calls"
    return None, ""


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


def status_line(status: RunStatus) -> str:
    """One line: turn n of N · phase · elapsed · ETA (plain text; the caller escapes it)."""
    if status.ended:
        return f"{status.ended} · {_clock(status.elapsed_s)}"
    parts = [f"turn {status.turn} of {status.turns}", status.phase, f"{_clock(status.elapsed_s)} elapsed"]
    if status.eta_s is not None:
        parts.append(f"about {_clock(status.eta_s)} left ({_clock(status.rate_s or 0)} per utterance, "
                     f"measured on {status.rate_from})")
    else:
        parts.append("no rate measured yet")
    return " · ".join(parts)
