"""The dialogue framework of each kept situation: requirements (§2.8), 8 candidate solutions (§2.9)
and the user's 2 liked / 2 disliked solutions among them (§2.10)."""

from __future__ import annotations

import random
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from palset.models import FeedbackReason, ImplicitNeed
from synth.config import SynthConfig
from synth.lang import dumps, language_name, profile_text
from synth.steps.base import ROLE, Step, StepContext, StepFailed, Tolerable, first_problem
from synth.steps.persona import _repeated

SOLUTION_IDS = tuple(f"S{i}" for i in range(1, 9))


def kept_dates(inputs: dict[str, Any]) -> list[str]:
    choice = inputs["dialogue_choice"]
    return sorted([*choice.history, *choice.query])


def situation_by_date(inputs: dict[str, Any]) -> dict[str, Any]:
    return {s.end_date: s for s in inputs["situations"].situations}


# ---------------------------------------------------------------- requirements


class NeedReply(BaseModel):
    need: str = Field(min_length=5, max_length=100)
    evidences: list[Annotated[str, Field(min_length=5, max_length=120)]] = Field(min_length=1, max_length=5)


class TopicReply(BaseModel):
    user_query: str = Field(min_length=5, max_length=120)
    implicit_needs: list[NeedReply] = Field(min_length=2, max_length=2)
    requirement: str = Field(min_length=20, max_length=250)


class FrameworkTopic(BaseModel):
    """One topic of ``requirement_framework.json`` plus the requirement id it serves."""

    model_config = ConfigDict(extra="forbid")
    requirement_id: str
    requirement_type: str = Field(min_length=1)
    user_query: str = Field(min_length=1)
    implicit_needs: list[ImplicitNeed] = Field(min_length=1)
    requirement: str = Field(min_length=1)


class Framework(BaseModel):
    model_config = ConfigDict(extra="forbid")
    situations: dict[str, list[FrameworkTopic]]


def framework_reply(n: int) -> type[BaseModel]:
    return create_model("FrameworkReply", topics=(list[TopicReply], Field(min_length=n, max_length=n)))


def check_topic(t: Any, where: str) -> str | None:
    if any(not e.strip() for n in t.implicit_needs for e in n.evidences):
        return f"{where}.implicit_needs: an evidence is empty"
    if any(not 1 <= len(n.evidences) <= 5 for n in t.implicit_needs):
        return f"{where}.implicit_needs: each need has 1–5 evidences"
    if len(t.implicit_needs) == 2 and t.implicit_needs[0].need.strip() == t.implicit_needs[1].need.strip():
        return Tolerable(f"{where}.implicit_needs: the two needs are the same; give two different needs",
                         "two implicit needs alike")
    return None


class RequirementFrameworkStep(Step):
    name = "requirement_framework"
    title = "Requirement framework"
    spec = "§2.8"
    deps = ("profile", "requirement_types", "situations", "experience", "dialogue_choice")
    output_model = Framework
    prompt = "synth/requirement_framework"

    def run(self, ctx: StepContext) -> Framework:
        types = {rid: p for per in ctx.inputs["requirement_types"].types.values() for rid, p in per.items()}
        sits = situation_by_date(ctx.inputs)
        profile = profile_text(ctx.inputs["profile"].model_dump(by_alias=True, exclude_none=True))

        def check(r: Any) -> str | None:
            return first_problem([check_topic(t, f"topic-{k}") for k, t in enumerate(r.topics, start=1)])

        def topics(end: str) -> list[FrameworkTopic]:
            s = sits[end]
            phrases = [types[r] for r in s.requirement_ids]
            reply = ctx.ask(end, self.prompt, {
                "language": language_name(ctx.config.lang), "profile": profile, "situation": s.situation,
                "experience": ctx.inputs["experience"].experiences.get(end, ""),
                "topics": "\n".join(f"topic-{k}: {p}" for k, p in enumerate(phrases, start=1)),
                "count": len(phrases)}, framework_reply(len(phrases)), check=check,
                max_tokens=100 + 600 * len(phrases))
            return [FrameworkTopic(requirement_id=rid, requirement_type=types[rid], user_query=t.user_query.strip(),
                                   implicit_needs=[ImplicitNeed(need=n.need.strip(), evidences=[e.strip() for e in n.evidences])
                                                   for n in t.implicit_needs], requirement=t.requirement.strip())
                    for rid, t in zip(s.requirement_ids, reply.topics)]  # type: ignore[attr-defined]  # reply is a run-time model with these fields

        ends = kept_dates(ctx.inputs)
        return Framework(situations=dict(zip(ends, ctx.fan_out(topics, ends))))

    def check(self, output: Any, inputs: dict[str, Any], config: SynthConfig) -> list[str]:
        types = {rid: p for per in inputs["requirement_types"].types.values() for rid, p in per.items()}
        sits = situation_by_date(inputs)
        problems = []
        if sorted(output.situations) != kept_dates(inputs):
            problems.append(f"situations: need one entry per dialogue situation ({', '.join(kept_dates(inputs))})")
        for end, topics in output.situations.items():
            ids = [t.requirement_id for t in topics]
            if end in sits and ids != sits[end].requirement_ids:
                problems.append(f"situations.{end}: topics must follow the situation's requirement ids "
                                f"{', '.join(sits[end].requirement_ids)}")
            for k, t in enumerate(topics, start=1):
                if t.requirement_type != types.get(t.requirement_id):
                    problems.append(f"situations.{end}[{k - 1}].requirement_type: must copy "
                                    f"\"{types.get(t.requirement_id, '?')}\" exactly")
                if problem := check_topic(t, f"situations.{end}[{k - 1}]"):
                    problems.append(problem)
        return problems


