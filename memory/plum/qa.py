"""PLUM stage 1: question–answer pairs per past session, stored as memory items (layer ``qa``).

Two calls as role ``memory_builder`` per session: *positive* topics with open QA pairs about what
the user said and needed (``prompts/memory/plum_qa.md``), and *negative* topics — related things
that were NOT discussed (``plum_qa_negative.md``). Closed yes/no pairs are templated from both
("Did we talk about …?" → "Yes. …" / "No, …"), negatives are capped at the number of positives
(balanced, as in the paper), and a date-anchored pair about the user's opening message is always
added, so a session whose LLM output stays invalid still yields one pair. A negative topic whose
words appear in the session, or in an earlier session's positive pairs, is dropped (it would teach
a false "no"). Forget-request turns never reach a prompt; pairs mentioning a forget target are dropped.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from backends.prompts import load_prompt
from memory.base import MemoryView, MethodContext, dialogue_turns, forget_requests, turn_ref
from memory.privacy import ForgetRequest, keywords, mentions, redact_text
from memory.rewriting import ask, bounded_text, failure_note, language_name
from memory.types import MemoryItem
from palset.dataset import Session

Polarity = Literal["positive", "negative"]
Form = Literal["open", "closed"]
LAYER = "qa"
OVERLAP = 0.6  # share of a negative topic's words already in the session → not a negative


class PositivePair(BaseModel):
    topic: bounded_text(80) = Field(description="two to six words naming what was discussed")  # type: ignore[valid-type]  # bounded_text returns an Annotated type at import time
    question: bounded_text(200) = Field(description="what the user could ask later")  # type: ignore[valid-type]  # bounded_text returns an Annotated type at import time
    answer: bounded_text(300) = Field(description="the assistant's answer, second person, from the conversation")  # type: ignore[valid-type]  # bounded_text returns an Annotated type at import time


class PositiveQA(BaseModel):
    pairs: list[PositivePair] = Field(max_length=8)


class NegativeTopics(BaseModel):
    topics: list[bounded_text(80)] = Field(max_length=8)  # type: ignore[valid-type]  # bounded_text returns an Annotated type at import time


class QAPair(BaseModel):
    """One training pair, before it becomes a memory item."""

    question: str
    answer: str
    polarity: Polarity
    form: Form
    topic: str = ""
    source: Literal["llm", "template", "opener"] = "llm"


TEMPLATES = {
    "en": {"closed": "Did we talk about {topic}?", "yes": "Yes. {answer}",
           "no": "No, we have not talked about {topic}.", "open_neg": "What did I tell you about {topic}?",
           "open_no": "Nothing: we have not talked about {topic}.",
           "opener": "What did I ask you about on {date}?", "opener_a": "You said: {text}"},
    "zh": {"closed": "我们聊过{topic}吗？", "yes": "聊过。{answer}", "no": "没有，我们没有聊过{topic}。",
           "open_neg": "我跟你说过关于{topic}的什么？", "open_no": "什么都没说过：我们没有聊过{topic}。",
           "opener": "我在{date}问过你什么？", "opener_a": "你说：{text}"},
}


def templates(language: str) -> dict[str, str]:
    return TEMPLATES.get(language, TEMPLATES["en"])


def positive_pairs(values: list[PositivePair], language: str, n: int) -> list[QAPair]:
    """Open pairs as written plus a templated closed "yes" pair per topic (at most ``n`` topics)."""
    t, out, seen = templates(language), [], set[str]()
    for p in values:
        topic, q, a = p.topic.strip(), p.question.strip(), p.answer.strip()
        if not (topic and q and a) or topic.lower() in seen or len(seen) >= n:
            continue
        seen.add(topic.lower())
        out.append(QAPair(question=q, answer=a, polarity="positive", form="open", topic=topic))
        out.append(QAPair(question=t["closed"].format(topic=topic), answer=t["yes"].format(answer=a),
                          polarity="positive", form="closed", topic=topic, source="template"))
    return out


def negative_pairs(topics: list[str], language: str) -> list[QAPair]:
    t, out = templates(language), []
    for topic in topics:
        out.append(QAPair(question=t["closed"].format(topic=topic), answer=t["no"].format(topic=topic),
                          polarity="negative", form="closed", topic=topic, source="template"))
        out.append(QAPair(question=t["open_neg"].format(topic=topic), answer=t["open_no"].format(topic=topic),
                          polarity="negative", form="open", topic=topic, source="template"))
    return out


def opener_pair(session: Session, language: str, skip_turns: set[int]) -> QAPair | None:
    """The date-anchored pair about the user's first (non-forget) message of the session."""
    first = next((t.user.content for n, t in enumerate(session.turns, 1) if n not in skip_turns), None)
    if not first:
        return None
    t = templates(language)
    date = f"{session.dialogue_timestamp:%Y-%m-%d}"
    text = redact_text(first).strip()[:160]
    return QAPair(question=t["opener"].format(date=date), answer=t["opener_a"].format(text=text),
                  polarity="positive", form="open", topic="opening message", source="opener")


