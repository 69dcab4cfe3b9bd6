"""The learned stance instrument: a logistic regression over sentence embeddings, fitted on the labelled stance
corpus's ``dev`` split only (``tests/sim/corpus/stance.jsonl``) and measured on its frozen ``test`` split.

Why it exists: the stance rules (:mod:`sim.stance`) were tuned on the dev split and generalise poorly to the held-out
one; answering that with more phrases would only tune on more text. The learned instrument reads the same labels
(``accept``/``reject``/``partial``/``none``) from what a sentence embedder makes of the whole turn, plus what the
turn answers (an opening, a guess about the need, a proposal). The cascade reads the rules' verdict where the rules
find one and the learned model's where they find none.

What it reads and how it is fitted are data (``stance_learned.toml``: embedder, features, regularisation, and how
those were chosen — leave-one-out on dev, never the test split). Its training examples are the corpus itself (every
item names its source); nothing is stored but the corpus and the settings, so the model is fitted again in each
process (about a second beside the embedding) and its fingerprint — the settings' version and the SHA-1 of the
training items — keys the fidelity results made with it. The embedder comes from the caller (the composition root
owns embedders): the workspace's embedder of mixed-language data, one vector space for both languages.
"""

from __future__ import annotations

import hashlib
import logging
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from backends.embeddings import Embedder
from evaluation.simfidelity.corpus import CorpusItem
from sim.stance import classify_stance

log = logging.getLogger(__name__)
SPEC_PATH = Path(__file__).with_name("stance_learned.toml")
ANSWERING: tuple[str, ...] = ("opening", "guess", "proposal")
Feature = Literal["embedding", "answering"]


class LearnedSpec(BaseModel):
    """The learned instrument's settings (``stance_learned.toml``)."""

    model_config = ConfigDict(extra="forbid")
    name: str
    version: int
    corpus: str
    train_split: Literal["dev"]  # the held-out split is never trained on
    embedder_language: str  # the workspace embedder of this language's data embeds the turns
    features: list[Feature] = Field(min_length=1)
    C: float = Field(gt=0)
    selected_by: str
    cascade_rule_labels: list[str] = Field(default_factory=lambda: ["accept", "reject", "partial"])


@cache
def load_spec(path: Path = SPEC_PATH) -> LearnedSpec:
    """The settings file; an invalid one is an error naming the file."""
    try:
        with path.open("rb") as f:
            return LearnedSpec.model_validate(tomllib.load(f))
    except (OSError, ValueError) as e:
        log.error("learned stance settings %s: %s", path, e)
        raise ValueError(f"{path.name}: {e}") from e


def training_items(items: Sequence[CorpusItem], spec: LearnedSpec) -> list[CorpusItem]:
    """The items the model is fitted on: the training split's, and only those."""
    return [i for i in items if i.split == spec.train_split]


def items_fingerprint(items: Sequence[CorpusItem]) -> str:
    """SHA-1 (12 hex digits) of the training items' ids, texts and labels, in a fixed order."""
    raw = "\n".join(f"{i.id}\t{i.label}\t{i.answering or ''}\t{i.text}" for i in sorted(items, key=lambda i: i.id))
    return hashlib.sha1(raw.encode()).hexdigest()[:12]


def answering_of(assistant: str, answering: str | None) -> str:
    """What a live turn answers, in the corpus's terms: nothing before it (an opening), a guess, else a proposal."""
    if answering in ANSWERING:
        return answering
    return "opening" if not assistant.strip() else "proposal"


