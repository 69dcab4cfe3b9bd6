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
    "en": {"recently": "Recently: {text}", "principle": "Accepts: {pos} Rejects: {neg}",
           "preference": "liked: {pos}; disliked: {neg}", "graph": "{edges} follows relations among {logs} logs "
           "in {groups} gold situation(s)", "none": "none"},
    "zh": {"recently": "近况：{text}", "principle": "接受：{pos} 拒绝：{neg}", "preference": "喜欢：{pos}；不喜欢：{neg}",
           "graph": "{logs} 条日志、{groups} 个真实情境中的 {edges} 条时间先后关系", "none": "无"},
}


def template(language: str, name: str, **values: object) -> str:
    return TEMPLATES["zh" if language == "zh" else "en"][name].format(**values)


def first_sentence(text: str, limit: int = 240) -> str:
    """The first sentence of a paragraph (the splitter fidelity uses), at most ``limit`` characters."""
    from memory.sentences import split_sentences

    sentences = split_sentences(text)
    return (sentences[0] if sentences else text.strip())[:limit]


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


def follows_edges(group: list[int]) -> list[tuple[int, int, str]]:
    """Each log of a gold situation follows the previous log of the same situation (a chain, in time order)."""
    return [(a, b, "follows") for a, b in zip(group, group[1:])]


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
    feedback_type: str  # pos | neg | others (a "neu" candidate)
    user_feedback: str
    overlap: float  # token-set F1 between the proposal turn and the matched candidate


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
    paraphrases its candidate. The verdict is the
    candidate's label (pos/neg; neu becomes "others", as in H²Memory's topic outlines) and the user's words
    are the first Solution Feedback turn after the proposal inside the topic.
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
        label = candidates[best].feedback
        out.append(Proposal(turn=t, solution=candidates[best].solution,
                            feedback_type=label if label in ("pos", "neg") else "others",
                            user_feedback=verdict, overlap=round(scores[best], 4)))
    return out


def profile_texts(user: User) -> dict[str, str]:
    """The profile sentence of each background aspect ("" without background.json)."""
    if user.profile is None:
        return dict.fromkeys(PROFILE_FIELDS, "")
    return {aspect: str(getattr(user.profile, name)) for aspect, name in PROFILE_FIELDS.items()}
