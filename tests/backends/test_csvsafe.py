"""CSV cells a spreadsheet cannot run: formulas get a leading quote, plain numbers written as text stay numbers."""

import pytest

from backends.csvsafe import neutralise, rows_to_csv_lines


@pytest.mark.parametrize(("cell", "safe"), [
    ("=1+1", "'=1+1"), ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"), ("@SUM(A1)", "'@SUM(A1)"),
    ("-2+3", "'-2+3"), ("\t=x", "'\t=x"), ("-0.25", "-0.25"), ("+3", "+3"), ("-inf", "'-inf"), (" -1", " -1"),
    ("plain", "plain"), (-3, -3),
])
def test_cells(cell, safe):
    assert neutralise(cell) == safe


def test_rows():
    assert rows_to_csv_lines([["=x", "-1.5"], ["a"]]).splitlines() == ["'=x,-1.5", "a"]