@dataclass
class LearnedStance:
    """A fitted learned instrument: classify turns with :meth:`classify` or :meth:`predict`."""

    spec: LearnedSpec
    embedder: Embedder
    classes: list[str]
    coef: np.ndarray  # classes × features
    intercept: np.ndarray
    trained_on: list[str]  # ids of the training items
    training_hash: str
    _vectors: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def fingerprint(self) -> str:
        """Settings version, embedder and training set: what a stored result made with this model depends on."""
        return f"{self.spec.name}-v{self.spec.version}-{self.embedder.name}-{self.training_hash}"

    def predict(self, texts: Sequence[str], answering: Sequence[str]) -> list[str]:
        """One label per text (``answering``: what each text answers, one of :data:`ANSWERING`)."""
        if not texts:
            return []
        x = features(self.spec, self._embed(list(texts)), list(answering))
        scores = x @ self.coef.T + self.intercept
        return [self.classes[k] for k in np.argmax(scores, axis=1)]

    def classify(self, text: str, answering: str) -> str:
        return self.predict([text], [answering])[0]

    def _embed(self, texts: list[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            for t, v in zip(missing, self.embedder.embed_documents(missing), strict=True):
                self._vectors[t] = v
        return np.vstack([self._vectors[t] for t in texts])


def features(spec: LearnedSpec, vectors: np.ndarray, answering: list[str]) -> np.ndarray:
    """The feature matrix of the spec's features: the embedding, then what each turn answers (one-hot)."""
    parts = []
    if "embedding" in spec.features:
        parts.append(np.asarray(vectors, dtype=np.float64))
    if "answering" in spec.features:
        parts.append(np.array([[a == k for k in ANSWERING] for a in answering], dtype=np.float64))
    return np.hstack(parts)


def train(items: Sequence[CorpusItem], embedder: Embedder, spec: LearnedSpec | None = None) -> LearnedStance:
    """Fit the instrument on the training split of ``items`` (the other items are never looked at)."""
    from sklearn.linear_model import LogisticRegression  # 1–2 s import: only when a model is fitted

    spec = spec or load_spec()
    chosen = training_items(items, spec)
    if len({i.label for i in chosen}) < 2:
        raise ValueError(f"the {spec.train_split} split holds {len(chosen)} items of fewer than two labels: "
                         "nothing to learn")
    vectors = embedder.embed_documents([i.text for i in chosen])
    x = features(spec, vectors, [i.answering or "opening" for i in chosen])
    fitted = LogisticRegression(C=spec.C, max_iter=5000).fit(x, [i.label for i in chosen])
    model = LearnedStance(spec=spec, embedder=embedder, classes=[str(c) for c in fitted.classes_],
                          coef=np.asarray(fitted.coef_), intercept=np.asarray(fitted.intercept_),
                          trained_on=[i.id for i in chosen], training_hash=items_fingerprint(chosen))
    if len(model.classes) == 2:  # a binary fit keeps one row of coefficients; spell out both classes
        model.coef = np.vstack([-model.coef[0], model.coef[0]])
        model.intercept = np.array([-model.intercept[0], model.intercept[0]])
    model._vectors.update({i.text: v for i, v in zip(chosen, vectors, strict=True)})
    log.info("learned stance instrument %s fitted on %d %s items", model.fingerprint, len(chosen), spec.train_split)
    return model


def cascade_label(model: LearnedStance, text: str, language: str, answering: str) -> tuple[str, str]:
    """(label, which instrument gave it): the rules' verdict where it is one of the spec's trusted labels, else the
    learned model's."""
    rule = classify_stance(text, language, "guess" if answering == "guess" else None).label
    if rule in model.spec.cascade_rule_labels:
        return rule, "rule"
    return model.classify(text, answering), "learned"


def learned_stance_of(model: LearnedStance) -> Callable[[CorpusItem], str]:
    """The learned instrument over corpus items (a :data:`.corpus.StanceClassifier`)."""
    return lambda item: model.classify(item.text, item.answering or "opening")


def cascade_stance_of(model: LearnedStance) -> Callable[[CorpusItem], str]:
    """The cascade over corpus items (a :data:`.corpus.StanceClassifier`)."""
    return lambda item: cascade_label(model, item.text, item.language, item.answering or "opening")[0]

