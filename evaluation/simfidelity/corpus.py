"""The turn rules measured on text the project did not write: the labelled corpora under ``tests/sim/corpus/``.

``stance.jsonl`` holds user turns with their stance toward the assistant's last message (accept / reject / partial /
none) and what they answer (an opening, a guess about the need, a proposal); ``persona.jsonl`` holds turns labelled
``in`` (a user speaking) or ``out`` (an assistant speaking). Both come from the Mem-PAL authors' example dialogues
(hzp3517/Mem-PAL) and from natural replies written for the corpus; every item names its source. Each item belongs to
a frozen split: ``dev`` is what a rule may be tuned on, ``test`` is held out and is what FIDELITY.md reports.

Figures per rule, language and split: accuracy, Cohen's κ against the labels, precision and recall per label, and for
stance the share of rejections read as acceptance (the error that inflates acceptance and over-cooperation).
``pal simulate corpus`` prints them; ``bench/stance_corpus.py`` checks them against the targets.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from backends.llm.client import LLMClient
from backends.llm.errors import LLMError
from backends.paths import PROJECT_ROOT
from sim.persona_check import speaks_as_user
from sim.rulebook import PERSONA_RULES, rule_of_reason
from sim.stance import STANCES, classify_stance

log = logging.getLogger(__name__)
CORPUS_DIR = PROJECT_ROOT / "tests" / "sim" / "corpus"
Split = Literal["dev", "test"]
SPLITS: tuple[str, ...] = ("dev", "test")


class CorpusItem(BaseModel):
    """One labelled turn (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")
    id: str
    split: Split
    language: Literal["en", "zh"]
    label: str
    text: str
    source: str
    category: str = ""
    answering: Literal["opening", "guess", "proposal"] | None = None  # stance items only


class LabelScore(BaseModel):
    model_config = ConfigDict(extra="forbid")
    label: str
    precision: float | None
    recall: float | None
    support: int  # items with this gold label


class CorpusScore(BaseModel):
    """One classifier on one language and split of a corpus."""

    model_config = ConfigDict(extra="forbid")
    rule: str  # "stance", a persona rule id, "in persona" (all of them), or "judge"
    classifier: str
    language: str
    split: str
    n: int
    accuracy: float | None
    kappa: float | None
    labels: list[LabelScore]
    confusion: dict[str, dict[str, int]]  # gold → predicted → count
    reject_as_accept: int | None = None  # stance: rejections read as acceptance…
    rejections: int | None = None  # …of these
    errors: list[dict[str, str]] = []  # id, text, gold, predicted (for reading, never for tuning the test split)


def load_corpus(name: str, path: Path | None = None) -> list[CorpusItem]:
    """The items of ``tests/sim/corpus/<name>.jsonl`` (or ``path``); a line that is no valid item is an error naming
    the file and the line."""
    path = path or CORPUS_DIR / f"{name}.jsonl"
    items = []
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            items.append(CorpusItem.model_validate(json.loads(line)))
        except ValueError as e:
            log.error("%s line %d: %s", path, no, e)
            raise ValueError(f"{path.name} line {no}: {e}") from e
    return items


def cohen_kappa(gold: Sequence[str], predicted: Sequence[str]) -> float | None:
    """Cohen's κ of two labellings of the same items (None for no items; 1.0 when both agree on a single label)."""
    n = len(gold)
    if n == 0:
        return None
    observed = sum(g == p for g, p in zip(gold, predicted, strict=True)) / n
    gold_counts, predicted_counts = Counter(gold), Counter(predicted)
    expected = sum(gold_counts[k] * predicted_counts[k] for k in gold_counts) / (n * n)
    return 1.0 if expected == 1 else (observed - expected) / (1 - expected)


def score(items: Sequence[CorpusItem], predicted: Sequence[str], *, rule: str, classifier: str, language: str,
          split: str, labels: Sequence[str]) -> CorpusScore:
    """The figures of ``predicted`` (one label per item) against the items' labels."""
    gold = [i.label for i in items]
    confusion: dict[str, dict[str, int]] = {g: {} for g in labels}
    for g, p in zip(gold, predicted, strict=True):
        confusion.setdefault(g, {})[p] = confusion.get(g, {}).get(p, 0) + 1
    per_label = []
    for label in labels:
        tp = sum(g == p == label for g, p in zip(gold, predicted, strict=True))
        said, support = sum(p == label for p in predicted), sum(g == label for g in gold)
        per_label.append(LabelScore(label=label, precision=tp / said if said else None,
                                    recall=tp / support if support else None, support=support))
    out = CorpusScore(rule=rule, classifier=classifier, language=language, split=split, n=len(items),
                      accuracy=sum(g == p for g, p in zip(gold, predicted, strict=True)) / len(items) if items else None,
                      kappa=cohen_kappa(gold, predicted), labels=per_label, confusion=confusion,
                      errors=[{"id": i.id, "text": i.text, "gold": i.label, "predicted": p}
                              for i, p in zip(items, predicted, strict=True) if i.label != p])
    if "reject" in labels and "accept" in labels:
        out.rejections = sum(g == "reject" for g in gold)
        out.reject_as_accept = sum(g == "reject" and p == "accept" for g, p in zip(gold, predicted, strict=True))
    return out


StanceClassifier = Callable[[CorpusItem], str]


def rule_stance(item: CorpusItem) -> str:
    """The stance rule (:mod:`sim.stance`) on one item, told what it answers (a guess confirms in more ways)."""
    return classify_stance(item.text, item.language, "guess" if item.answering == "guess" else None).label


def measure_stance(items: Sequence[CorpusItem], classify: StanceClassifier = rule_stance, classifier: str = "rule",
                   splits: Sequence[str] = SPLITS) -> list[CorpusScore]:
    """The stance classifier's figures per language and split."""
    return _per_split(items, classify, "stance", classifier, splits, STANCES)


def _per_split(items: Sequence[CorpusItem], classify: Callable[[CorpusItem], str], rule: str, classifier: str,
               splits: Sequence[str], labels: Sequence[str]) -> list[CorpusScore]:
    """One instrument's figures for each split and language that has items."""
    out = []
    for split in splits:
        for language in ("en", "zh"):
            chosen = [i for i in items if i.split == split and i.language == language]
            if chosen:
                out.append(score(chosen, [classify(i) for i in chosen], rule=rule, classifier=classifier,
                                 language=language, split=split, labels=labels))
    return out


# what the judge is told the user answers (the corpus keeps the user's turns, not the assistant's)
JUDGE_CONTEXT = {"guess": "(the assistant guessed what the user needs)",
                 "proposal": "(the assistant proposed a solution)", "opening": ""}


def judge_stance_of(llm: LLMClient) -> StanceClassifier:
    """The judge role's stance classifier (:func:`.judges.judge_stance`) over corpus items."""
    from evaluation.simfidelity.judges import judge_stance

    def classify(item: CorpusItem) -> str:
        context = JUDGE_CONTEXT[item.answering or "opening"]
        try:
            return str(judge_stance(llm, context, item.text, f"corpus/{item.id}")["label"])
        except LLMError as e:  # one call failing costs that item (a miss), not the measurement
            log.warning("stance judge on corpus item %s failed: %s", item.id, e)
            return "invalid"

    return classify


def judge_voice_of(llm: LLMClient) -> Callable[[CorpusItem], str]:
    """The judge's "in persona" over corpus items: ``in`` where it hears the user, ``out`` where the assistant,
    ``invalid`` without a valid answer (counted as a miss)."""
    from evaluation.simfidelity.judges import judge_voice

    def classify(item: CorpusItem) -> str:
        try:
            speaker = judge_voice(llm, item.text, f"corpus/{item.id}")["speaker"]
        except LLMError as e:  # one call failing costs that item (a miss), not the measurement
            log.warning("voice judge on corpus item %s failed: %s", item.id, e)
            return "invalid"
        return {"user": "in", "assistant": "out"}.get(str(speaker), "invalid")

    return classify


def measure_persona_judge(items: Sequence[CorpusItem], classify: Callable[[CorpusItem], str], classifier: str,
                          splits: Sequence[str] = SPLITS) -> list[CorpusScore]:
    """A judge's "in persona" figures per language and split, beside the rules' (:func:`measure_persona`)."""
    return _per_split(items, classify, "in persona", classifier, splits, ("in", "out"))


def persona_rules_fired(item: CorpusItem) -> set[str]:
    """The persona rules that fire on one item (its own language is the user's)."""
    reasons = speaks_as_user(item.text, item.language).reasons
    return {r for r in (rule_of_reason(x) for x in reasons) if r}


def measure_persona(items: Sequence[CorpusItem], splits: Sequence[str] = SPLITS) -> list[CorpusScore]:
    """"In persona" as a whole and each persona rule alone (a rule firing says ``out``) per language and split."""
    out = []
    for split in splits:
        for language in ("en", "zh"):
            chosen = [i for i in items if i.split == split and i.language == language]
            if not chosen:
                continue
            fired = [persona_rules_fired(i) for i in chosen]
            out.append(score(chosen, ["out" if f else "in" for f in fired], rule="in persona", classifier="rule",
                             language=language, split=split, labels=("in", "out")))
            for rule in PERSONA_RULES:
                out.append(score(chosen, ["out" if rule in f else "in" for f in fired], rule=rule,
                                 classifier="rule", language=language, split=split, labels=("in", "out")))
    return out


def render_scores(scores: Sequence[CorpusScore]) -> str:
    """A plain-text table: one line per rule, language and split."""
    lines = [f"{'rule':<28} {'by':<14} {'lang':<4} {'split':<5} {'n':>4} {'acc':>6} {'kappa':>6}  per label "
             "(precision/recall)  reject→accept"]
    for s in scores:
        cells = " ".join(f"{x.label}:{_pct(x.precision)}/{_pct(x.recall)}" for x in s.labels if x.support or x.precision)
        rej = f"{s.reject_as_accept}/{s.rejections}" if s.rejections is not None else ""
        lines.append(f"{s.rule:<28} {s.classifier[:14]:<14} {s.language:<4} {s.split:<5} {s.n:>4} {_pct(s.accuracy):>6} "
                     f"{_num(s.kappa):>6}  {cells}  {rej}")
    return "\n".join(lines)


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"
