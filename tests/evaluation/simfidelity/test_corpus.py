"""The labelled corpora of text the project did not write (tests/sim/corpus: the Mem-PAL authors' example dialogues,
hzp3517/Mem-PAL, quoted with attribution, and natural replies written for the corpus) and the figures measured on
them: the splits stay frozen, κ and the per-label figures are right on hand-made labellings, and ``pal simulate
corpus`` reports every rule per language and split without listing the held-out split's items."""

import hashlib
import json

import pytest

from cli.main import main
from evaluation.simfidelity.corpus import (
    cohen_kappa,
    load_corpus,
    measure_persona,
    measure_stance,
    score,
)
from sim.rulebook import PERSONA_RULES
from sim.stance import STANCES


@pytest.mark.parametrize("name, labels", [("stance", set(STANCES)), ("persona", {"in", "out"})])
def test_the_corpora_are_labelled_sourced_and_split_by_a_frozen_rule(name, labels):
    items = load_corpus(name)
    assert len({i.id for i in items}) == len(items) and len({i.text for i in items}) == len(items)
    for i in items:
        digest = hashlib.sha1(i.text.encode()).hexdigest()
        # the split follows from the text alone: an item cannot be moved into the split a rule is tuned on
        assert i.id == f"{i.language}-{digest[:8]}" and i.split == ("test" if int(digest, 16) % 2 == 0 else "dev")
        assert i.label in labels and i.source.strip()
    for language in ("en", "zh"):
        for split in ("dev", "test"):
            assert len([i for i in items if i.language == language and i.split == split]) >= 8
    assert any("hzp3517/Mem-PAL" in i.source for i in items if i.language == "zh")


def test_stance_items_say_what_they_answer():
    assert all(i.answering in ("opening", "guess", "proposal") for i in load_corpus("stance"))


def test_kappa_is_one_for_agreement_and_zero_for_chance():
    assert cohen_kappa(["a", "b", "a", "b"], ["a", "b", "a", "b"]) == 1.0
    # predicted independent of gold, marginals 1/2 each: observed 1/2 = expected 1/2
    assert cohen_kappa(["a", "a", "b", "b"], ["a", "b", "a", "b"]) == 0.0
    assert cohen_kappa([], []) is None


def test_score_counts_rejections_read_as_acceptance():
    items = [i for i in load_corpus("stance") if i.label == "reject"][:4]
    s = score(items, ["accept", "reject", "none", "accept"], rule="stance", classifier="t", language="en",
              split="dev", labels=STANCES)
    assert (s.rejections, s.reject_as_accept, s.accuracy) == (4, 2, 0.25)
    reject = next(x for x in s.labels if x.label == "reject")
    assert (reject.precision, reject.recall, reject.support) == (1.0, 0.25, 4)
    assert [e["predicted"] for e in s.errors] == ["accept", "none", "accept"]


def test_every_rule_gets_figures_per_language_and_split():
    stance = measure_stance(load_corpus("stance"))
    assert {(s.language, s.split) for s in stance} == {(lang, split) for lang in ("en", "zh")
                                                      for split in ("dev", "test")}
    for s in stance:
        assert 0.0 <= s.accuracy <= 1.0 and s.n == sum(x.support for x in s.labels)
    persona = measure_persona(load_corpus("persona"), splits=("test",))
    assert {s.rule for s in persona} == {"in persona", *PERSONA_RULES}


def test_pal_simulate_corpus_reports_and_keeps_the_held_out_items_unlisted(capsys):
    assert main(["simulate", "corpus", "--split", "all", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["split"] for r in rows} == {"dev", "test"}
    assert all(r["errors"] == [] for r in rows if r["split"] == "test")
    assert main(["simulate", "corpus", "--corpus", "stance"]) == 0
    out = capsys.readouterr().out
    assert "stance" in out and "kappa" in out and " dev " not in out
