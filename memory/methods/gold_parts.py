"""The ground-truth memory's building blocks, read straight from PAL-Set's annotations (no LLM).

Pure functions, unit-tested: which gold situation each log belongs to, where each topic of a
dialogue starts and ends, which candidate solution each assistant proposal put forward, and the
few sentence templates of the gold texts in English and Chinese.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from palset.dataset import Session, SessionTopic, User
from palset.models import Situation
from palset.vocab import Act

# Which profile field describes which background aspect (background.json → H²Memory's four aspects).
PROFILE_FIELDS = {"work": "occupation", "health": "health_status", "family": "family_members", "leisure": "hobbies"}

TEMPLATES = {
    "en": {"principle": "Accepts: {pos} Rejects: {neg}", "preference": "liked: {pos}; disliked: {neg}",
           "graph": "{logs} logs in {groups} gold situation(s); PAL-Set annotates no relations between logs",
           "none": "none", "withheld": "query session: the situation paragraph and its requirement types' aspects are "
           "withheld (the query topics are written from them); the item holds the situation's logs"},
    "zh": {"principle": "接受：{pos} 拒绝：{neg}", "preference": "喜欢：{pos}；不喜欢：{neg}",
           "graph": "{logs} 条日志，分属 {groups} 个真实情境；PAL-Set 未标注日志之间的关系", "none": "无",
           "withheld": "查询会话：情境描述及其需求类型的方面不写入（查询话题由它们生成）；此条目只含该情境的日志"},
}

# What a gold topic outline derives rather than reads (shown wherever the outline's solutions are shown).
MIN_MATCH = 0.2  # token-set F1 a proposal needs with a candidate to count as proposing it
DERIVED_OUTLINE = ("derived (not annotation): which candidate each Solution Proposal turn put forward is found by "
                   f"token overlap (F1 ≥ {MIN_MATCH}); the verdict is that candidate's pos/neg label")


def template(language: str, name: str, **values: object) -> str:
    return TEMPLATES["zh" if language == "zh" else "en"][name].format(**values)


# ---------------------------------------------------------------- logs → gold situations


def _distance(t: datetime, sit: Situation) -> float:
    if sit.start_timestamp <= t <= sit.end_timestamp:
        return 0.0
    return min(abs((t - sit.start_timestamp).total_seconds()), abs((t - sit.end_timestamp).total_seconds()))


def log_situations(session: Session, situations: dict[str, Situation]) -> tuple[list[str], int]:
    """The gold situation (its end-date key) of each log of ``session``, and how many logs lay outside every span.

    A log belongs to the situation whose time span contains it (PAL-Set generates every log inside its
    situation's span); a log outside every span (hand-edited data) goes to the nearest span, earlier
    situation first on a tie, and is counted so the build can say so.
    """
    keys = sorted(situations)
    out, outside = [], 0
    for lg in session.logs:
        best = min(keys, key=lambda k: (_distance(lg.timestamp, situations[k]), k))
        outside += _distance(lg.timestamp, situations[best]) > 0
        out.append(best)
    return out, outside


def groups_in_order(labels: list[str]) -> list[tuple[str, list[int]]]:
    """(label, log indices) per distinct label, in order of each label's first log."""
    groups: dict[str, list[int]] = {}
    for j, label in enumerate(labels):
        groups.setdefault(label, []).append(j)
    return list(groups.items())


# ---------------------------------------------------------------- dialogue → topics and proposals


def topic_spans(session: Session) -> tuple[list[tuple[int, int]], bool]:
    """1-based inclusive turn spans of the session's topics, and whether they came from the dialogue acts.

    A topic starts at a user turn labelled Topic Inquiry (PAL-Set's dialogue grammar). When the number of
    such turns differs from the number of topics, the turns are split evenly instead (flagged False).
    """
    n, k = len(session.turns), len(session.topics)
    if k == 0 or n == 0:
        return [], True
    starts = [t for t, turn in enumerate(session.turns, 1) if turn.user.action is Act.TOPIC_INQUIRY]
    exact = len(starts) == k
    if not exact:
        starts = sorted({1 + (i * n) // k for i in range(k)})
        starts += [n] * (k - len(starts))
    starts[0] = 1
    return [(s, (starts[i + 1] - 1) if i + 1 < k else n) for i, s in enumerate(starts)], exact


@dataclass(frozen=True)
class Proposal:
    """A solution the assistant proposed in a topic, the candidate it matches and the user's verdict."""

    turn: int
    solution: str
    feedback_type: str  # pos | neg | others (a "neu" candidate, or no candidate matched)
    user_feedback: str
    overlap: float  # token-set F1 between the proposal turn and the best candidate
    how: str  # how it was derived (a proposal is never annotated with its candidate)


_WORD = re.compile(r"[^\W\d_]{2,}|\d+")
_HAN = re.compile(r"[\u3400-\u9fff]+")


def _tokens(text: str, language: str) -> set[str]:
    """Lower-cased words (2+ letters, or numbers); for Chinese also character bigrams (no segmenter needed)."""
    tokens = set(_WORD.findall(_HAN.sub(" ", text.lower())))
    if language == "zh":
        for run in _HAN.findall(text):
            tokens.update(run[i:i + 2] for i in range(max(1, len(run) - 1)))
    return tokens


def _f1(a: set[str], b: set[str]) -> float:
    common = len(a & b)
    return 2 * common / (len(a) + len(b)) if common else 0.0


def proposals(session: Session, topic: SessionTopic, span: tuple[int, int], language: str) -> list[Proposal]:
    """Every Solution Proposal turn inside ``span``, matched to the topic's most similar candidate solution.

    Matching is by token-set F1 over words (and Chinese character bigrams): deterministic, and the proposal
    paraphrases its candidate. The verdict is the candidate's label (pos/neg; neu becomes "others", as in
    H²Memory's topic outlines). A proposal whose best candidate shares less than ``MIN_MATCH`` is matched to
    none: it keeps the assistant's own words and an unknown verdict ("others"). The user's words are the first
    Solution Feedback turn after the proposal inside the topic. All of this is derived, not annotated.
    """
    candidates = topic.topic.candidate_solutions
    cand_tokens = [_tokens(c.solution, language) for c in candidates]
    out = []
    a, b = span
    for t in range(a, b + 1):
        turn = session.turns[t - 1]
        if turn.assistant.action is not Act.SOLUTION_PROPOSAL or not candidates:
            continue
        said = _tokens(turn.assistant.content, language)
        scores = [_f1(said, c) for c in cand_tokens]
        best = max(range(len(candidates)), key=lambda i: (scores[i], -i))
        verdict = next((session.turns[u - 1].user.content for u in range(t + 1, b + 1)
                        if session.turns[u - 1].user.action is Act.SOLUTION_FEEDBACK), "")
        overlap = round(scores[best], 4)
        if overlap < MIN_MATCH:
            out.append(Proposal(turn=t, solution=turn.assistant.content, feedback_type="others", user_feedback=verdict,
                                overlap=overlap, how=f"derived (not annotation): no candidate shares F1 ≥ {MIN_MATCH} "
                                f"with turn {t} (best {overlap:.2f}): the assistant's words, verdict unknown"))
            continue
        label = candidates[best].feedback
        out.append(Proposal(turn=t, solution=candidates[best].solution,
                            feedback_type=label if label in ("pos", "neg") else "others", user_feedback=verdict,
                            overlap=overlap, how=f"derived (not annotation): turn {t} matched to this candidate by "
                            f"token overlap F1 {overlap:.2f}"))
    return out


def profile_texts(user: User) -> dict[str, str]:
    """The profile sentence of each background aspect ("" without background.json)."""
    if user.profile is None:
        return dict.fromkeys(PROFILE_FIELDS, "")
    return {aspect: str(getattr(user.profile, name)) for aspect, name in PROFILE_FIELDS.items()}
