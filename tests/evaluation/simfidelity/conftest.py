"""A table embedder (each text its chosen vector, so every cosine is known) and a topic's gold written by hand."""

from __future__ import annotations

import numpy as np
import pytest

from evaluation.simfidelity.gold import TopicGold
from evaluation.simfidelity.match import Matcher


class TableEmbedder:
    """Texts with a vector of their own (unit axes by default): cos = 1 for the same axis, 0 otherwise."""

    name = "table"  # no calibrated τ: the fallback 0.5

    def __init__(self, axes: dict[str, int | list[float]], dim: int = 12):
        self.axes, self.dim = axes, dim
        self.calls = 0

    def _vec(self, text: str) -> np.ndarray:
        axis = self.axes.get(text, self.dim - 1)
        if isinstance(axis, list):
            return np.array(axis + [0.0] * (self.dim - len(axis)), dtype=np.float32)
        v = np.zeros(self.dim, dtype=np.float32)
        v[axis] = 1.0
        return v

    def embed_documents(self, texts):
        self.calls += 1
        return np.vstack([self._vec(t) for t in texts])

    embed_queries = embed_documents


QUERY, REQUIREMENT, NEED1, NEED2 = "How do I sort the rota?", "She needs a fair Christmas swap.", "A swap partner", "Sleep"
POS, NEG, NEU = "Swap like for like with Aisha.", "Take unpaid leave.", "Ask the manager."
EVIDENCE = "She messaged Aisha about Boxing Day."


def gold(language="en", candidates=None, profile=True) -> TopicGold:
    from palset.models import Profile

    prof = Profile.model_validate({"name": "Megan Ashworth", "gender": "Female", "age": 29, "occupation": "nurse",
                                   "health status": "fine", "family members": "brother", "hobbies": "film",
                                   "personality": {t: "medium" for t in ("Openness", "Conscientiousness",
                                                                         "Extraversion", "Agreeableness",
                                                                         "Neuroticism")}})
    return TopicGold(language=language, query=QUERY, requirement=REQUIREMENT, needs=[NEED1, NEED2],
                     evidences=[[EVIDENCE], []],
                     candidates=candidates if candidates is not None else [(POS, "pos"), (NEG, "neg"), (NEU, "neu")],
                     profile=prof if profile else None, name="Megan Ashworth", own_turns=None)


@pytest.fixture
def table():
    """(embedder, matcher): the gold texts on axes 0–6; add a text's axis with ``embedder.axes[text] = n``."""
    emb = TableEmbedder({QUERY: 0, REQUIREMENT: 1, NEED1: 2, NEED2: 3, POS: 4, NEG: 5, NEU: 6, EVIDENCE: 7})
    return emb, Matcher(emb)
