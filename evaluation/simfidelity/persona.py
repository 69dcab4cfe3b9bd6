"""The "in persona" check of a simulated user turn: rules for what a rule can decide (first person, the user's
language, no assistant-style offers), and the judge for facts contradicting the profile (:mod:`.judges`), asked
only where the turn states something about the user and only when the configuration asks for it."""

from __future__ import annotations

import re
from collections.abc import Callable

from evaluation.simfidelity.gold import TopicGold
from evaluation.simfidelity.types import TurnCheck
from sim.textstats import cjk_share, first_person, language_of

THIRD_PERSON = re.compile(r"\b(the user|this user|the user's)\b|用户", re.I)
OFFERS = {
    "en": re.compile(r"\b(how (can|may) i (help|assist)|i can help you|i('d| would) (suggest|recommend)|"
                     r"you (could|should|might) (try|consider)|would you like me to|let me know if|happy to help|"
                     r"here are (some|a few)|as an ai|i('m| am) (an|your) (ai|assistant)|feel free to|"
                     r"i hope (this|that) helps)\b", re.I),
    "zh": re.compile(r"我可以帮(您|你)|建议(您|你)|(您|你)可以(试试|考虑)|有什么(可以|需要)帮|我来帮(你|您)|作为(一个)?(AI|助手)|"
                     r"希望(对你|对您|能帮)|请问您|您可以"),
}
FACTS = re.compile(r"\b(i'm|i am|i have|i've|my|we have|our)\b|\d|我是|我有|我的|我们家|我家|岁", re.I)

PersonaJudge = Callable[[str, str], dict]  # (profile, turn) → judges.judge_persona's answer


def _names(gold: TopicGold) -> list[str]:
    """The user's full name, and an English user's first name (how a simulator slipping into the third person
    names them)."""
    if not gold.name:
        return []
    first = gold.name.split()[0]
    return [gold.name, *([first] if gold.language == "en" and len(first) > 2 and first != gold.name else [])]


def check_persona(text: str, gold: TopicGold, judge: PersonaJudge | None) -> TurnCheck:
    """Fails on a third-person self-reference (the user's name or "the user"), a turn in the other language, an
    assistant-style offer, or (judge) a fact contradicting the profile; passes otherwise."""
    failures: list[str] = []
    evidence: dict = {"first_person": first_person(text), "cjk_share": round(cjk_share(text), 3),
                      "expected_language": gold.language}
    named = next((n for n in _names(gold) if re.search(rf"(?<!\w){re.escape(n)}(?!\w)", text)), None)
    if (m := THIRD_PERSON.search(text)) or named:
        failures.append(f"refers to the user in the third person ({m.group(0) if m else named!r})")
    written = language_of(text)
    evidence["language"] = written
    if re.search(r"[A-Za-z\u4e00-\u9fff]", text) and written != gold.language:
        failures.append(f"written in {'Chinese' if written == 'zh' else 'English'}, the user writes "
                        f"{'Chinese' if gold.language == 'zh' else 'English'}")
    if m := OFFERS[gold.language if gold.language in OFFERS else "en"].search(text):
        failures.append(f"speaks like the assistant ({m.group(0)!r})")
        evidence["offer"] = m.group(0)
    if judge is None:
        evidence["profile"] = "not judged (persona_judge off)"
    elif not FACTS.search(text):
        evidence["profile"] = "not judged: the turn states no fact about the user"
    else:
        answer = judge(gold.profile_text(), text)
        evidence["judge"] = answer
        if answer.get("contradicts"):
            failures.append(f"contradicts the profile ({answer.get('reason', '')})")
    if failures:
        return TurnCheck(check="persona", outcome="fail", reason="; ".join(failures), evidence=evidence)
    return TurnCheck(check="persona", outcome="pass", reason="in persona: the user's language, no third-person "
                     "self-reference, no assistant-style offer" + (", nothing contradicting the profile"
                                                                  if "judge" in evidence else ""), evidence=evidence)
