"""Batch exports: a formula typed by an annotator stays text in a spreadsheet."""

import csv
import io

from review.export import answer_rows, to_csv
from tests.review.conftest import make_batch


def test_answers_csv_neutralises_formulas_typed_by_annotators(store):
    batch = make_batch(store, n=2, annotators=("ann1",), overlap=1)
    typed = ['=HYPERLINK("https://evil.example","click")', "+1 call me", "-dash", "@cmd", "fine, thanks"]
    for i, text in enumerate(typed):
        store.answer(batch, 1 + i % 2, "ann1", f"correction{i}", text)
    cells = [r["value"] for r in csv.DictReader(io.StringIO(to_csv(answer_rows(store, batch))))]
    assert cells == ["'" + t for t in typed[:4]] + [typed[4]]
    assert all(not c.startswith(("=", "+", "-", "@")) for c in cells)
