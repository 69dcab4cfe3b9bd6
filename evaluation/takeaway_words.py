"""The words and numbers of the leaderboards' takeaways: the typed records (:class:`Estimate`, :class:`Headline`,
:class:`Takeaway`), the data file of figure names, units and sentences in English and Chinese
(``evaluation/takeaways.toml``, the one place tables take their column names from: :func:`figure_label`), how a
figure and its 95% interval are written, and where an estimate stands against references and peers ("clearly"
above or below: the two 95% intervals do not overlap). The per-board takeaways are in :mod:`evaluation.takeaways`.
"""

from __future__ import annotations

import logging
import math
import tomllib
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from evaluation.fidelity.references import REFERENCES
from memory.methods import get_method_class
from palset.names import PROJECT_ROOT

log = logging.getLogger(__name__)

WORDS = Path(__file__).with_name("takeaways.toml")
Language = Literal["en", "zh"]
Board = Literal["fidelity", "faireval", "single_turn", "simulator"]
LANGUAGES: tuple[Language, ...] = ("en", "zh")
FIDELITY_FIGURES = ("requirement_recall", "text_recall")  # the headline figure, the first one measured
REFERENCE_SIMULATORS = ("replay", "always-accept", "random-verdict")
Z95 = 1.959963984540054


class Estimate(BaseModel):
    """A figure with its 95% interval (``low``/``high`` None: no interval) over ``n`` observations."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    value: float | None
    low: float | None = None
    high: float | None = None
    n: int = 0

    def bounds(self) -> tuple[float, float] | None:
        """The interval, or the value itself where there is none (None: not measured)."""
        if self.value is None:
            return None
        if self.low is None or self.high is None or math.isnan(self.low) or math.isnan(self.high):
            return self.value, self.value
        return self.low, self.high

    def overlaps(self, other: Estimate) -> bool:
        """Whether the two intervals share a point: the two figures cannot be told apart."""
        a, b = self.bounds(), other.bounds()
        return a is not None and b is not None and a[0] <= b[1] and b[0] <= a[1]

    def clearly_below(self, other: Estimate) -> bool:
        a, b = self.bounds(), other.bounds()
        return a is not None and b is not None and a[1] < b[0]


class Headline(BaseModel):
    """One method's takeaway: its main figure with the interval, and where it stands."""

    model_config = ConfigDict(extra="forbid")
    board: Board
    subject: str  # the method, simulator or pair as stored
    label: str  # as people read it
    figure: str
    estimate: Estimate
    text: str
    below: str | None = None  # the weakest reference clearly above it
    above: str | None = None  # the strongest reference clearly below it
    apart_from: list[str] = []  # references (or the other side) it cannot be told apart from
    peers: list[str] = []  # other methods it cannot be told apart from
    users: list[str] = []  # the users its figure is over
    paired: bool = False  # compared with the references on its own users (the board's are over others too)


class ReferenceNote(BaseModel):
    """A reference row, collapsed under the methods: its name and what it means, in one line."""

    model_config = ConfigDict(extra="forbid")
    name: str
    label: str
    meaning: str


class Takeaway(BaseModel):
    """What a board says, in words: the headlines, which methods cannot be told apart, the reference rows' meaning,
    or (``empty``) why there is nothing to rank and what to run."""

    model_config = ConfigDict(extra="forbid")
    board: Board
    language: Language = "en"
    headlines: list[Headline] = []
    ties: list[str] = []
    note: str = ""
    references: list[ReferenceNote] = []
    empty: str | None = None
    version: int


# ---------------------------------------------------------------- words


@cache
def words() -> dict[str, Any]:
    """The data file of figure names, units and sentences (read once per process)."""
    return tomllib.loads(WORDS.read_text(encoding="utf-8"))


def words_version() -> int:
    return int(words()["version"])


def dataset_argument(root: Path) -> str:
    """A dataset folder as the boards' commands name it (``--dataset``): relative to the project where it lies
    inside it."""
    resolved = root.resolve()
    try:
        shown = str(resolved.relative_to(PROJECT_ROOT))
    except ValueError:
        shown = str(resolved)
    return shown.replace("`", "")


def language_of(code: str | None) -> Language:
    """A dataset's language as the takeaways speak it (anything but Chinese reads English)."""
    return "zh" if (code or "").lower().startswith("zh") else "en"


def say(key: str, language: Language, **values: Any) -> str:
    """One sentence of the data file, filled in."""
    return str(words()["sentences"][language][key]).format(**values)


def figure_label(name: str, language: Language = "en") -> str:
    """A figure's readable name (the one place table headers come from); the name itself when none is written."""
    entry = words()["figures"].get(name)
    return str(entry[language]) if entry else name


def figure_unit(name: str) -> str:
    entry = words()["figures"].get(name)
    return str(entry["unit"]) if entry else "score"


