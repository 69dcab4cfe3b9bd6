"""The validation of the rule stance classifier on the demo users' own verdicts (gold from the candidate each
proposal matches; here matched by the bag-of-words hash embedder, so English users only)."""

import pytest

from backends.embeddings import HashEmbedder
from evaluation.simfidelity.service import matchers
from evaluation.simfidelity.validation import dataset_items, validate
from palset.loader import load_dataset
from sim.stance import classify_stance
from tests.conftest import DEMO


@pytest.mark.slow(seconds=8)
def test_rule_classifier_agrees_with_the_demo_users_verdicts():
    dataset = load_dataset(DEMO)
    dataset.users = {k: v for k, v in dataset.users.items() if v.language == "en"}
    emb = HashEmbedder()
    items = dataset_items(dataset, matchers(lambda _language: emb))
    assert len(items) >= 100 and {i["gold"] for i in items} == {"accept", "reject"}
    report = validate(items, lambda _a, text, lang: classify_stance(text, lang).label)
    assert report["accuracy"] >= 0.9, report["misses"][:5]
    assert sum(report["confusion"].values()) == report["n"] == len(items)
    assert report["by_language"]["en"]["n"] == report["n"]