# ---------------------------------------------------------------- candidate solutions


class CandidateSolutions(BaseModel):
    """End date → per topic, the 8 one-sentence candidate solutions (written without user information)."""

    model_config = ConfigDict(extra="forbid")
    situations: dict[str, list[list[str]]]


CHOSEN = 4  # candidates a topic's solution preference picks: 2 liked and 2 disliked, all different


class CandidateTopicReply(BaseModel):
    solutions: list[Annotated[str, Field(min_length=10, max_length=150)]] = Field(min_length=8, max_length=8)


def _key(solution: str) -> str:
    return solution.strip().lower()


def distinct_solutions(solutions: list[str]) -> list[str]:
    """The solutions in order, each text once (compared as :func:`check_candidates` compares them)."""
    seen: dict[str, str] = {}
    for s in solutions:
        seen.setdefault(_key(s), s.strip())
    return list(seen.values())


def check_candidates(solutions: list[str], where: str) -> str | None:
    if len(solutions) != 8:
        return f"{where}: exactly 8 candidate solutions, found {len(solutions)}"
    if any(not s.strip() for s in solutions):
        return f"{where}: a candidate solution is empty"
    distinct = len(distinct_solutions(solutions))
    if distinct < CHOSEN:  # a repeat is tolerable only while the liked and disliked can still differ
        return (f"{where}: only {distinct} different candidate solutions; the 2 liked and 2 disliked ones must be "
                f"{CHOSEN} different candidates, so write 8 different solutions")
    return _repeated(solutions, f"{where}: solution")


def check_answered(solutions: list[str], where: str) -> str | None:
    """:func:`check_candidates` while the answer is still being asked for: too few different solutions is
    tolerable there too, because the missing ones are asked for afterwards (:func:`top_up`)."""
    problem = check_candidates(solutions, where)
    well_formed = len(solutions) == 8 and all(s.strip() for s in solutions)  # then the only hard fault is too few
    if problem and not isinstance(problem, Tolerable) and well_formed:
        return Tolerable(problem, "repeated solution")
    return problem


class MoreCandidatesReply(BaseModel):
    solutions: list[Annotated[str, Field(min_length=10, max_length=150)]] = Field(min_length=1, max_length=8)


TOP_UP_ROUNDS = 2  # fresh asks for the missing candidates of one topic before the step gives up on it


def top_up(ctx: StepContext, unit: str, topic: FrameworkTopic, solutions: list[str]) -> list[str]:
    """A topic's 8 candidates with its repeats replaced: each round asks, in a fresh conversation that lists the
    different ones kept, for as many more as are missing, and keeps the new texts; a repeat is kept only where no
    round brought a new one. Each round is counted in the quality report. Raises :class:`StepFailed` naming the
    synthesizer model when fewer than 4 different candidates remain (2 liked and 2 disliked could not differ)."""
    kept = distinct_solutions(solutions)
    for rnd in range(1, TOP_UP_ROUNDS + 1):
        missing = 8 - len(kept)
        if missing <= 0:
            break
        reply = ctx.ask(f"{unit}.more{rnd}", "synth/candidate_solutions_more",
                        {"language": language_name(ctx.config.lang),
                         "requirement": dumps({"user_query": topic.user_query, "requirement": topic.requirement,
                                               "implicit_needs": [n.need for n in topic.implicit_needs]}),
                         "written": "\n".join(f"{i}. {s}" for i, s in enumerate(kept, start=1)), "count": missing},
                        MoreCandidatesReply, max_tokens=100 + 120 * missing, retries=1)
        new = distinct_solutions(kept + reply.solutions)[len(kept):][:missing]
        ctx.fix("asked for the missing candidates again")
        kept += new
    if len(kept) < CHOSEN:
        model = ctx.llm.config.role(ROLE).model if ctx.llm is not None else "?"
        raise StepFailed(f"candidate_solutions {unit}: the synthesizer model ({model}) wrote only {len(kept)} different "
                         f"candidate solutions after {TOP_UP_ROUNDS} more ask(s); {CHOSEN} are needed. A larger "
                         "synthesizer writes them: `make model-1.5b`, then PAL_SYNTHESIZER_MODEL=qwen2.5-coder-1.5b "
                         "(or another synthesizer endpoint in Settings), and resume. Or ask afresh from the "
                         "requirements this topic copies: re-run from requirement_framework (the Generate page, or "
                         "`pal generate --out DIR --resume --rerun-from requirement_framework`)")
    return (kept + [s.strip() for s in solutions])[:8]  # still short: the answer's own repeats, as tolerated