def format_value(name: str, value: float | None) -> str:
    """A figure as its unit reads: a share as a percentage, κ with two decimals, a score with one."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    unit = figure_unit(name)
    if unit == "share":
        return f"{value:.0%}"
    if unit == "signed":
        return f"{value:+.0%}"
    if unit == "kappa":
        return f"{value:.2f}"
    if unit == "signed_score":
        return f"{value:+.3f}"
    return f"{value:.1f}"


def format_ci(name: str, estimate: Estimate, language: Language) -> str:
    """The 95% interval in words, or that there is none (one observation)."""
    if estimate.value is None:
        return "n/a"
    if estimate.low is None or estimate.high is None or estimate.n < 2:
        return say("no_ci", language).strip(" ()（）")
    return say("ci", language, low=format_value(name, estimate.low), high=format_value(name, estimate.high))


def cell_text(name: str, estimate: Estimate) -> str:
    """A table cell: the figure with its interval beside it ("28% [12%–44%]"), or "n/a"."""
    if estimate.value is None:
        return "n/a"
    b = estimate.bounds()
    shown = format_value(name, estimate.value)
    if b is None or b[0] == b[1] or estimate.n < 2:
        return shown
    return f"{shown} [{format_value(name, b[0])}–{format_value(name, b[1])}]"


def join_names(names: Sequence[str], language: Language) -> str:
    return say("and", language).join(names)


def method_label(method: str) -> str:
    """A method as people read it (its registered label), or the stored name for one this code does not know."""
    try:
        return str(get_method_class(method).label)
    except ValueError:
        log.info("no registered label for method %r: shown by its stored name", method)
        return method


def reference_label(name: str, language: Language) -> str:
    zh = words().get("references", {}).get(name, {}).get("zh")
    return str(zh) if language == "zh" and zh else REFERENCES[name].label if name in REFERENCES else name


def estimate_of(cell: dict | None) -> Estimate:
    """A board cell ``{"value", "ci": [low, high], "n"}`` as an :class:`Estimate`."""
    if not cell or cell.get("value") is None:
        return Estimate(value=None)
    low, high = (list(cell.get("ci") or [None, None]) + [None, None])[:2]
    return Estimate(value=float(cell["value"]), low=number_or_none(low), high=number_or_none(high), n=int(cell.get("n") or 0))


def number_or_none(x: Any) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def wilson(passed: int, n: int) -> Estimate:
    """A share with its Wilson 95% interval (the simulator board pools turns into counts, not a bootstrap)."""
    if n <= 0:
        return Estimate(value=None)
    p = passed / n
    centre = (p + Z95 ** 2 / (2 * n)) / (1 + Z95 ** 2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95 ** 2 / (4 * n * n)) / (1 + Z95 ** 2 / n)
    return Estimate(value=p, low=max(0.0, centre - half), high=min(1.0, centre + half), n=n)


# ---------------------------------------------------------------- standing against references and peers


def standing(est: Estimate, refs: dict[str, Estimate]) -> tuple[str | None, str | None, list[str]]:
    """(weakest reference clearly above, strongest reference clearly below, references that overlap)."""
    above_me = [(e.value, n) for n, e in refs.items() if est.clearly_below(e) and e.value is not None]
    below_me = [(e.value, n) for n, e in refs.items() if e.clearly_below(est) and e.value is not None]
    apart = [n for n, e in refs.items() if est.overlaps(e)]
    return (min(above_me)[1] if above_me else None, max(below_me)[1] if below_me else None, apart)


def tie_groups(estimates: dict[str, Estimate]) -> list[list[str]]:
    """Subjects that cannot be told apart: groups in which every pair's intervals overlap, built greedily in the
    given order, then each overlapping pair no group holds (a chain A~B~C where A and C are apart: [A, B], [B, C])."""
    names = [n for n, e in estimates.items() if e.value is not None]
    groups: list[list[str]] = []
    for n in names:
        home = next((g for g in groups if all(estimates[n].overlaps(estimates[x]) for x in g)), None)
        if home is None:
            groups.append([n])
        else:
            home.append(n)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if estimates[a].overlaps(estimates[b]) and not any(a in g and b in g for g in groups):
                groups.append([a, b])
    return [g for g in groups if len(g) > 1]


def peers(name: str, estimates: dict[str, Estimate]) -> list[str]:
    return [n for n, e in estimates.items() if n != name and estimates[name].overlaps(e)]


def tie_sentences(estimates: dict[str, Estimate], labels: dict[str, str], figure: str,
                   language: Language) -> list[str]:
    return [say("tied_methods", language, names=join_names([labels[n] for n in g], language),
                figure=figure_label(figure, language)) for g in tie_groups(estimates)]
