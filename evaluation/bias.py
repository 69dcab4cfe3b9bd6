"""Judge-bias diagnostics of FairEval judgments: position bias (flip rate, slot-1 win rate) and length bias.

Length bias as the judge-evaluation anchors report it (AlpacaEval's "probability of preferring the
longer output", the MT-Bench finding that the longer answer wins about two times in three): per
judged topic, the length of each dialogue is the token count of its assistant turns as the judge
read them (the same token counter for Chinese and English, :func:`memory.tokens.count_tokens`).
Reported: the win rate of the longer dialogue over decided (win/lose) topics whose dialogues differ
in length, and the mean length difference (A − B) per verdict (win, tie, lose).
"""

from __future__ import annotations

from collections.abc import Sequence

from evaluation.faireval import Judgment
from memory.tokens import count_tokens

ASSISTANT_LINE = '- "assistant": '


def assistant_tokens(transcript: str) -> int:
    """Tokens of the assistant lines of a judged transcript (``- "assistant": …`` lines, as the judge saw them)."""
    return sum(count_tokens(line[len(ASSISTANT_LINE):]) for line in transcript.splitlines()
               if line.startswith(ASSISTANT_LINE))


def dialogue_lengths(j: Judgment) -> tuple[int, int]:
    """(A's, B's) assistant tokens, read from the order-1 texts (A was assistant-1 there)."""
    texts = j.texts.get("order1")
    if texts is None:
        return 0, 0
    return assistant_tokens(texts.assistant_1), assistant_tokens(texts.assistant_2)


def length_bias(judgments: Sequence[Judgment]) -> dict:
    """``longer_win_rate`` (None when no decided topic has dialogues of different length), ``longer_decided``
    (how many topics it is over), ``length_diff`` per verdict (mean A − B tokens; None without such verdicts)
    and ``mean_tokens_a`` / ``mean_tokens_b`` over valid judgments."""
    valid = [(j.decision, *dialogue_lengths(j)) for j in judgments if j.decision != "invalid"]
    decided = [(d, a, b) for d, a, b in valid if d in ("win", "lose") and a != b]
    longer_won = sum((d == "win") == (a > b) for d, a, b in decided)
    diffs: dict[str, float | None] = {}
    for verdict in ("win", "tie", "lose"):
        ds = [a - b for d, a, b in valid if d == verdict]
        diffs[verdict] = sum(ds) / len(ds) if ds else None
    return {"longer_win_rate": longer_won / len(decided) if decided else None, "longer_decided": len(decided),
            "length_diff": diffs,
            "mean_tokens_a": sum(a for _, a, _ in valid) / len(valid) if valid else None,
            "mean_tokens_b": sum(b for _, _, b in valid) / len(valid) if valid else None}


def position_bias(judgments: Sequence[Judgment]) -> dict:
    """``flip_rate``: topics whose winner changed when the dialogues were swapped (over topics with a winner
    in both orders); ``slot1_win_rate``: share of valid samples where the first-shown dialogue scored higher."""
    both = [j for j in judgments if "none" not in (j.order1_winner, j.order2_winner)]
    samples = [s for j in judgments for s in j.samples if s.ok]
    return {"flip_rate": sum(j.flipped for j in both) / len(both) if both else 0.0,
            "slot1_win_rate": sum(s.slot1 > s.slot2 for s in samples) / len(samples) if samples else 0.0}  # type: ignore[operator]  # valid samples carry both slots
