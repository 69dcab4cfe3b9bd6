"""Interaction logs per situation (§2.11): ≥ 15 device logs of the 8 types inside the situation's span.

Timestamp errors are the spec's tolerable error: an answer whose times fall outside the span or are
not increasing is asked again ``tolerable_retries`` times, then accepted and repaired — a time that
is unreadable or outside the span is re-drawn between its neighbours (the spec drops such logs; we
keep them, so a small model's answer still yields a usable session), then the logs are sorted. Both
repairs are counted for the quality report.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from backends.llm.dynamic import field, list_of, one_of
from palset.vocab import parse_log_type
from synth.config import SynthConfig
from synth.lang import language_name, log_type_labels, profile_text
from synth.steps.base import Step, StepContext
from synth.steps.situations import SituationRecord, span_text

MINUTE = "%Y-%m-%d %H:%M"


class LogRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")
    timestamp: str
    event: str = ""
    type: str
    content: str = Field(min_length=1)


class Logs(BaseModel):
    """Situation end date → its logs, in time order."""

    model_config = ConfigDict(extra="forbid")
    situations: dict[str, list[LogRecord]]


def logs_reply(lang: str, low: int, high: int) -> type[BaseModel]:
    item = create_model("LogReply", timestamp=(str, Field(min_length=16, max_length=16)),
                        event=(str, Field(min_length=5, max_length=80)), type=field(one_of(log_type_labels(lang))),
                        content=(str, Field(min_length=10, max_length=160)))
    return create_model("SituationLogsReply", logs=field(list_of(item), Field(min_length=low, max_length=high)))


def span_bounds(s: SituationRecord) -> tuple[datetime, datetime]:
    a, b = (p.strip() for p in s.time_span.split("~"))
    return (datetime.strptime(a, "%Y-%m-%d") + timedelta(hours=s.start_hour),
            datetime.strptime(b, "%Y-%m-%d") + timedelta(hours=s.end_hour))


def _parse(stamp: str) -> datetime | None:
    try:
        return datetime.strptime(stamp.strip(), MINUTE)
    except ValueError:
        return None


def time_problem(stamps: list[str], start: datetime, end: datetime) -> str | None:
    """The first timestamp rule broken: readable, inside the span, strictly increasing."""
    previous = None
    for j, stamp in enumerate(stamps):
        t = _parse(stamp)
        if t is None:
            return f'logs[{j}].timestamp: "{stamp}" is not "YYYY-MM-DD HH:MM"'
        if not start <= t <= end:
            return (f"logs[{j}].timestamp: {stamp} is outside the situation "
                    f"({start:%Y-%m-%d %H:%M} ~ {end:%Y-%m-%d %H:%M})")
        if previous is not None and t <= previous:
            return f"logs[{j}].timestamp: {stamp} is not after the previous log ({previous:%Y-%m-%d %H:%M})"
        previous = t
    return None


def repair_times(stamps: list[str], start: datetime, end: datetime, rng: random.Random) -> tuple[list[datetime], int, int]:
    """Times for every log (bad ones re-drawn between their neighbours), and (re-drawn, out of order) counts."""
    parsed = [t if (t := _parse(s)) is not None and start <= t <= end else None for s in stamps]
    redrawn = sum(1 for t in parsed if t is None)
    times: list[datetime] = []
    for j, t in enumerate(parsed):
        if t is None:
            low = times[-1] if times else start
            high = next((x for x in parsed[j + 1:] if x is not None), end)
            high = max(high, low)
            t = low + timedelta(minutes=rng.randint(0, max(0, int((high - low).total_seconds() // 60))))
        times.append(t.replace(second=0, microsecond=0))
    disorder = sum(1 for a, b in zip(times, times[1:]) if b <= a)
    return times, redrawn, disorder


class LogsStep(Step):
    name = "logs"
    title = "Logs"
    spec = "§2.11"
    deps = ("profile", "situations", "experience")
    output_model = Logs
    prompt = "synth/logs"

    def run(self, ctx: StepContext) -> Logs:
        cfg = ctx.config
        profile = profile_text(ctx.inputs["profile"].model_dump(by_alias=True, exclude_none=True))
        reply_model = logs_reply(cfg.lang, cfg.min_logs, cfg.max_logs)

        def situation_logs(s: SituationRecord) -> list[LogRecord]:
            start, end = span_bounds(s)
            rejected = [0]

            def check(r: Any) -> str | None:
                problem = time_problem([lg.timestamp for lg in r.logs], start, end)
                if problem and rejected[0] < cfg.tolerable_retries:
                    rejected[0] += 1
                    return problem
                return None  # tolerated: repaired below

            reply = ctx.ask(s.end_date, self.prompt, {
                "language": language_name(cfg.lang), "profile": profile, "span": span_text(s),
                "experience": ctx.inputs["experience"].experiences.get(s.end_date, s.situation),
                "types": ", ".join(log_type_labels(cfg.lang)), "min_logs": cfg.min_logs, "max_logs": cfg.max_logs},
                reply_model, check=check, max_tokens=100 + 120 * cfg.max_logs)
            return self._repaired(ctx, reply.logs, start, end, s.end_date)  # type: ignore[attr-defined]  # reply is the run-time model built by logs_reply

        sits = ctx.inputs["situations"].situations
        return Logs(situations={s.end_date: logs for s, logs in zip(sits, ctx.fan_out(situation_logs, sits))})

    def _repaired(self, ctx: StepContext, logs: list[Any], start: datetime, end: datetime, unit: str) -> list[LogRecord]:
        times, redrawn, disorder = repair_times([lg.timestamp for lg in logs], start, end, ctx.rng(unit))
        ctx.fix("log timestamps re-drawn inside the span", redrawn)
        ctx.fix("logs put back in time order", disorder)
        order = sorted(range(len(logs)), key=lambda j: times[j])
        out, previous = [], None
        for j in order:
            t = times[j] if previous is None or times[j] > previous else previous + timedelta(minutes=1)
            previous = t
            out.append(LogRecord(timestamp=t.strftime(MINUTE), event=logs[j].event.strip(), type=logs[j].type,
                                 content=logs[j].content.strip()))
        return out

    def check(self, output: Any, inputs: dict[str, Any], config: SynthConfig) -> list[str]:
        problems = []
        for s in inputs["situations"].situations:
            logs = output.situations.get(s.end_date)
            where = f"situations.{s.end_date}"
            if logs is None:
                problems.append(f"{where}: no logs for this situation")
                continue
            if len(logs) < config.min_logs:
                problems.append(f"{where}: at least {config.min_logs} logs, found {len(logs)}")
            for j, lg in enumerate(logs):
                try:
                    parse_log_type(lg.type)
                except ValueError as e:
                    problems.append(f"{where}[{j}].type: {e}")
            start, end = span_bounds(s)
            if problem := time_problem([lg.timestamp for lg in logs], start, end):
                problems.append(f"{where}: {problem}")
        return problems
