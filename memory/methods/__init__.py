"""Memory methods by name (the names ``pal memory`` accepts)."""

from __future__ import annotations

from importlib import import_module

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


def get_method_class(name: str):
    try:
        module, cls = METHODS[name].split(":")
    except KeyError:
        raise ValueError(f"unknown memory method {name!r} (methods: {', '.join(METHODS)})") from None
    return getattr(import_module(module), cls)


def is_oracle(name: str) -> bool:
    return name in ORACLE_METHODS


def display_name(name: str) -> str:
    """A method's name as tables, charts and pickers show it: an oracle says so (``gold (oracle upper bound)``)."""
    return f"{name} ({ORACLE_LABEL})" if is_oracle(name) else name
