"""Memory methods by name (the names ``pal memory`` accepts)."""

from __future__ import annotations

import logging
from functools import cache
from importlib import import_module

log = logging.getLogger(__name__)

# name → "module:Class"; modules are imported when a method is used
METHODS: dict[str, str] = {
    "h2memory": "memory.methods.h2memory:H2Memory",
    "vanilla": "memory.methods.simple:Vanilla",
    "vanilla-log": "memory.methods.simple:VanillaWithLog",
    "full-history": "memory.methods.simple:FullHistory",
    "rag-turn": "memory.methods.rag:TurnRAG",
    "rag-session": "memory.methods.rag:SessionRAG",
    "memorybank": "memory.methods.memorybank:MemoryBank",
    "recursum": "memory.methods.recursum:RecurSum",
    "agentic": "memory.methods.agentic:AgenticMemory",
    "plum": "memory.methods.plum:Plum",
    "gold": "memory.methods.gold:GoldMemory",
}
# methods built from the dataset's annotations: an oracle upper bound, labelled as such wherever a method is named
ORACLE_METHODS: frozenset[str] = frozenset({"gold"})
ORACLE_LABEL = "oracle upper bound"


# baselines of the papers that are not implemented here, with the reason (see FIDELITY.md)
NOT_IMPLEMENTED: dict[str, str] = {
    "conditionmem": "ConditionMem (a baseline of Mem-PAL's Appendix Table 11) has no released code or exact "
                    "description to reimplement from",
}


def get_method_class(name: str):
    try:
        module, cls = METHODS[name].split(":")
    except KeyError:
        why = NOT_IMPLEMENTED.get(name.lower())
        if why:
            raise ValueError(f"memory method {name!r} is not implemented: {why}") from None
        raise ValueError(f"unknown memory method {name!r} (methods: {', '.join(METHODS)})") from None
    return getattr(import_module(module), cls)


@cache
def method_availability() -> dict[str, str | None]:
    """Every registered method → None when it imports in this install, else why not (an optional dependency
    missing, a broken module). Computed once per process; failures are logged with their traceback."""
    out: dict[str, str | None] = {}
    for name in METHODS:
        try:
            get_method_class(name)
        except Exception as e:  # any import-time failure makes the method unavailable, never the page
            log.warning("memory method %s is unavailable", name, exc_info=True)
            out[name] = f"{type(e).__name__}: {e}"
        else:
            out[name] = None
    return out
def is_oracle(name: str) -> bool:
    return name in ORACLE_METHODS


def display_name(name: str) -> str:
    """A method's name as tables, charts and pickers show it: an oracle says so (``gold (oracle upper bound)``)."""
    return f"{name} ({ORACLE_LABEL})" if is_oracle(name) else name
