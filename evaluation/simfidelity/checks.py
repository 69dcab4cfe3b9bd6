"""The per-turn checks of a simulated user turn (definitions and thresholds: FIDELITY.md "Simulator fidelity").

- **vague** (the first turn, Topic Inquiry): cosine to the dataset's user query and to the hidden requirement and
  each implicit need; passes when the turn is closer to the query than to the requirement and every need.
- **truthful** (Requirement Confirmation after a Requirement Prediction): the prediction matches the gold
  requirement, an implicit need or one of a need's evidences (:func:`.match.statement_matches`); a matched guess
  must be confirmed (stance ``accept``), an unmatched one corrected (``reject`` or ``partial``).
- **verdict** (Solution Feedback): the last proposal's best-matching candidate solution; its gold label implies
  ``accept`` (pos) or ``reject`` (neg) and the user's stance must equal it; a proposal matching no candidate, or
  only a neutral one, is n/a and marked as such.
- **persona** (every turn): :mod:`.persona`.
- **decision** (a judging turn composed from the simulator's structured decision): the stance the text-reading
  classifier gives the turn's words agrees with the decision. Where a decision exists it is the turn's stance for
  truthful, verdict and act; the classifier reads only text nobody structured (drafts, the dataset's own turns,
  reference simulators), so how often it agrees with a decision is itself reported.
- **act** (fixed mode): the act the text performs (inferred from its stance and what it answers: an opening that
  asks something is a Topic Inquiry; a reply to a guess with a stance a Requirement Confirmation; a reply to a
  proposal with a clear verdict a Solution Feedback, without one a Solution Discussion) equals the schedule's act.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from evaluation.simfidelity.gold import TopicGold
from evaluation.simfidelity.match import Matcher, best_match
from evaluation.simfidelity.persona import PersonaJudge, check_persona
from evaluation.simfidelity.registry import guarded
from evaluation.simfidelity.types import CheckName, TurnCheck, TurnChecks
from palset.vocab import Act
from sim.decision import GAVE_AWAY, NO_DRAFT
from sim.interventions import decision_of, first_draft
from sim.rulebook import rule_pattern
from sim.textstats import features
from sim.types import TurnDecision, Utterance

StanceOf = Callable[[str, str, str, str | None], dict]  # (assistant text, user text, salt, answering) → {"label", …}
ASKS = rule_pattern("act.asks", "asks")  # asks something, or raises a problem to talk about
CLIP = 300


@dataclass
class CheckContext:
    gold: TopicGold
    matcher: Matcher
    stance: StanceOf
    persona_judge: PersonaJudge | None = None
    schedule: list[tuple[Act, Act]] | None = None  # fixed mode's; None in free mode
    unavailable: dict[str, str] | None = None
    salt: str = ""
    guards: frozenset[str] = frozenset()  # the rules the run's simulator sent drafts back on (registry.guarded)


def _na(check: CheckName, reason: str, **evidence: object) -> TurnCheck:
    return TurnCheck(check=check, outcome="n/a", reason=reason, evidence=evidence)


def check_vague(text: str, ctx: CheckContext) -> TurnCheck:
    g, m = ctx.gold, ctx.matcher
    query = m.similarities(text, [g.query])[0]
    requirement = m.similarities(text, [g.requirement])[0]
    needs = m.similarities(text, g.needs)
    closest_hidden = max([requirement, *needs])
    gap = round(query - closest_hidden, 4)
    evidence = {"similarity_query": query, "similarity_requirement": requirement, "similarity_needs": needs,
                "gap": gap, "embedder": m.name}
    if gap > 0:
        return TurnCheck(check="vague", outcome="pass", evidence=evidence,
                         reason=f"closer to the dataset's query ({query:.3f}) than to the hidden need ({closest_hidden:.3f})")
    return TurnCheck(check="vague", outcome="fail", evidence=evidence,
                     reason=f"gives the hidden need away: {closest_hidden:.3f} to the requirement/needs, {query:.3f} "
                            "to the dataset's query")


def _guess_golds(gold: TopicGold) -> list[tuple[str, str]]:
    """(what, text) a guess may match: each implicit need, each need's evidences, the requirement."""
    out = [(f"implicit need {i + 1}", need) for i, need in enumerate(gold.needs)]
    out += [(f"evidence of implicit need {i + 1}", ev) for i, evs in enumerate(gold.evidences) for ev in evs]
    return [*out, ("requirement", gold.requirement)]


