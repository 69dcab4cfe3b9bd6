"""BLEU as Mem-PAL §4.1 computes it: jieba (Chinese) or word tokens (English), NLTK ``sentence_bleu``,
one reference, ``SmoothingFunction().method1``, cumulative BLEU-1…4 with the paper's weights.

The weights are copied from the paper's code, including (.33, .33, .33) for BLEU-3 (not 1/3).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Sequence
from functools import cache, lru_cache

WEIGHTS: dict[int, tuple[float, ...]] = {1: (1,), 2: (0.5, 0.5), 3: (0.33, 0.33, 0.33), 4: (0.25, 0.25, 0.25, 0.25)}
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"\w+|[^\w\s]")


@cache
def _nltk() -> tuple[Callable, Callable]:
    """NLTK's ``sentence_bleu`` and smoothing, imported on first use: importing nltk takes ~1.5 s, and this module
    is reached from the composition root, so a top-level import slowed every ``pal`` command and app start."""
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    return sentence_bleu, SmoothingFunction().method1


def cjk_share(text: str) -> float:
    """Share of non-space characters that are CJK ideographs."""
    chars = [c for c in text if not c.isspace()]
    return sum(bool(_CJK.match(c)) for c in chars) / len(chars) if chars else 0.0


def is_chinese(text: str) -> bool:
    """Chinese when at least 30 % of the visible characters are CJK ideographs (names and numbers mix in)."""
    return cjk_share(text) >= 0.3


def tokenize(text: str, language: str | None = None) -> list[str]:
    """jieba accurate mode for Chinese (as the paper); lower-cased words and punctuation for English."""
    return list(_tokens(text, language or ("zh" if is_chinese(text) else "en")))


@lru_cache(maxsize=65536)
def _tokens(text: str, lang: str) -> tuple[str, ...]:
    """The tokens of ``text``, remembered: fidelity scores the same gold and memory statements at every session."""
    if lang == "zh":
        import jieba

        jieba.setLogLevel(60)
        return tuple(jieba.cut(text))
    return tuple(_WORD.findall(text.lower()))


def bleu_tokens(reference: Sequence[str], hypothesis: Sequence[str],
                orders: Sequence[int] = tuple(WEIGHTS)) -> dict[int, float]:
    """Cumulative BLEU-n of tokenised texts for each n of ``orders`` (default 1…4); an empty hypothesis or
    reference scores 0."""
    if not reference or not hypothesis:
        return dict.fromkeys(orders, 0.0)
    sentence_bleu, smooth = _nltk()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NLTK warns about zero n-gram counts; smoothing handles them
        return {n: float(sentence_bleu([list(reference)], list(hypothesis), weights=WEIGHTS[n],
                                       smoothing_function=smooth)) for n in orders}


def bleu(reference: str, hypothesis: str, language: str | None = None,
         orders: Sequence[int] = tuple(WEIGHTS)) -> dict[int, float]:
    """Cumulative BLEU-1…4 (or the ``orders`` asked for) of one prediction against one reference (language
    detected from the reference)."""
    lang = language or ("zh" if is_chinese(reference) else "en")
    return dict(_bleu(reference, hypothesis, lang, tuple(orders)))


@lru_cache(maxsize=65536)
def _bleu(reference: str, hypothesis: str, lang: str, orders: tuple[int, ...]) -> tuple[tuple[int, float], ...]:
    """BLEU of one pair, remembered (a pure function of its texts; fidelity asks for the same pairs again)."""
    return tuple(bleu_tokens(_tokens(reference, lang), _tokens(hypothesis, lang), orders).items())


def bleu_max(references: Sequence[str], hypothesis: str, language: str | None = None) -> dict[int, float]:
    """Solution generation (§4.2): BLEU against each reference, max taken separately for each n."""
    scores = [bleu(r, hypothesis, language) for r in references]
    return {n: max((s[n] for s in scores), default=0.0) for n in WEIGHTS}