class CandidateSolutionsStep(Step):
    name = "candidate_solutions"
    title = "Candidate solutions"
    spec = "§2.9"
    deps = ("requirement_framework",)
    output_model = CandidateSolutions
    prompt = "synth/candidate_solutions"

    def run(self, ctx: StepContext) -> CandidateSolutions:

        def check(r: Any) -> str | None:
            return first_problem([check_answered([s.strip() for s in t.solutions], f"topic-{k}")
                                  for k, t in enumerate(r.topics, start=1)])

        def candidates(job: tuple[str, list[FrameworkTopic]]) -> list[list[str]]:
            end, topics = job
            parts = {f"topic-{k}": {"user_query": t.user_query, "implicit_needs": [n.model_dump() for n in t.implicit_needs],
                                    "requirement": t.requirement} for k, t in enumerate(topics, start=1)}
            reply_model = create_model("CandidatesReply", topics=(list[CandidateTopicReply],
                                                                  Field(min_length=len(topics), max_length=len(topics))))
            reply = ctx.ask(end, self.prompt, {"language": language_name(ctx.config.lang), "requirements": dumps(parts),
                                               "count": len(topics)}, reply_model, check=check,
                            max_tokens=100 + 500 * len(topics))
            got = [[s.strip() for s in t.solutions] for t in reply.topics]  # type: ignore[attr-defined]  # reply is a run-time model with these fields
            return [sols if len(distinct_solutions(sols)) == 8 else top_up(ctx, f"{end}.topic{k}", topic, sols)
                    for k, (topic, sols) in enumerate(zip(topics, got), start=1)]

        jobs = list(ctx.inputs["requirement_framework"].situations.items())
        return CandidateSolutions(situations={end: got for (end, _), got in zip(jobs, ctx.fan_out(candidates, jobs))})

    def check(self, output: Any, inputs: dict[str, Any], config: SynthConfig) -> list[str]:
        framework = inputs["requirement_framework"].situations
        problems = []
        for end, topics in framework.items():
            got = output.situations.get(end)
            if got is None or len(got) != len(topics):
                problems.append(f"situations.{end}: one list of 8 per topic ({len(topics)} topic(s))")
                continue
            problems += [p for k, sols in enumerate(got) if (p := check_candidates(sols, f"situations.{end}[{k}]"))]
        return problems


# ---------------------------------------------------------------- solution preference


class ChoiceReply(BaseModel):
    candidate: Literal[SOLUTION_IDS]  # type: ignore[valid-type]  # the candidate ids are a run-time tuple
    feedback_reason: str = Field(min_length=5, max_length=120)


class SolutionPreferenceReply(BaseModel):
    analysis: str = Field(min_length=20, max_length=250)
    pos_list: list[ChoiceReply] = Field(min_length=2, max_length=2)
    neg_list: list[ChoiceReply] = Field(min_length=2, max_length=2)


class TopicPreference(BaseModel):
    model_config = ConfigDict(extra="forbid")
    analysis: str = ""
    pos_list: list[FeedbackReason] = Field(min_length=2, max_length=2)
    neg_list: list[FeedbackReason] = Field(min_length=2, max_length=2)


class SolutionPreferences(BaseModel):
    model_config = ConfigDict(extra="forbid")
    situations: dict[str, list[TopicPreference]]


def check_choice(pos: list[str], neg: list[str], candidates: list[str], where: str) -> str | None:
    """2 liked + 2 disliked, all different, each a verbatim candidate."""
    if len(pos) != 2 or len(neg) != 2:
        return f"{where}: exactly 2 liked (pos_list) and 2 disliked (neg_list) solutions, found {len(pos)} and {len(neg)}"
    if len(set(pos + neg)) != 4:
        return f"{where}: a solution is chosen twice; the 2 liked and 2 disliked must be 4 different candidates"
    missing = [s for s in pos + neg if s not in candidates]
    if missing:
        return f"{where}: \"{missing[0][:60]}\" is not one of the candidate solutions (copy them verbatim)"
    return None


