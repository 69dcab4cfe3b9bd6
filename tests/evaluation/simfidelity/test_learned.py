"""The learned stance instrument: fitted on the dev split only (never a held-out item, by the corpus's hash rule),
learning a tiny hand-built corpus, keyed by what it was fitted on, and offered wherever a stance instrument is chosen
(the checks' configuration, ``pal simulate corpus --classifier learned``)."""

import hashlib
import json
import typing

import numpy as np
import pytest

from backends.embeddings import HashEmbedder
from cli.main import main
from evaluation.simfidelity.corpus import CorpusItem, load_corpus, measure_stance
from evaluation.simfidelity.learned import (
    cascade_label,
    items_fingerprint,
    learned_stance_of,
    load_spec,
    train,
    training_items,
)
from evaluation.simfidelity.service import stance_fn
from evaluation.simfidelity.stance_instruments import INSTRUMENT_NAMES, INSTRUMENTS
from evaluation.simfidelity.types import SimFidelityConfig
from sim.stance import classify_stance


class RecordingEmbedder(HashEmbedder):
    """The hashing fake, keeping every text it was asked to embed."""

    def __init__(self) -> None:
        super().__init__(dim=256)
        self.seen: list[str] = []

    def embed_documents(self, texts):
        self.seen += texts
        return super().embed_documents(texts)

    embed_queries = embed_documents


def _item(text: str, label: str, split: str = "dev", answering: str = "proposal") -> CorpusItem:
    digest = hashlib.sha1(text.encode()).hexdigest()
    return CorpusItem(id=f"en-{digest[:8]}", split=split, language="en", label=label, text=text,
                      source="written for this test", answering=answering)


def _split_by_hash(text: str) -> str:
    return "test" if int(hashlib.sha1(text.encode()).hexdigest(), 16) % 2 == 0 else "dev"


def test_the_model_is_fitted_on_dev_items_only_and_never_embeds_a_held_out_item():
    items = load_corpus("stance")
    embedder = RecordingEmbedder()
    model = train(items, embedder)
    by_id = {i.id: i for i in items}
    assert model.trained_on and set(model.trained_on) == {i.id for i in items if i.split == "dev"}
    # the split follows from the text's SHA-1 (odd: dev): every trained item is dev by that rule, whatever a file says
    assert all(_split_by_hash(by_id[i].text) == "dev" for i in model.trained_on)
    held_out = {i.text for i in items if i.split == "test"}
    assert held_out and not held_out & set(embedder.seen)
    assert model.training_hash == items_fingerprint(training_items(items, load_spec()))


def test_the_fingerprint_follows_the_training_items_not_the_held_out_ones():
    items = load_corpus("stance")
    base = train(items, HashEmbedder(dim=64)).fingerprint
    test_item = next(i for i in items if i.split == "test")
    dev_item = next(i for i in items if i.split == "dev")
    changed_test = [i.model_copy(update={"label": "none"}) if i is test_item else i for i in items]
    relabelled_dev = [i.model_copy(update={"label": "partial" if i.label != "partial" else "accept"})
                      if i is dev_item else i for i in items]
    assert train(changed_test, HashEmbedder(dim=64)).fingerprint == base
    assert train(relabelled_dev, HashEmbedder(dim=64)).fingerprint != base


def test_it_learns_a_tiny_hand_built_corpus():
    dev = [_item("yes please book it", "accept"), _item("yes great book that", "accept"),
           _item("lovely yes book it now", "accept"),
           _item("no thanks not for me", "reject"), _item("no way not that", "reject"),
           _item("no no not interested", "reject")]
    held_out = [_item("yes book it", "accept", "test"), _item("no not that thanks", "reject", "test")]
    embedder = RecordingEmbedder()
    model = train(dev + held_out, embedder)
    assert set(model.classes) == {"accept", "reject"}
    assert set(embedder.seen) == {i.text for i in dev}  # fitting looked at the dev items only
    assert model.predict([i.text for i in held_out], ["proposal"] * 2) == ["accept", "reject"]
    (en,) = measure_stance(held_out, learned_stance_of(model), "learned", ("test",))
    assert en.accuracy == 1.0 and en.reject_as_accept == 0


def test_a_split_with_a_single_label_is_refused():
    with pytest.raises(ValueError, match="nothing to learn"):
        train([_item("yes please", "accept"), _item("yes great", "accept")], HashEmbedder())


def test_the_cascade_takes_the_rules_verdict_where_they_find_one_else_the_model():
    dev = [_item("yes please book it", "accept"), _item("sure that works", "accept"),
           _item("nah the bus is slow", "reject"), _item("nah too far away", "reject")]
    model = train(dev, HashEmbedder(dim=256))
    ruled = "No, thanks."
    assert classify_stance(ruled, "en").label == "reject"
    assert cascade_label(model, ruled, "en", "proposal") == ("reject", "rule")
    cue_free = "nah the bus"
    if classify_stance(cue_free, "en").label == "none":  # only where the rules find nothing does the model speak
        assert cascade_label(model, cue_free, "en", "proposal") == (model.classify(cue_free, "proposal"), "learned")


def test_the_checks_read_with_the_learned_instrument_when_configured():
    model = train([_item("yes please book it", "accept"), _item("no thanks not for me", "reject")], HashEmbedder())
    read = stance_fn(SimFidelityConfig(classifier="learned"), "en", None, model)
    out = read("How about a walk?", "yes please", "salt", None)
    assert out["classifier"] == "learned" and out["label"] in model.classes and out["model"] == model.fingerprint
    with pytest.raises(ValueError, match="learned instrument"):
        stance_fn(SimFidelityConfig(classifier="cascade"), "en", None, None)


def test_every_registered_instrument_is_a_configuration_choice():
    field = SimFidelityConfig.model_fields["classifier"].annotation
    assert set(typing.get_args(field)) == set(INSTRUMENT_NAMES)
    assert all(INSTRUMENTS[n].description for n in INSTRUMENT_NAMES)


def test_pal_simulate_corpus_measures_the_learned_instrument(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    monkeypatch.setenv("PAL_EMBEDDER", "hash")  # the fake: the figures' meaning, not their size, is under test
    assert main(["simulate", "corpus", "--corpus", "stance", "--classifier", "learned", "--split", "all",
                 "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert {(s["split"], s["language"]) for s in scores} == {(a, b) for a in ("dev", "test") for b in ("en", "zh")}
    assert all(s["classifier"] == "learned" for s in scores)
    assert all(not s["errors"] for s in scores if s["split"] == "test")  # held-out misreadings are never listed
    assert np.isclose(sum(s["n"] for s in scores), len(load_corpus("stance")))


def test_a_run_checked_with_the_learned_instrument_says_so_and_is_stored_apart(monkeypatch):
    from evaluation.simfidelity import service
    from palset.loader import load_dataset
    from tests.conftest import DEMO
    from tests.evaluation.simfidelity.test_service import record, turns

    demo = load_dataset(DEMO)
    emb = HashEmbedder(dim=128)
    monkeypatch.setattr(service, "_FITTED", {})  # this test's embedder fits its own model
    mf = service.matchers(lambda _language: emb)
    run = record(demo, turns(demo))
    learned = service.check_run(run, demo, mf, config=SimFidelityConfig(classifier="learned"))
    rules = service.check_run(run, demo, mf)
    verdict = next(c for t in learned.turns for c in t.checks if c.check == "verdict" and "stance" in c.evidence)
    assert verdict.evidence["stance"]["classifier"] == "learned"
    assert verdict.evidence["stance"]["model"].startswith("learned-v") and learned.key != rules.key
