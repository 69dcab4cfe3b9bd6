"""Which PAL-Set files each fidelity figure (and each part of the gold memory) needs.

A partial release still gets every figure its files allow; the others are named with the file that
would make them measurable, here and in the app and the CLI.
"""

from __future__ import annotations

from pydantic import BaseModel

from palset.dataset import Dataset
from palset.files import LAYOUT

# figure → the logical files (palset.files.LAYOUT) it needs, and what it reads from them
NEEDS: dict[str, tuple[tuple[str, ...], str]] = {
    "situation": (("samples", "situations"),
                  "the logs (input.json) and the situation time spans that place each log (situation/situation.json)"),
    "requirement": (("samples",), "the history topics' gold requirements (input.json)"),
    "preference": (("samples", "situations", "preferences"),
                   "each history topic's requirement type (via situation/situation.json) and its pos/neg "
                   "preference (preference/preference.json)"),
    "background": (("profiles",), "the profile's occupation, health, family and hobbies (background/background.json); "
                                  "situation/situation.json adds the latest situation per aspect"),
    "text": (("samples",), "every gold statement above that the files allow (input.json at least)"),
}


class FigureAvailability(BaseModel):
    figure: str
    available: bool
    needs: list[str]  # release paths, e.g. "situation/situation.json"
    missing: list[str]
    reads: str


def release_path(logical: str) -> str:
    return f"{LAYOUT[logical]}.json"


def availability(dataset: Dataset) -> list[FigureAvailability]:
    """For each fidelity figure: whether this dataset's files allow it, and which files it needs."""
    out = []
    for figure, (needs, reads) in NEEDS.items():
        missing = [release_path(n) for n in needs if dataset.files.get(n) is None]
        out.append(FigureAvailability(figure=figure, available=not missing, needs=[release_path(n) for n in needs],
                                      missing=missing, reads=reads))
    return out


def unavailable_reasons(dataset: Dataset) -> dict[str, str]:
    """figure → a sentence naming the missing files, for the figures this dataset cannot give."""
    return {a.figure: f"needs {', '.join(a.missing)} ({a.reads})" for a in availability(dataset) if not a.available}
