"""Situations per month (§2.5), the experience of each (§2.6) and which become dialogues (§2.7).

Time spans are planned by the pipeline from the run's seed rather than written by the LLM: the spec's
span rules (consecutive, first after the previous month's last end, all ending inside the month, the
last in its final three days) then hold by construction, and the LLM writes what a small model can —
the requirement ids and the situation paragraph for each given span. The rules are still checked on
every stored output, so a person's edit that breaks them is refused.
"""

from __future__ import annotations

import calendar
import random
from datetime import date, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from backends.llm.dynamic import field, list_of, one_of
from palset.assemble import BundleSituation
from synth.config import LAST_MONTH, SynthConfig
from synth.lang import all_requirement_types, answer_budget, dumps, language_name, profile_text
from synth.steps.base import Step, StepContext


class SituationRecord(BaseModel):
    """A situation as stored: its month, span, whole-hour start/end and requirement ids."""

    model_config = ConfigDict(extra="forbid")
    month: str  # "YYYY-MM"
    time_span: str  # "YYYY-MM-DD ~ YYYY-MM-DD"
    start_hour: int = Field(ge=7, le=12)
    end_hour: int = Field(ge=12, le=21)
    requirement_ids: list[str] = Field(min_length=1, max_length=3)
    situation: str = Field(min_length=1)

    @property
    def end_date(self) -> str:
        return self.time_span.split("~")[1].strip()

    def bundle(self) -> BundleSituation:
        return BundleSituation(time_span=self.time_span, start_hour=self.start_hour, end_hour=self.end_hour,
                               requirement_ids=self.requirement_ids, situation=self.situation)


class Situations(BaseModel):
    model_config = ConfigDict(extra="forbid")
    situations: list[SituationRecord]


