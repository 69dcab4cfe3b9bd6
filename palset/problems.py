"""Problems found while reading a dataset: one per offending value, with file and JSON path."""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

Level = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    """``<file>: <json path>: <message>``, the unit of every validation report."""

    file: str
    path: str
    message: str
    level: Level = "error"

    def __str__(self) -> str:
        prefix = "warning: " if self.level == "warning" else ""
        return f"{self.file}: {self.path or '(top level)'}: {prefix}{self.message}"


def format_path(loc: tuple[object, ...]) -> str:
    """Render a location tuple as ``0003.history[4].logs[12].timestamp``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


_SHORT = reprlib.Repr()  # depth-bounded (maxlevel 6): for values too deeply nested for repr()


def _message(err: Mapping[str, Any]) -> str:
    kind, msg, value = err.get("type", ""), err.get("msg", ""), err.get("input")
    if msg.startswith("Value error, "):
        return msg[len("Value error, ") :]
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return "unknown field"
    try:
        shown = repr(value)
    except RecursionError:  # a value nested ~1,000 levels deep: show its outer levels only
        shown = _SHORT.repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{shown}: {msg[0].lower() + msg[1:]}" if msg else shown


def problems_from_validation(file: str, prefix: tuple[object, ...], exc: ValidationError) -> list[Problem]:
    """Turn a pydantic error into one :class:`Problem` per failing value."""
    return [Problem(file, format_path(prefix + tuple(e["loc"])), _message(e)) for e in exc.errors()]
