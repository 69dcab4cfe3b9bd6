"""Stored fidelity reports are parsed once per process and row content: a row read again unchanged is the same
report, any change of a row (a new measurement, a judge variant added under the same key and time) is read anew,
the newest report per (user, method, embedder, τ) is chosen without parsing the older ones, and the revision of
what was read changes with any row — what the leaderboard's memo is keyed by."""

from __future__ import annotations

import pytest

from evaluation.fidelity import store as fstore
from evaluation.fidelity.store import ParsedReports
from evaluation.fidelity.types import FidelityConfig, FidelityReport, JudgeFidelity, SessionFidelity
from testkit.workspace import make_workspace


def report(user: str, method: str, recall: float, *, created_at: float, key: str | None = None) -> FidelityReport:
    return FidelityReport(
        fidelity_key=key or f"fidelity-{method}-{user}-{created_at}", dataset="d", user_id=user, method=method,
        layered=True, build_id=f"b-{method}-{user}", stages_done=2, embedder="hash", threshold=0.8,
        config=FidelityConfig(), created_at=created_at,
        sessions=[SessionFidelity(sample_id=f"{user}_s0", position=0, split="history", requirement_recall=recall)])


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setattr(fstore, "PARSED", ParsedReports())  # this test's own memo
    return make_workspace(tmp_path / "pal", env={"PAL_EMBEDDER": "hash"}).fidelity


def count_parses(monkeypatch) -> list[str]:
    parsed: list[str] = []
    real = FidelityReport.model_validate_json

    def counting(text, *args, **kwargs):
        parsed.append(text)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(FidelityReport, "model_validate_json", counting)
    return parsed


def test_an_unchanged_row_is_parsed_once_and_a_changed_one_again(store, monkeypatch):
    first = report("u1", "rag-turn", 0.4, created_at=1.0)
    store.save(first)
    store.save(report("u2", "rag-turn", 0.6, created_at=2.0))
    parsed = count_parses(monkeypatch)
    a, rev_a = store.latest_with_revision("d")
    b, rev_b = store.latest_with_revision("d")
    assert len(parsed) == 2 and rev_a == rev_b and all(x is y for x, y in zip(a, b, strict=True))
    assert store.get(first.fidelity_key) is a[0]  # every read shares the parsed report

    judged = first.model_copy(update={"judge": JudgeFidelity(
        judge_model="m", prompt_version="1", evidence_k=5, statements=1, stated=1, contradicted=0, invalid=0, recall=1.0)})
    store.save(judged)  # same key, same measurement time: only the stored JSON differs
    c, rev_c = store.latest_with_revision("d")
    assert rev_c != rev_a and len(parsed) == 3
    assert c[0].judge is not None and a[0].judge is None  # the new content, and the earlier read left as it was


def test_the_newest_report_per_measurement_is_chosen_without_parsing_the_older(store, monkeypatch):
    store.save(report("u1", "rag-turn", 0.1, created_at=1.0))
    store.save(report("u1", "rag-turn", 0.9, created_at=3.0))
    store.save(report("u1", "gold", 1.0, created_at=2.0))
    parsed = count_parses(monkeypatch)
    latest = store.latest("d")
    assert [(r.method, r.headline.requirement_recall) for r in latest] == [("gold", 1.0), ("rag-turn", 0.9)]
    assert len(parsed) == 2
    assert [r.created_at for r in store.reports("d", "u1", "rag-turn")] == [1.0, 3.0]  # every report, oldest first


def test_the_memo_keeps_to_its_budget(monkeypatch):
    memo = ParsedReports(budget_chars=1)
    texts = [report("u1", "rag-turn", x / 10, created_at=x).model_dump_json() for x in range(3)]
    digests = [memo.parse(t)[0] for t in texts]
    assert len(memo) == 1 and len(set(digests)) == 3
    assert memo.parse(texts[-1])[1].headline.requirement_recall == pytest.approx(0.2)
