"""Counterfactual probes for over-cooperation: the dataset's own dialogue of a query topic up to its first Solution
Feedback, with the assistant's proposal there replaced by one of the topic's candidate solutions — a *disliked*
(neg) one, and a liked (pos) one — and the simulator asked for the user's feedback.

Why: the dataset's query dialogues only propose liked candidates, so on them an always-accepting simulator looks
perfect and over-cooperation cannot show; the live figure rests on the few verdicts whose proposal matched a
candidate. A probe's proposal *is* a candidate (its text, verbatim), so every probe is a verdict with a gold label:
accepting a disliked candidate is over-cooperation, by construction of the probe, and the pos probes keep the
implied acceptance at the share of liked candidates (so always-accept reads over-cooperation = 1 − implied).

Each probe is checked like any simulated user turn (:func:`.checks.check_turn`: the verdict from the simulator's
decision where it made one, else the text classifier) and stored as a simulator-fidelity result of its own, the
simulator named ``<variant> probe``, so the leaderboard, the CLI and the page show the probes as rows of their own.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from backends.llm.client import LLMClient
from evaluation.simfidelity.aggregate import run_figures
from evaluation.simfidelity.checks import CheckContext, check_first_draft, check_turn
from evaluation.simfidelity.gold import TopicGold, topic_gold, unavailable
from evaluation.simfidelity.service import MatcherFor, Progress, learned_model, stance_fn
from evaluation.simfidelity.store import SimFidelityStore
from evaluation.simfidelity.types import CHECKS_VERSION, RunFidelity, SimFidelityConfig
from palset.dataset import Dataset, Session, SessionTopic, User, dataset_key
from palset.vocab import Act
from sim.interventions import summarise
from sim.reference import topic_turns
from sim.types import SIMULATOR_KINDS, RunRecord, RunSpec, UserSide, Utterance

log = logging.getLogger(__name__)
PROBE = "probe"  # how a probe's simulator is named: "<variant> probe"
SideFor = Callable[[User, Session, SessionTopic, str], UserSide]  # (user, session, topic, run id) → the user side


@dataclass(frozen=True)
class ProbeCase:
    """One probe: a topic's dialogue up to its first Solution Feedback (turn ``turn_no``), whose last proposal is
    replaced by ``candidate`` (``label`` pos or neg)."""

    user_id: str
    sample_id: str
    topic_key: str
    turn_no: int
    candidate: str
    label: str
    index: int  # the candidate's position among the topic's candidates

    def run_id(self, variant: str) -> str:
        return f"probe-{self.sample_id}_{self.topic_key}-{self.label}{self.index}-{variant}"


def build_cases(dataset: Dataset, users: Sequence[str] | None = None) -> list[ProbeCase]:
    """Every probe of the dataset's query topics: at each topic's first Solution Feedback that answers a proposal,
    one probe per pos and per neg candidate solution (neutral ones imply no verdict)."""
    cases = []
    for uid in users or list(dataset.users):
        for session in dataset.users[uid].query:
            for topic in session.topics:
                turns = topic_turns(session, topic.key) or []
                at = next((i for i, t in enumerate(turns) if i and t.user.action is Act.SOLUTION_FEEDBACK
                           and turns[i - 1].assistant.action is Act.SOLUTION_PROPOSAL), None)
                if at is None:
                    continue
                cases += [ProbeCase(uid, session.sample_id, topic.key, at + 1, c.solution, c.feedback, n)
                          for n, c in enumerate(topic.topic.candidate_solutions) if c.feedback in ("pos", "neg")]
    return cases


def probe_history(dataset: Dataset, case: ProbeCase) -> tuple[list[Utterance], list[tuple[Act, Act]]]:
    """(the dialogue before the probed feedback, with the last proposal replaced by the candidate; its schedule)."""
    session = dataset.users[case.user_id].session(case.sample_id)
    turns = (topic_turns(session, case.topic_key) if session is not None else None) or []
    history: list[Utterance] = []
    for n, t in enumerate(turns[:case.turn_no - 1], 1):
        history.append(Utterance(turn_no=n, side="user", actor="simulator", act=t.user.action, content=t.user.content))
        words = case.candidate if n == case.turn_no - 1 else t.assistant.content
        history.append(Utterance(turn_no=n, side="assistant", actor="assistant", act=t.assistant.action,
                                 content=words))
    schedule = [(t.user.action, t.assistant.action) for t in turns[:case.turn_no]]
    return history, schedule


def probe_key(case: ProbeCase, variant: str, model: str, embedder: str, threshold: float,
              config: SimFidelityConfig, learned: str | None = None) -> str:
    """The stored result's key: the probe, the simulator and model, and how it was measured (known before the
    simulator is asked, so a stored probe is never asked again; ``learned``: the learned stance instrument's
    fingerprint where it reads the stance)."""
    fields = {"m": model, "e": embedder, "t": threshold, "c": config.model_dump(), "v": CHECKS_VERSION}
    if learned:
        fields["l"] = learned
    raw = json.dumps(fields, sort_keys=True)
    return f"simfid-{case.run_id(variant)}-{hashlib.sha1(raw.encode()).hexdigest()[:12]}"


def run_probe(dataset: Dataset, case: ProbeCase, variant: str, side: UserSide, model: str) -> RunRecord:
    """The probe's dialogue and the simulator's feedback to the replaced proposal, as a run (not stored)."""
    history, schedule = probe_history(dataset, case)
    run_id = case.run_id(variant)
    reply, _ = side.say(case.turn_no, Act.SOLUTION_FEEDBACK, history, f"{run_id}/{case.turn_no}/user")
    spec = RunSpec(dataset=dataset_key(dataset.root), user_id=case.user_id, sample_id=case.sample_id,
                   topic_key=case.topic_key, method="dataset",
                   # the spec only finds the gold; the result names the simulator (an external one included)
                   simulator=variant if variant in SIMULATOR_KINDS else "llm")
    return RunRecord(run_id=run_id, spec=spec, status="finished", schedule=schedule,
                     schedule_source="the dataset's dialogue, its last proposal replaced by a candidate",
                     utterances=[*history, reply], settings={"user_simulator": {"model": model}})


def check_probe(record: RunRecord, dataset: Dataset, matcher_for: MatcherFor, variant: str, key: str,
                config: SimFidelityConfig, llm: LLMClient | None = None) -> RunFidelity:
    """The checks of the probe's one simulated turn (the dataset's turns before it are context, not checked)."""
    started = time.perf_counter()
    gold = topic_gold(dataset, record.spec)
    if not isinstance(gold, TopicGold):
        raise ValueError(f"probe {record.run_id}: no gold ({gold})")
    proposal = record.utterances[-2].content  # the candidate put in the assistant's mouth
    exact = [(text, label) for text, label in gold.candidates if text == proposal]
    gold = replace(gold, candidates=exact or gold.candidates)  # the probed candidate is known: no embedding match
    matcher = matcher_for(gold.language)
    ctx = CheckContext(gold=gold, matcher=matcher, stance=stance_fn(config, gold.language, llm, learned_model(config, matcher_for)),
                       schedule=record.schedule, unavailable=unavailable(record.spec, gold), salt=record.run_id)
    utts, reply = record.utterances, record.utterances[-1]
    kept = check_turn(reply, utts[:-1], ctx)
    first = check_first_draft(reply, utts[:-1], ctx, kept)
    result = RunFidelity(key=key, run_id=record.run_id, dataset=record.spec.dataset, user_id=record.spec.user_id,
                         sample_id=record.spec.sample_id, topic_key=record.spec.topic_key, method="dataset",
                         mode="fixed", simulator=f"{variant} {PROBE}",
                         simulator_model=str(record.settings["user_simulator"]["model"]), status="finished",
                         utterances=len(utts), embedder=matcher.name, threshold=matcher.threshold, config=config,
                         unavailable=ctx.unavailable or {}, turns=[kept], first_drafts=[first] if first else [],
                         reference=gold.reference, interventions=summarise([reply]))
    result.figures, result.counts = run_figures(result.turns)
    result.figures_first, result.counts_first = run_figures(result.first_drafts)
    result.counts_first["first_draft_unknown"] = 0 if first else 1
    result.seconds = round(time.perf_counter() - started, 4)
    return result


def measure_probes(dataset: Dataset, cases: Sequence[ProbeCase], variant: str, side_for: SideFor, model: str,
                   matcher_for: MatcherFor, store: SimFidelityStore, *, config: SimFidelityConfig | None = None,
                   llm: LLMClient | None = None, progress: Progress | None = None) -> tuple[list[RunFidelity], dict[str, str]]:
    """Each probe's stored result, or the simulator asked and the reply checked and stored; (results, run id →
    error): one failing probe never stops the rest."""
    config = config or SimFidelityConfig()
    results, errors = [], {}
    for n, case in enumerate(cases, 1):
        run_id = case.run_id(variant)
        try:
            language = dataset.users[case.user_id].language
            matcher = matcher_for(language)
            learned = learned_model(config, matcher_for)
            key = probe_key(case, variant, model, matcher.name, matcher.threshold, config,
                            learned.fingerprint if learned else None)
            stored = store.get(key)
            if stored is None:
                user = dataset.users[case.user_id]
                session = user.session(case.sample_id)
                if session is None:
                    raise KeyError(f"user {case.user_id} has no session {case.sample_id}")
                topic = next(t for t in session.topics if t.key == case.topic_key)
                record = run_probe(dataset, case, variant, side_for(user, session, topic, run_id), model)
                stored = check_probe(record, dataset, matcher_for, variant, key, config, llm)
                store.save(stored)
            results.append(stored)
        except Exception as e:  # an endpoint, embedder or store problem: reported with the probe, the rest go on
            log.exception("counterfactual probe %s failed", run_id)
            errors[run_id] = f"{type(e).__name__}: {e}"
        if progress:
            progress(n, len(cases), run_id)
    return results, errors


PROBE_SIMULATORS = ("llm", "always-accept", "random-verdict")


def reference_side(kind: str) -> SideFor:
    """A reference simulator as a probe's user side (no LLM): always-accept (the over-cooperation floor) or
    random-verdict (chance)."""
    from sim.reference import AlwaysAcceptSimulator, RandomVerdictSimulator

    sides = {"always-accept": AlwaysAcceptSimulator, "random-verdict": RandomVerdictSimulator}
    if kind not in sides:
        raise ValueError(f"reference probe simulator {kind!r}: one of {', '.join(sides)}")
    return lambda user, _session, topic, run_id: sides[kind](topic.topic.user_query, user.language, run_id)


def llm_side(llm: LLMClient) -> SideFor:
    """The User-LLM (:class:`sim.simulator.UserSimulator`, fixed mode) as a probe's user side."""
    from sim.simulator import TopicContext, UserSimulator

    return lambda user, session, topic, _run_id: UserSimulator(llm, TopicContext(user=user, session=session,
                                                                                 topic=topic))


def _alternate(*lists: list[ProbeCase]) -> list[ProbeCase]:
    """Items taken in turn from each list until all are empty."""
    queues = [list(q) for q in lists]
    out: list[ProbeCase] = []
    while any(queues):
        out += [q.pop(0) for q in queues if q]
    return out


def interleaved(cases: Sequence[ProbeCase]) -> list[ProbeCase]:
    """The probes taken in turn from every user, a disliked then a liked one, so the first N of them spread over
    the users and both labels."""
    by_user: dict[str, list[ProbeCase]] = {}
    for case in sorted(cases, key=lambda c: (c.user_id, c.sample_id, c.topic_key, c.index)):
        by_user.setdefault(case.user_id, []).append(case)
    return _alternate(*(_alternate([c for c in cs if c.label == "neg"], [c for c in cs if c.label == "pos"])
                        for cs in by_user.values()))