def is_discussed(topic: str, texts: list[str]) -> bool:
    """Does most of the topic's vocabulary already occur in ``texts``?"""
    words = keywords(topic)
    if not words:
        return True
    seen = set().union(*(keywords(t) for t in texts)) if texts else set()
    return len(words & seen) / len(words) >= OVERLAP


class QAWriter:
    """Writes one session's pairs with the method's LLM; collects notes about what went wrong."""

    def __init__(self, ctx: MethodContext):
        self.ctx = ctx
        self.language = ctx.user.language
        self.n_pos = int(ctx.config.get("pairs_per_session", 4))
        self.n_neg = int(ctx.config.get("negatives_per_session", 4))
        self.notes: list[str] = []

    def session_pairs(self, session: Session, memory: MemoryView) -> list[QAPair]:
        requests = forget_requests(session)
        turns = dialogue_turns(session)
        if not turns:
            return []
        dialogue = "\n".join(text for _, text in turns)
        values = {"date": f"{session.dialogue_timestamp:%Y-%m-%d}", "dialogue": dialogue,
                  "language": language_name(self.language)}
        positives = self._positives(session, values)
        negatives = self._negatives(session, values, positives, dialogue, memory)
        opener = opener_pair(session, self.language, {r.turn for r in requests})
        pairs = ([opener] if opener else []) + positives + negatives
        return self._drop_forgotten(pairs, requests)

    def _positives(self, session: Session, values: dict[str, Any]) -> list[QAPair]:
        res = ask(self.ctx, load_prompt("memory/plum_qa"), PositiveQA, n=self.n_pos, **values)
        if not res.ok:
            self.notes.append(failure_note("QA pairs", session, res, "opening-message pair only"))
            return []
        return positive_pairs(res.value.pairs, self.language, self.n_pos)

    def _negatives(self, session: Session, values: dict[str, Any], positives: list[QAPair], dialogue: str,
                   memory: MemoryView) -> list[QAPair]:
        cap = min(self.n_neg, max(1, len({p.topic for p in positives})))
        discussed = "\n".join(f"- {p.topic}" for p in positives if p.form == "open") or "(see the conversation)"
        res = ask(self.ctx, load_prompt("memory/plum_qa_negative"), NegativeTopics, n=cap, discussed=discussed,
                  **values)
        if not res.ok:
            self.notes.append(failure_note("negative QA topics", session, res, "no negative pairs"))
            return []
        earlier = [i.text for i in memory.layer(LAYER) if i.meta.get("polarity") == "positive"]
        kept: list[str] = []
        for topic in (t.strip() for t in res.value.topics):
            if not topic or topic.lower() in {k.lower() for k in kept}:
                continue
            if is_discussed(topic, [dialogue, *(p.topic for p in positives)]) or is_discussed(topic, earlier):
                self.notes.append(f"negative topic '{topic}' dropped: it was discussed")
                continue
            kept.append(topic)
        return negative_pairs(kept[:cap], self.language)

    def _drop_forgotten(self, pairs: list[QAPair], requests: list[ForgetRequest]) -> list[QAPair]:
        kept = [p for p in pairs if not any(mentions(f"{p.topic} {p.question} {p.answer}", r) for r in requests)]
        if len(kept) < len(pairs):
            self.notes.append(f"forget request: {len(pairs) - len(kept)} QA pair(s) not kept")
        return kept


def to_items(session: Session, pairs: list[QAPair]) -> list[MemoryItem]:
    """Memory items (layer ``qa``) with provenance to the session's turns (forget-request turns excluded)."""
    refs = [turn_ref(session, t) for t, _ in dialogue_turns(session)]
    return [MemoryItem(id=f"{session.sample_id}_qa_{n:02d}", layer=LAYER, text=f"Q: {p.question}\nA: {p.answer}",
                       session_id=session.sample_id, session_index=session.index, provenance=refs,
                       meta=p.model_dump()) for n, p in enumerate(pairs)]


def item_pair(item: MemoryItem) -> tuple[str, str]:
    return item.meta["question"], item.meta["answer"]