def distinct_choices(ids: list[str], cands: list[str], rng: random.Random) -> list[str]:
    """``ids`` with each repeat (same id, or same candidate text) replaced by a random unused candidate."""
    used_text: set[str] = set()
    out = []
    for sid in ids:
        text = cands[SOLUTION_IDS.index(sid)].strip().lower()
        if text in used_text:
            free = [x for x, c in zip(SOLUTION_IDS, cands) if c.strip().lower() not in used_text | {text}]
            if free:
                sid = rng.choice(free)
                text = cands[SOLUTION_IDS.index(sid)].strip().lower()
        used_text.add(text)
        out.append(sid)
    return out


class SolutionPreferenceStep(Step):
    name = "solution_preference"
    title = "Solution preference"
    spec = "§2.10"
    deps = ("profile", "situations", "preferences", "requirement_framework", "candidate_solutions")
    output_model = SolutionPreferences
    prompt = "synth/solution_preference"

    def run(self, ctx: StepContext) -> SolutionPreferences:
        profile = ctx.inputs["profile"]
        prefs = {rid: e for per in ctx.inputs["preferences"].preferences.values() for rid, e in per.items()}
        sits = situation_by_date(ctx.inputs)

        def preference(job: tuple[str, int, FrameworkTopic, list[str]]) -> TopicPreference:
            end, k, t, cands = job
            pref = prefs.get(t.requirement_id)
            rejected = [0]

            def check(r: SolutionPreferenceReply) -> str | None:
                """A candidate chosen twice is asked again ``tolerable_retries`` times, then repaired below."""
                ids = [c.candidate for c in r.pos_list + r.neg_list]
                if len(set(ids)) != len(ids) and rejected[0] < ctx.config.tolerable_retries:
                    rejected[0] += 1
                    return "a candidate is chosen twice; pos_list and neg_list must name 4 different candidates"
                return None

            reply = ctx.ask(f"{end}/topic-{k}", self.prompt, {
                "language": language_name(ctx.config.lang),
                "profile": profile_text(profile.model_dump(by_alias=True, exclude_none=True), with_personality=True),
                "situation": sits[end].situation,
                "requirement": dumps({"user_query": t.user_query, "requirement": t.requirement,
                                      "implicit_needs": [n.need for n in t.implicit_needs]}),
                "pos": pref.pos if pref else "", "neg": pref.neg if pref else "",
                "candidates": "\n".join(f"{sid}: {c}" for sid, c in zip(SOLUTION_IDS, cands))},
                SolutionPreferenceReply, check=check, max_tokens=600)

            chosen = distinct_choices([c.candidate for c in reply.pos_list + reply.neg_list], cands,
                                      ctx.rng(f"{end}/topic-{k}"))
            ctx.fix("candidates chosen twice replaced by an unused one",
                    sum(a != b for a, b in zip(chosen, [c.candidate for c in reply.pos_list + reply.neg_list])))
            reasons = [c.feedback_reason.strip() for c in reply.pos_list + reply.neg_list]
            picked = [FeedbackReason(solution=cands[SOLUTION_IDS.index(sid)], feedback_reason=why)
                      for sid, why in zip(chosen, reasons)]
            return TopicPreference(analysis=reply.analysis.strip(), pos_list=picked[:2], neg_list=picked[2:])

        jobs = [(end, k, t, cands) for end, topics in ctx.inputs["requirement_framework"].situations.items()
                for k, (t, cands) in enumerate(zip(topics, ctx.inputs["candidate_solutions"].situations[end]), start=1)]
        out: dict[str, list[TopicPreference]] = {end: [] for end in ctx.inputs["requirement_framework"].situations}
        for (end, *_), got in zip(jobs, ctx.fan_out(preference, jobs)):  # every topic of every situation at once
            out[end].append(got)
        return SolutionPreferences(situations=out)

    def check(self, output: Any, inputs: dict[str, Any], config: SynthConfig) -> list[str]:
        cands = inputs["candidate_solutions"].situations
        problems = []
        for end, topics in inputs["requirement_framework"].situations.items():
            got = output.situations.get(end)
            if got is None or len(got) != len(topics):
                problems.append(f"situations.{end}: one preference per topic ({len(topics)} topic(s))")
                continue
            for k, tp in enumerate(got):
                where = f"situations.{end}[{k}]"
                if p := check_choice([x.solution for x in tp.pos_list], [x.solution for x in tp.neg_list],
                                     cands.get(end, [[]] * len(topics))[k], where):
                    problems.append(p)
        return problems