def plan_spans(year: int, month: int, after: date | None, n: int, rng: random.Random) -> list[tuple[date, date]]:
    """``n`` consecutive spans (≥ 2 days each) from the day after ``after``, the last ending in the month's final 3 days."""
    days = calendar.monthrange(year, month)[1]
    start = after + timedelta(days=1) if after else date(year, month, 1)
    last_end = date(year, month, days - rng.randint(0, 2))
    total = (last_end - start).days + 1
    n = max(1, min(n, total // 2))
    lengths = [2] * n
    for _ in range(total - 2 * n):
        lengths[rng.randrange(n)] += 1
    spans, cursor = [], start
    for length in lengths:
        spans.append((cursor, cursor + timedelta(days=length - 1)))
        cursor += timedelta(days=length)
    return spans


def situations_reply(n: int, ids: list[str], max_topics: int = 3) -> type[BaseModel]:
    item = create_model("SituationReply",
                        requirement_ids=field(list_of(one_of(ids)), Field(min_length=1, max_length=max_topics)),
                        situation=(str, Field(min_length=60, max_length=500)))
    return create_model("MonthSituationsReply", situations=field(list_of(item), Field(min_length=n, max_length=n)))


def check_ids(ids: list[str], known: set[str], where: str) -> str | None:
    if not 1 <= len(ids) <= 3:
        return f"{where}.requirement_ids: give 1–3 requirement ids, found {len(ids)}"
    if len(set(ids)) != len(ids):
        return f"{where}.requirement_ids: ids repeat ({', '.join(ids)}); give distinct ids"
    unknown = [i for i in ids if i not in known]
    if unknown:
        return f"{where}.requirement_ids: '{unknown[0]}' is not one of the user's requirement types"
    return None


def check_situations(sits: list[SituationRecord], config: SynthConfig, known: set[str]) -> list[str]:
    """§2.5's rules on the whole list: spans parse, are consecutive, end inside their month; ids valid."""
    problems: list[str] = []
    months = [f"{y}-{m:02d}" for y, m in config.month_list()]
    previous_end: date | None = None
    for i, s in enumerate(sits):
        where = f"situations[{i}]"
        try:
            start, end = (datetime.strptime(p.strip(), "%Y-%m-%d").date() for p in s.time_span.split("~"))
        except ValueError:
            problems.append(f'{where}.time_span: "{s.time_span}" is not "YYYY-MM-DD ~ YYYY-MM-DD"')
            continue
        if s.month not in months:
            problems.append(f"{where}.month: {s.month} is not a month of the timeline ({months[0]} … {months[-1]})")
        elif end.strftime("%Y-%m") != s.month:
            problems.append(f"{where}.time_span: ends {end}, outside its month {s.month}")
        if start >= end:
            problems.append(f"{where}.time_span: starts on or after its end ({s.time_span})")
        if previous_end is not None and start <= previous_end:
            problems.append(f"{where}.time_span: starts {start}, not after the previous situation's end {previous_end}")
        if problem := check_ids(s.requirement_ids, known, where):
            problems.append(problem)
        previous_end = end
    for month in months:
        n = sum(1 for s in sits if s.month == month)
        if n == 0:
            problems.append(f"situations: month {month} has no situation")
        elif n > config.situations_max:
            problems.append(f"situations: month {month} has {n} situations, at most {config.situations_max}")
    return problems


class SituationsStep(Step):
    name = "situations"
    title = "Situations"
    spec = "§2.5"
    deps = ("profile", "timeline", "requirement_types")
    output_model = Situations
    prompt = "synth/situations"

    def run(self, ctx: StepContext) -> Situations:
        cfg = ctx.config
        types = all_requirement_types(ctx.inputs["requirement_types"].types)
        profile = profile_text(ctx.inputs["profile"].model_dump(by_alias=True, exclude_none=True))
        timeline = ctx.inputs["timeline"].months
        out: list[SituationRecord] = []
        for y, m in cfg.month_list():
            month = f"{y}-{m:02d}"
            rng = ctx.rng(month)
            after = datetime.strptime(out[-1].end_date, "%Y-%m-%d").date() if out else None
            spans = plan_spans(y, m, after, rng.randint(cfg.situations_min, cfg.situations_max), rng)
            previous = {s.time_span: s.situation for s in out if s.month == out[-1].month} if out else {}
            reply_model = situations_reply(len(spans), list(types), cfg.max_topics)

            def check(r: Any) -> str | None:
                for i, item in enumerate(r.situations):
                    if problem := check_ids(item.requirement_ids, set(types), f"situations[{i}]"):
                        return problem
                return None

            reply = ctx.ask(month, self.prompt, {
                "language": language_name(cfg.lang), "profile": profile, "requirement_types": dumps(types),
                "previous": dumps(previous) if previous else "(none: this is the first month)",
                "month": month, "month_events": timeline.get(cfg.month_key(y, m), ""),
                "spans": "\n".join(f"{i}. {a} ~ {b}" for i, (a, b) in enumerate(spans, start=1)),
                "count": len(spans)}, reply_model, check=check, max_tokens=100 + 250 * len(spans))
            for (a, b), item in zip(spans, reply.situations):  # type: ignore[attr-defined]  # reply is the run-time model built by situations_reply
                out.append(SituationRecord(month=month, time_span=f"{a} ~ {b}", start_hour=rng.randint(7, 12),
                                           end_hour=rng.randint(12, 21), requirement_ids=list(item.requirement_ids),
                                           situation=item.situation.strip()))
        return Situations(situations=out)

    def check(self, output: Any, inputs: dict[str, Any], config: SynthConfig) -> list[str]:
        known = set(all_requirement_types(inputs["requirement_types"].types))
        return check_situations(output.situations, config, known)


# ---------------------------------------------------------------- experience


class ExperienceReply(BaseModel):
    experience: str = Field(min_length=100, max_length=800)


class Experiences(BaseModel):
    """Situation end date → the day-by-day account of what happened."""

    model_config = ConfigDict(extra="forbid")
    experiences: dict[str, str]


def span_text(s: SituationRecord) -> str:
    a, b = (p.strip() for p in s.time_span.split("~"))
    return f"{a} {s.start_hour:02d}:00 ~ {b} {s.end_hour:02d}:00"


class ExperienceStep(Step):
    name = "experience"
    title = "Experience"
    spec = "§2.6"
    deps = ("profile", "situations")
    output_model = Experiences
    prompt = "synth/experience"

    def run(self, ctx: StepContext) -> Experiences:
        sits = ctx.inputs["situations"].situations
        profile = profile_text(ctx.inputs["profile"].model_dump(by_alias=True, exclude_none=True))

        def experience(i: int) -> str:
            s, prev = sits[i], sits[i - 1] if i else None
            reply = ctx.ask(s.end_date, self.prompt, {
                "language": language_name(ctx.config.lang), "profile": profile,
                "previous": f"{span_text(prev)}: {prev.situation}" if prev else "(none)",
                "span": span_text(s), "situation": s.situation}, ExperienceReply,
                max_tokens=answer_budget(ExperienceReply, ctx.config.lang, floor=400))
            return reply.experience.strip()

        texts = ctx.fan_out(experience, range(len(sits)))  # each situation's account is independent of the others'
        return Experiences(experiences={s.end_date: text for s, text in zip(sits, texts)})

    def check(self, output: Any, inputs: dict[str, Any], config: SynthConfig) -> list[str]:
        problems = []
        wanted = [s.end_date for s in inputs["situations"].situations]
        if sorted(output.experiences) != sorted(wanted):
            problems.append(f"experiences: need one per situation end date ({', '.join(wanted)})")
        problems += [f"experiences.{k}: at least 100 characters (has {len(v.strip())})"
                     for k, v in output.experiences.items() if len(v.strip()) < 100]
        return problems


# ---------------------------------------------------------------- choosing dialogue situations


class DialogueChoice(BaseModel):
    """End dates of the situations turned into dialogues: history before the last month, query in it."""

    model_config = ConfigDict(extra="forbid")
    history: list[str] = Field(default_factory=list)
    query: list[str] = Field(default_factory=list)


def choose(dates: list[str], rng: random.Random, p: float, max_drops: int) -> DialogueChoice:
    """Drop each situation with probability ``p``, never more than ``max_drops`` in a row; redraw until a query exists."""
    last = f"{LAST_MONTH[0]}-{LAST_MONTH[1]:02d}"
    for _ in range(1000):
        kept, run = [], 0
        for d in dates:
            if run < max_drops and rng.random() < p:
                run += 1
                continue
            run = 0
            kept.append(d)
        choice = DialogueChoice(history=[d for d in kept if not d.startswith(last)],
                                query=[d for d in kept if d.startswith(last)])
        if choice.query:
            return choice
    return DialogueChoice(history=[d for d in dates if not d.startswith(last)], query=[d for d in dates if d.startswith(last)])


class DialogueChoiceStep(Step):
    name = "dialogue_choice"
    title = "Dialogue situations"
    spec = "§2.7"
    deps = ("situations",)
    output_model = DialogueChoice

    def run(self, ctx: StepContext) -> DialogueChoice:
        dates = [s.end_date for s in ctx.inputs["situations"].situations]
        return choose(dates, ctx.rng(), ctx.config.drop_probability, ctx.config.max_drops_in_a_row)

    def check(self, output: Any, inputs: dict[str, Any], config: SynthConfig) -> list[str]:
        dates = [s.end_date for s in inputs["situations"].situations]
        last = f"{LAST_MONTH[0]}-{LAST_MONTH[1]:02d}"
        problems = [f"{split}: {d} is not the end date of a situation"
                    for split in ("history", "query") for d in getattr(output, split) if d not in dates]
        problems += [f"query: {d} is not in the last month ({last})" for d in output.query if not d.startswith(last)]
        problems += [f"history: {d} is in the last month; it belongs to query" for d in output.history if d.startswith(last)]
        if not output.query:
            problems.append("query: at least one situation of the last month must become a query dialogue")
        if set(output.history) & set(output.query):
            problems.append("history and query share a situation")
        return problems
