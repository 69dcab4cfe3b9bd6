"""Check simulation runs: every simulated user turn against the dataset's gold, stored per run and measurement.

The embedder comes in through a :class:`.match.Matcher` per language and the judge (when the configuration uses
one) as an LLM client: the composition root owns both. A run is checked as stored (finished or not); its result
is keyed by what was measured — the run and how many utterances it had, the embedder and τ, the configuration
and the checks' version — so a stored result is reused until the run grows or a setting changes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence

from backends.embeddings import Embedder
from backends.llm.client import LLMClient
from evaluation.simfidelity.aggregate import run_figures
from evaluation.simfidelity.checks import CheckContext, check_first_draft, check_turn
from evaluation.simfidelity.corpus import load_corpus
from evaluation.simfidelity.gold import TopicGold, topic_gold, unavailable
from evaluation.simfidelity.judges import judge_persona, judge_stance
from evaluation.simfidelity.learned import LearnedStance, answering_of, cascade_label, load_spec, train
from evaluation.simfidelity.match import Matcher
from evaluation.simfidelity.store import SimFidelityStore
from evaluation.simfidelity.types import CHECKS_VERSION, NO_GOLD, RunFidelity, SimFidelityConfig
from palset.dataset import Dataset
from sim.interventions import summarise
from sim.rulebook import guard_rules, rulebook_version
from sim.stance import classify_stance
from sim.types import RunRecord, RunSpec, Utterance

log = logging.getLogger(__name__)
MatcherFor = Callable[[str], Matcher]  # language → the matcher of that language's embedder
Progress = Callable[[int, int, str], None]


def matchers(embedder_for: Callable[[str], Embedder], threshold: float | None = None) -> MatcherFor:
    """A :data:`MatcherFor` over ``embedder_for(language)`` (the workspace's embedders), one matcher per language
    (each caches the vectors of the texts it has seen)."""
    made: dict[str, Matcher] = {}

    def matcher(language: str) -> Matcher:
        if language not in made:
            made[language] = Matcher(embedder_for(language), threshold)
        return made[language]

    return matcher


def simulator_model(record: RunRecord) -> str:
    """The model that played the user (the reference simulator's name for a reference simulator)."""
    settings = record.settings.get("user_simulator") or {}
    return str(settings.get("model") or (record.spec.simulator if record.spec.simulator != "llm" else "?"))


def result_key(record: RunRecord, embedder: str, threshold: float, config: SimFidelityConfig,
               judge_model: str | None, learned: str | None = None) -> str:
    """What a stored result depends on (``learned``: the learned instrument's fingerprint where it reads stance)."""
    fields = {"n": len(record.utterances), "s": record.status, "e": embedder, "t": threshold,
              "c": config.model_dump(), "v": CHECKS_VERSION, "j": judge_model, "r": rulebook_version()}
    if learned:
        fields["l"] = learned
    raw = json.dumps(fields, sort_keys=True)
    return f"simfid-{record.run_id}-{hashlib.sha1(raw.encode()).hexdigest()[:12]}"


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def stance_fn(config: SimFidelityConfig, language: str, llm: LLMClient | None, learned: LearnedStance | None = None):
    """The stance classifier a configuration names (:mod:`.stance_instruments`): the rules of :mod:`sim.stance`, the
    learned instrument (``learned``: fitted, :func:`learned_model`), the cascade of both, or the judge role."""
    if config.classifier == "judge":
        if llm is None:
            raise ValueError("classifier 'judge' needs the judge role (an LLM client)")
        return lambda assistant, user, salt, _answering: {"classifier": "judge",
                                                          **judge_stance(llm, assistant, user, salt)}
    if config.classifier in ("learned", "cascade"):
        if learned is None:
            raise ValueError(f"classifier {config.classifier!r} needs the fitted learned instrument (an embedder)")
        return _learned_fn(config.classifier, language, learned)
    return lambda _assistant, user, _salt, answering: {"classifier": "rule",
                                                       **classify_stance(user, language, answering).evidence()}


def _learned_fn(name: str, language: str, model: LearnedStance):
    def read(assistant: str, user: str, _salt: str, answering: str | None) -> dict:
        answers = answering_of(assistant, answering)
        if name == "cascade":
            label, by = cascade_label(model, user, language, answers)
            return {"classifier": "cascade", "label": label, "by": by, "model": model.fingerprint}
        return {"classifier": "learned", "label": model.classify(user, answers), "model": model.fingerprint}

    return read


_FITTED: dict[tuple[str, int], LearnedStance] = {}


def learned_model(config: SimFidelityConfig, matcher_for: MatcherFor) -> LearnedStance | None:
    """The fitted learned instrument where the configuration reads with it (None otherwise): fitted once per process
    and embedder on the stance corpus's dev split, over the embedder ``matcher_for`` gives mixed-language data."""
    if config.classifier not in ("learned", "cascade"):
        return None
    spec = load_spec()
    embedder = matcher_for(spec.embedder_language).embedder
    key = (embedder.name, spec.version)
    if key not in _FITTED:
        _FITTED[key] = train(load_corpus(spec.corpus), embedder, spec)
    return _FITTED[key]


def check_run(record: RunRecord, dataset: Dataset, matcher_for: MatcherFor, *,
              config: SimFidelityConfig | None = None, llm: LLMClient | None = None,
              label: str | None = None) -> RunFidelity:
    """Every check of every simulated user turn of ``record`` (turns a person typed are left out), with the run's
    figures; "n/a — no gold" with the reason when the dataset has no gold for the run's topic. ``label`` names the
    simulator in the result (default: the spec's variant)."""
    started = time.perf_counter()
    config = config or SimFidelityConfig()
    spec = record.spec
    gold = topic_gold(dataset, spec)
    language = gold.language if isinstance(gold, TopicGold) else "en"
    matcher = matcher_for(language)
    uses_judge = config.classifier == "judge" or config.persona_judge
    judge_model = llm.config.role("judge").model if uses_judge and llm is not None else None
    result = RunFidelity(run_id=record.run_id, dataset=spec.dataset, user_id=spec.user_id, sample_id=spec.sample_id,
                         topic_key=spec.topic_key, method=spec.method, mode=spec.mode,
                         simulator=label or spec.simulator_variant, simulator_model=simulator_model(record),
                         status=record.status, utterances=len(record.utterances), embedder=matcher.name,
                         threshold=matcher.threshold, config=config, judge_model=judge_model,
                         rulebook=rulebook_version())
    learned = learned_model(config, matcher_for)
    result.key = result_key(record, matcher.name, matcher.threshold, config, judge_model,
                            learned.fingerprint if learned else None)
    if not isinstance(gold, TopicGold):
        result.no_gold = f"{NO_GOLD}: {gold}"
    else:
        if config.persona_judge and llm is None:
            raise ValueError("persona_judge needs the judge role (an LLM client)")
        persona = ((lambda profile, turn: judge_persona(llm, profile, turn, f"{record.run_id}/{_digest(turn)}"))
                   if config.persona_judge and llm is not None else None)
        ctx = CheckContext(gold=gold, matcher=matcher, stance=stance_fn(config, language, llm, learned),
                           persona_judge=persona,
                           schedule=record.schedule if spec.mode == "fixed" else None,
                           unavailable=unavailable(spec, gold), salt=record.run_id,
                           guards=guard_rules() if spec.simulator == "llm" else frozenset())
        result.unavailable = ctx.unavailable or {}
        result.reference = gold.reference
        check_turns(result, record.utterances, ctx)
    result.seconds = round(time.perf_counter() - started, 4)
    return result


def check_turns(result: RunFidelity, utts: list[Utterance], ctx: CheckContext) -> None:
    """Fill ``result`` with the checks of every simulated user turn of ``utts`` three ways: on what was kept, on
    the model's first drafts (where known) and the run's interventions."""
    kept, first = [], []
    for i, u in enumerate(utts):
        if u.side != "user" or u.actor != "simulator":
            continue
        kept.append(check_turn(u, utts[:i], ctx))
        if (drafted := check_first_draft(u, utts[:i], ctx, kept[-1])) is not None:
            first.append(drafted)
    result.turns, result.first_drafts = kept, first
    if not kept:
        result.no_gold = f"{NO_GOLD}: the run has no simulated user turn yet"
    result.figures, result.counts = run_figures(kept)
    result.figures_first, result.counts_first = run_figures(first)
    result.counts_first["first_draft_unknown"] = len(kept) - len(first)
    result.interventions = summarise(utts)


def measure_run(record: RunRecord, dataset: Dataset, matcher_for: MatcherFor, store: SimFidelityStore, *,
                config: SimFidelityConfig | None = None, llm: LLMClient | None = None,
                recompute: bool = False) -> RunFidelity:
    """The run's stored result for these settings, or a new one (stored)."""
    config = config or SimFidelityConfig()
    if not recompute:
        gold = topic_gold(dataset, record.spec)
        matcher = matcher_for(gold.language if isinstance(gold, TopicGold) else "en")  # as check_run picks it
        uses_judge = config.classifier == "judge" or config.persona_judge
        judge_model = llm.config.role("judge").model if uses_judge and llm is not None else None
        learned = learned_model(config, matcher_for)
        stored = store.get(result_key(record, matcher.name, matcher.threshold, config, judge_model,
                                      learned.fingerprint if learned else None))
        if stored is not None:
            return stored
    result = check_run(record, dataset, matcher_for, config=config, llm=llm)
    store.save(result)
    return result


def measure_runs(records: Sequence[RunRecord], dataset: Dataset, matcher_for: MatcherFor, store: SimFidelityStore, *,
                 config: SimFidelityConfig | None = None, llm: LLMClient | None = None,
                 progress: Progress | None = None, recompute: bool = False) -> tuple[list[RunFidelity], dict[str, str]]:
    """(results, run id → error of the runs that could not be checked); one failure never stops the rest."""
    results, errors = [], {}
    for n, record in enumerate(records, 1):
        try:
            results.append(measure_run(record, dataset, matcher_for, store, config=config, llm=llm,
                                       recompute=recompute))
        except Exception as e:  # an embedder, judge or store problem: reported with the run, the others go on
            log.exception("simulator fidelity of %s failed", record.run_id)
            errors[record.run_id] = f"{type(e).__name__}: {e}"
        if progress:
            progress(n, len(records), record.run_id)
    return results, errors


OWN_DIALOGUE_SIMULATORS = ("replay", "always-accept", "random-verdict")


def own_dialogue_runs(dataset: Dataset, users: Sequence[str] | None = None, split: str = "query",
                      simulator: str = "replay") -> list[RunRecord]:
    """The dataset's own dialogue of every topic (of the ``split`` sessions, or ``all``) as a run, so the checks can
    be run on gold dialogues (not stored). ``replay``: both sides as written — the checks' own error floor, the
    ceiling of every figure. ``always-accept`` / ``random-verdict``: the dataset's assistant turns as written and
    the reference simulator's user turns (:mod:`sim.reference`) — the floors, measured on proposals that are the
    dataset's own, so they match the topic's candidates and the verdict figures have a scale (against a live small
    assistant, whose proposals rarely match a candidate, they have almost no verdict turns)."""
    from palset.dataset import dataset_key
    from sim.reference import AlwaysAcceptSimulator, RandomVerdictSimulator, topic_turns

    if simulator not in OWN_DIALOGUE_SIMULATORS:
        raise ValueError(f"simulator {simulator!r}: one of {', '.join(OWN_DIALOGUE_SIMULATORS)}")
    out = []
    for uid in users or list(dataset.users):
        user = dataset.users[uid]
        for session in (user.query if split == "query" else user.sessions):
            for topic in session.topics:
                turns = topic_turns(session, topic.key)
                if not turns:
                    continue
                run_id = f"dataset-{session.sample_id}_{topic.key}" + ("" if simulator == "replay" else f"-{simulator}")
                spec = RunSpec(dataset=dataset_key(dataset.root), user_id=uid, sample_id=session.sample_id,
                               topic_key=topic.key, method="dataset", simulator=simulator)
                scripted = None if simulator == "replay" else (
                    AlwaysAcceptSimulator if simulator == "always-accept" else RandomVerdictSimulator)(
                    topic.topic.user_query, user.language, run_id)
                utts: list[Utterance] = []
                for i, t in enumerate(turns, 1):
                    utts.append(Utterance(turn_no=i, side="user", actor="simulator", act=t.user.action,
                                          content=t.user.content) if scripted is None else
                                scripted.say(i, t.user.action, utts, str(i))[0])
                    utts.append(Utterance(turn_no=i, side="assistant", actor="assistant", act=t.assistant.action,
                                          content=t.assistant.content))
                model = "dataset dialogue" if scripted is None else "on dataset dialogue"  # the assistant's side
                out.append(RunRecord(run_id=run_id, spec=spec, status="finished",
                                     schedule=[(t.user.action, t.assistant.action) for t in turns],
                                     schedule_source="the dataset's dialogue", utterances=utts,
                                     settings={"user_simulator": {"model": model}}))
    return out
