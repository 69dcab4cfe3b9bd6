"""Stored instrument measurements on the corpora (evaluation.simfidelity.instruments, migration 151) and the advice the
Evaluate page gives: the judge is offered only where it reads the held-out split at least as well in every language,
better in one, and reads no more rejections as acceptance."""

from evaluation.simfidelity.corpus import CorpusScore, load_corpus, measure_stance
from evaluation.simfidelity.instruments import InstrumentScores, advice
from sim.rulebook import rulebook_version
from testkit.workspace import make_workspace


def held_out(accuracy: dict[str, float], reject_as_accept: int = 0) -> list[CorpusScore]:
    return [CorpusScore(rule="stance", classifier="x", language=lang, split="test", n=10, accuracy=acc, kappa=None,
                        labels=[], confusion={}, rejections=10, reject_as_accept=reject_as_accept)
            for lang, acc in accuracy.items()]


def scores(instrument: str, accuracy: dict[str, float], reject_as_accept: int = 0, model: str = "") -> InstrumentScores:
    return InstrumentScores(instrument=instrument, model=model, version="v", scores=held_out(accuracy, reject_as_accept))


def test_the_judge_is_offered_only_where_it_reads_better_everywhere():
    rules = scores("rule", {"en": 0.5, "zh": 0.8}, reject_as_accept=2)
    better = advice(rules, scores("judge", {"en": 0.7, "zh": 0.8}, 1, "m"))
    assert better is not None and better.judge_better and "m" in better.text
    assert not advice(rules, scores("judge", {"en": 0.9, "zh": 0.7}, 0, "m")).judge_better  # worse in one language
    assert not advice(rules, scores("judge", {"en": 0.9, "zh": 0.9}, 3, "m")).judge_better  # more reject→accept
    assert advice(None, scores("judge", {"en": 0.9}, 0, "m")) is None and advice(rules, None) is None


def test_measurements_are_stored_and_the_newest_is_read(tmp_path):
    ws = make_workspace(tmp_path)
    measured = measure_stance(load_corpus("stance"), splits=("test",))
    first = InstrumentScores(instrument="rule", version=rulebook_version(), scores=measured, created_at=1.0)
    ws.instruments.save(first)
    ws.instruments.save(scores("judge", {"en": 0.1}, model="m").model_copy(update={"created_at": 2.0}))
    assert ws.instruments.latest("rule", "", rulebook_version()) == first
    assert ws.instruments.latest("rule", "", "another rulebook") is None
    assert ws.instruments.latest("judge", "m").held_out()["en"].accuracy == 0.1
    assert set(first.held_out()) == {"en", "zh"}


def test_pal_simulate_corpus_save_stores_what_the_page_reads(tmp_path, monkeypatch, capsys):
    from cli.main import main
    from studio.workspace import Workspace

    monkeypatch.setenv("PAL_HOME", str(tmp_path / "home"))
    assert main(["simulate", "corpus", "--corpus", "stance", "--save"]) == 0
    assert "stored the stance figures of rule" in capsys.readouterr().err
    stored = Workspace(tmp_path / "home").instruments.latest("rule", "", rulebook_version())
    assert stored is not None and set(stored.held_out()) == {"en", "zh"}
