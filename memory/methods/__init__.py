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
}


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