def check_truthful(text: str, prediction: str, stance: dict, ctx: CheckContext) -> TurnCheck:
    named = _guess_golds(ctx.gold)
    golds = [g for _, g in named]
    found = best_match(ctx.matcher, prediction, golds)
    assert found is not None  # golds always holds the requirement
    index, match = found
    label = stance["label"]
    evidence = {"prediction": prediction[:CLIP], "best_gold": golds[index][:CLIP], "best_is": named[index][0],
                "similarity": match.score, "threshold": match.threshold, "matched": match.matched, "stance": stance}
    if label == "invalid":
        return TurnCheck(check="truthful", outcome="n/a", reason="the stance judge gave no valid answer",
                         evidence=evidence)
    expected = ("accept",) if match.matched else ("reject", "partial")
    what = "matches" if match.matched else "does not match"
    if label in expected:
        return TurnCheck(check="truthful", outcome="pass", evidence=evidence,
                         reason=f"the guess {what} the gold ({match.score:.3f} vs τ {match.threshold}) and the user "
                                f"{'confirms' if match.matched else 'corrects it'}")
    return TurnCheck(check="truthful", outcome="fail", evidence=evidence,
                     reason=f"the guess {what} the gold ({match.score:.3f} vs τ {match.threshold}) but the user's "
                            f"stance is {label}")


def check_verdict(text: str, proposal: str | None, stance: dict, ctx: CheckContext) -> TurnCheck:
    if proposal is None:
        return _na("verdict", "no proposal before this verdict")
    solutions = [s for s, _ in ctx.gold.candidates]
    found = best_match(ctx.matcher, proposal, solutions)
    if found is None:
        return _na("verdict", "the topic has no candidate solutions")
    index, match = found
    scores = ctx.matcher.similarities(proposal, solutions)
    top = sorted(range(len(solutions)), key=lambda i: -scores[i])[:3]
    evidence = {"proposal": proposal[:CLIP], "candidate": solutions[index][:CLIP], "label": ctx.gold.candidates[index][1],
                "similarity": match.score, "threshold": match.threshold,
                "top": [{"candidate": solutions[i][:120], "label": ctx.gold.candidates[i][1], "similarity": scores[i]}
                        for i in top], "stance": stance}
    if not match.matched:
        evidence["no_candidate"] = True
        return TurnCheck(check="verdict", outcome="n/a", evidence=evidence,
                         reason=f"the proposal matches no candidate solution (best {match.score:.3f} < τ {match.threshold})")
    label = ctx.gold.candidates[index][1]
    if label not in ("pos", "neg"):
        return TurnCheck(check="verdict", outcome="n/a", evidence=evidence,
                         reason="the proposal matches a neutral candidate: the preferences imply no verdict")
    expected = "accept" if label == "pos" else "reject"
    evidence["expected"] = expected
    if stance["label"] == "invalid":
        return TurnCheck(check="verdict", outcome="n/a", reason="the stance judge gave no valid answer",
                         evidence=evidence)
    ok = stance["label"] == expected
    return TurnCheck(check="verdict", outcome="pass" if ok else "fail", evidence=evidence,
                     reason=f"the proposal matches a {label} candidate ({match.score:.3f}), so the user should "
                            f"{expected}; the user's stance is {stance['label']}")


def inferred_act(stance: str, answered: Act | None, text: str = "") -> str:
    """The act the text performs, from its stance and the assistant act it answers (see the module docstring); an
    opening (nothing answered yet, or after a Feedback Response) is a Topic Inquiry when it asks something or raises
    a problem ("I'm stuck with…", "我有点拿不定主意")."""
    verdict = stance in ("accept", "reject")
    if answered is None or answered is Act.FEEDBACK_RESPONSE:
        return Act.TOPIC_INQUIRY.value if ASKS.search(text) else "a statement that asks for nothing"
    if answered is Act.REQUIREMENT_PREDICTION:
        return Act.REQUIREMENT_CONFIRMATION.value if stance != "none" else "no reaction to the guess"
    return Act.SOLUTION_FEEDBACK.value if verdict else Act.SOLUTION_DISCUSSION.value


def check_act(turn_no: int, text: str, stance: dict, answered: Act | None, ctx: CheckContext) -> TurnCheck:
    scheduled = ctx.schedule[turn_no - 1][0].value if ctx.schedule and turn_no <= len(ctx.schedule) else None
    if scheduled is None:
        return _na("act", f"the schedule has no turn {turn_no}")
    inferred = inferred_act(stance["label"], answered, text)
    evidence = {"scheduled": scheduled, "inferred": inferred, "answers": answered.value if answered else None,
                "stance": stance}
    if stance["label"] == "invalid":
        return TurnCheck(check="act", outcome="n/a", reason="the stance judge gave no valid answer", evidence=evidence)
    ok = inferred == scheduled
    return TurnCheck(check="act", outcome="pass" if ok else "fail", evidence=evidence,
                     reason=f"scheduled {scheduled}; the text reads as {inferred}")


def _not_its_voice(utt: Utterance, instead: str) -> TurnCheck:
    """The persona check of a turn whose words are not the simulator's draft (``utt.fallback`` says why)."""
    why = GAVE_AWAY if GAVE_AWAY in utt.fallback else NO_DRAFT
    return TurnCheck(check="persona", outcome="fail", reason=f"{why}; {instead}",
                     evidence={"fallback": utt.fallback})


