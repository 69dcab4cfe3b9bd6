"""Reference simulators: users with known behaviour, so every simulator-fidelity figure has a scale.

- ``replay`` — the dataset's own dialogue of the topic: each user turn is the dataset's user turn, in the dataset's
  act order (the run's schedule is that dialogue's). The ceiling of every figure that compares with real user
  turns (vagueness, distribution, persona, schedule); it does not listen, so where the assistant departs from the
  dataset's assistant its confirmations and verdicts need not fit (which is what the checks then show).
- ``always-accept`` — opens with the topic's query, confirms every guess and accepts every proposal: the floor of
  over-cooperation.
- ``random-verdict`` — opens with the topic's query, confirms or denies and accepts, rejects or half-accepts at
  random (seeded by the run and turn, so a run replays exactly): the chance floor.

Each is a real user side (:class:`UserSide`), chosen with ``RunSpec.simulator`` on the Simulate page, in ``pal
simulate --simulator`` and in experiments; no LLM is called for the user.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable

from palset.dataset import Session
from palset.models import Turn
from palset.vocab import Act
from sim.types import Utterance

PHRASES: dict[str, dict[str, str]] = {
    "en": {"confirm": "Yes, exactly.", "deny": "No, that's not it.",
           "discuss": "How would that work for me in practice?",
           "accept": "That sounds great, I'll do that.", "reject": "No, that doesn't suit me at all.",
           "partial": "Maybe, but I'm not sure it fits me."},
    "zh": {"confirm": "对，没错。", "deny": "不对，不是这个。", "discuss": "这个具体要怎么做呢？",
           "accept": "这个主意很好，我就这么办。", "reject": "不行，这完全不适合我。", "partial": "也许吧，但我不确定合不合适。"},
}


def topic_turns(session: Session, topic_key: str) -> list[Turn] | None:
    """The dataset's dialogue turns of one topic: a session's dialogue holds its topics one after another, each
    opened by a Topic Inquiry; None when the dialogue does not split into as many openings as the session has
    topics (then no turn can be attributed to a topic)."""
    segments: list[list[Turn]] = []
    for turn in session.turns:
        if turn.user.action is Act.TOPIC_INQUIRY or not segments:
            segments.append([])
        segments[-1].append(turn)
    keys = [t.key for t in session.topics]
    if len(segments) != len(keys) or topic_key not in keys or not all(s[0].user.action is Act.TOPIC_INQUIRY
                                                                      for s in segments):
        return None
    return segments[keys.index(topic_key)]


def _utterance(turn_no: int, act: Act, content: str, kind: str, started: float,
               on_token: Callable[[str], None] | None) -> Utterance:
    """The reference simulator's turn (shown at once to a streaming page through ``on_token``)."""
    if on_token is not None:
        on_token(content)
    return Utterance(turn_no=turn_no, side="user", actor="simulator", act=act, content=content,
                     prompt_name=f"reference/{kind}", model=kind, latency_ms=(time.perf_counter() - started) * 1000,
                     created_at=time.time())


class ReplaySimulator:
    """The dataset's own user turns of the topic, turn by turn."""

    kind = "replay"

    def __init__(self, turns: list[Turn]):
        if not turns:
            raise ValueError("the topic has no dialogue in the dataset: nothing to replay")
        self.turns = turns

    def schedule(self) -> list[tuple[Act, Act]]:
        """The dataset dialogue's act order: the replayed run's fixed schedule."""
        return [(t.user.action, t.assistant.action) for t in self.turns]

    def say(self, turn_no: int, act: Act, history: list[Utterance], salt: str,
            on_token: Callable[[str], None] | None = None) -> tuple[Utterance, bool]:
        started = time.perf_counter()
        if not 1 <= turn_no <= len(self.turns):
            raise ValueError(f"the dataset's dialogue of this topic has {len(self.turns)} turns, not {turn_no}")
        return _utterance(turn_no, act, self.turns[turn_no - 1].user.content, self.kind, started, on_token), False


class ScriptedVerdictSimulator:
    """Opens with the topic's query; every other turn is a fixed phrase of the user's language."""

    kind = "always-accept"

    def __init__(self, opening: str, language: str, seed: str = "0"):
        self.opening, self.seed = opening, seed
        self.phrases = PHRASES.get(language, PHRASES["en"])

    def choice(self, act: Act, salt: str) -> str:
        """Which phrase answers ``act`` (always the cooperative one here)."""
        return {Act.REQUIREMENT_CONFIRMATION: "confirm", Act.SOLUTION_FEEDBACK: "accept"}.get(act, "discuss")

    def say(self, turn_no: int, act: Act, history: list[Utterance], salt: str,
            on_token: Callable[[str], None] | None = None) -> tuple[Utterance, bool]:
        started = time.perf_counter()
        text = self.opening if act is Act.TOPIC_INQUIRY else self.phrases[self.choice(act, salt)]
        return _utterance(turn_no, act, text, self.kind, started, on_token), False


class AlwaysAcceptSimulator(ScriptedVerdictSimulator):
    kind = "always-accept"


class RandomVerdictSimulator(ScriptedVerdictSimulator):
    """Confirms or denies (½ each), accepts, rejects or half-accepts (⅓ each), seeded by the run seed and turn."""

    kind = "random-verdict"

    def choice(self, act: Act, salt: str) -> str:
        rng = random.Random(int(hashlib.sha1(f"{self.seed}/{salt}".encode()).hexdigest()[:12], 16))
        if act is Act.REQUIREMENT_CONFIRMATION:
            return rng.choice(["confirm", "deny"])
        if act is Act.SOLUTION_FEEDBACK:
            return rng.choice(["accept", "reject", "partial"])
        return "discuss"
