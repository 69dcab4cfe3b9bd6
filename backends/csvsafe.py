"""CSV that spreadsheets read as data: a cell starting with ``= + - @`` (or a tab or carriage return) is
prefixed with ``'`` so Excel, LibreOffice and Google Sheets never run it as a formula
(``=HYPERLINK(…)`` typed by an annotator stays text). Numbers are left as numbers."""

from __future__ import annotations

import csv
import io
from typing import Any

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutralise(value: Any) -> Any:
    """The cell as a spreadsheet should show it: formula-like text gets a leading ``'`` (a plain number written as
    text, ``-0.25``, is not a formula and stays as it is)."""
    if isinstance(value, str) and value.startswith(_FORMULA_START) and not _plain_number(value):
        return "'" + value
    return value


def _plain_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return text.strip() == text and not text.lower().lstrip("+-").startswith(("inf", "nan"))


def rows_to_csv_lines(rows: list[list[Any]]) -> str:
    """Rows of cells (lists) as CSV, every cell neutralised."""
    buf = io.StringIO()
    csv.writer(buf).writerows([[neutralise(c) for c in row] for row in rows])
    return buf.getvalue()


def rows_to_csv(rows: list[dict]) -> str:
    """Dict rows as CSV (columns in first-seen order), every cell neutralised."""
    if not rows:
        return ""
    fields = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fields)
    writer.writeheader()
    writer.writerows({k: neutralise(v) for k, v in r.items()} for r in rows)
    return buf.getvalue()


def frame_to_csv(frame) -> str:
    """A pandas DataFrame as CSV with every text cell (and column name) neutralised."""
    safe = frame.map(neutralise) if len(frame) else frame
    safe.columns = [neutralise(str(c)) for c in frame.columns]
    return safe.to_csv(index=False)