def decision_stance(decision: TurnDecision, reading: dict) -> dict:
    """The stance of a turn the simulator decided (:mod:`sim.decision`): the decision's, with the classifier's
    reading of the words beside it."""
    return {"label": decision.stance, "source": "decision", "decision": decision.model_dump(mode="json"),
            "text_reading": reading}


def agrees(decision: TurnDecision, label: str) -> bool:
    """Whether a text reading ``label`` says what the decision says (a denied guess may be corrected in part)."""
    return label == decision.stance or (decision.field == "guessed" and not decision.value and label == "partial")


def check_decision(decision: TurnDecision, reading: dict) -> TurnCheck:
    """The text-reading classifier against the simulator's own decision on the same turn."""
    evidence = {"decision": decision.stance, "derived": decision.derived, "text_reading": reading}
    if reading["label"] == "invalid":
        return TurnCheck(check="decision", outcome="n/a", reason="the stance judge gave no valid answer",
                         evidence=evidence)
    ok = agrees(decision, reading["label"])
    return TurnCheck(check="decision", outcome="pass" if ok else "fail", evidence=evidence,
                     reason=f"the simulator decided {decision.stance}; its words read as {reading['label']}")


def check_first_draft(utt: Utterance, history: list[Utterance], ctx: CheckContext,
                      kept: TurnChecks) -> TurnChecks | None:
    """The checks of the model's first draft of ``utt`` as if it had been sent (``kept``: the checks of what was
    sent, reused when the first draft is what was sent); None when the first draft is not known."""
    draft = first_draft(utt)
    if draft is None:
        return None
    if draft == utt.content and not utt.fallback:
        return kept
    as_drafted = utt.model_copy(update={"content": draft, "fallback": "", "decision": None, "attempts": 1})
    return check_turn(as_drafted, history, ctx)


def _unless_guarded(name: CheckName, utt: Utterance, ctx: CheckContext) -> TurnCheck | None:
    """The outcome a guard left a kept turn with (:func:`.registry.guarded`); None: check the kept text."""
    found = guarded(name, utt, ctx.guards)
    return None if found is None else TurnCheck(check=name, outcome=found.outcome, reason=found.reason,
                                                evidence=found.evidence)


def check_turn(utt: Utterance, history: list[Utterance], ctx: CheckContext) -> TurnChecks:
    """Every check of the user utterance ``utt`` (``history``: the utterances before it)."""
    out = TurnChecks(turn_no=utt.turn_no, act=utt.act.value, text=utt.content, features=features(utt.content))
    unavailable = ctx.unavailable or {}
    prev = next((u for u in reversed(history) if u.side == "assistant"), None)
    salt = f"{ctx.salt}/{utt.turn_no}"
    answering = "guess" if prev is not None and prev.act is Act.REQUIREMENT_PREDICTION else None
    reading = ctx.stance(prev.content if prev else "", utt.content, salt, answering)
    decision = decision_of(utt)
    stance = reading if decision is None else decision_stance(decision, reading)
    if utt.fallback and not utt.composed:  # not the simulator's words: it failed to speak as the user, no credit
        out.checks.append(_na("vague", f"not the simulator's words ({utt.fallback[:120]})"))
        out.checks.append(_not_its_voice(utt, "the user query was sent instead"))
        return out
    if utt.act is Act.TOPIC_INQUIRY and utt.turn_no == 1:
        out.checks.append(_na("vague", unavailable["vague"]) if "vague" in unavailable
                          else _unless_guarded("vague", utt, ctx) or check_vague(utt.content, ctx))
    if utt.act is Act.REQUIREMENT_CONFIRMATION:
        if prev is None or prev.act is not Act.REQUIREMENT_PREDICTION:
            out.checks.append(_na("truthful", "no requirement prediction before this confirmation"))
        else:
            out.checks.append(check_truthful(utt.content, prev.content, stance, ctx))
    if utt.act is Act.SOLUTION_FEEDBACK:
        proposal = next((u.content for u in reversed(history) if u.act is Act.SOLUTION_PROPOSAL), None)
        out.checks.append(_na("verdict", unavailable["verdict"]) if "verdict" in unavailable
                          else check_verdict(utt.content, proposal, stance, ctx))
    if decision is not None:
        out.checks.append(check_decision(decision, reading))
    if utt.composed:  # the decision is the simulator's (truthful, verdict, act are checked); the voice is not
        out.checks.append(_not_its_voice(utt, "the turn was composed from the model's decision"))
    else:
        out.checks.append(_na("persona", unavailable["persona"]) if "persona" in unavailable
                          else _unless_guarded("persona", utt, ctx)
                          or check_persona(utt.content, ctx.gold, ctx.persona_judge, [prev.content] if prev else []))
    out.checks.append(_na("act", unavailable["act"]) if "act" in unavailable
                      else check_act(utt.turn_no, utt.content, stance, prev.act if prev else None, ctx))
    return out
