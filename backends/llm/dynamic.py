"""Output models built at run time: enums of this call's ids, lists of a model made a moment ago.

Bounded schemas often depend on the call (the ids of this window's logs, this run's months), so their
types exist only at run time. These helpers give them to ``pydantic.create_model`` in one place, where
the type checker is told once that a run-time type is meant.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal


def one_of(values: Iterable[str]) -> Any:
    """``Literal[v1, v2, …]`` of these values (a JSON-schema enum)."""
    return Literal[tuple(values)]  # values known only at run time


def list_of(item: Any) -> Any:
    """``list[item]`` for a type made at run time (a model from ``create_model``, a :func:`one_of`)."""
    return list[item]  # a run-time element type


def field(tp: Any, spec: Any = ...) -> tuple[Any, Any]:
    """A ``create_model`` field definition ``(type, default or Field)`` whose type is made at run time."""
    return (tp, spec)
