"""The rules ARCHITECTURE.md states, checked on the source: the import layers, and that only the composition
root constructs stores, caches, vector stores, local servers and LLM clients."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

DOMAIN = {"palset", "backends", "memory", "review", "synth", "sim", "evaluation"}
RUNNING = {"jobs", "protocol"}  # the job engine (above backends only) and experiments (above the domains)
ALLOWED = {  # package → the packages it may import (its own is always allowed)
    "palset": set(),
    "backends": set(),
    "jobs": {"backends"},
    "memory": {"backends", "palset"},
    "review": {"backends", "palset"},
    "synth": {"backends", "palset"},
    "sim": {"backends", "palset", "memory"},
    "evaluation": {"backends", "palset", "memory", "sim", "review"},
    "protocol": DOMAIN | {"jobs"},
    "studio": DOMAIN | {"jobs"},
    "ui": DOMAIN | RUNNING | {"studio"},
    "cli": DOMAIN | RUNNING | {"studio"},
    "pages": {"ui"},
    "testkit": DOMAIN | RUNNING | {"studio"},
    "bench": DOMAIN | RUNNING | {"studio", "ui", "testkit"},
}
CONSTRUCTED_ONLY_BY_THE_ROOT = {"RunStore", "ResponseCache", "MemoryStore", "SimStore", "EvalStore", "PersonaMemStore",
                                "ReviewStore", "AccountStore", "SynthStore", "ChromaStore", "LocalServers", "Database",
                                "LLMClient", "JobStore", "JobEngine", "Limiters"}


def _sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _imported(tree: ast.AST) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
    return out


def test_every_package_imports_only_from_the_layers_below_it():
    known = set(ALLOWED)
    wrong = []
    for package, allowed in ALLOWED.items():
        for path in _sources(package):
            for target in _imported(ast.parse(path.read_text(encoding="utf-8"))) & (known | {"tests"}):
                if target != package and target not in allowed:
                    wrong.append(f"{path.relative_to(ROOT)} imports {target}")
    assert wrong == []


def test_only_the_composition_root_constructs_stores_and_clients():
    wrong = []
    for package in ALLOWED:
        if package in ("studio", "testkit"):
            continue
        for path in _sources(package):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                        and node.func.id in CONSTRUCTED_ONLY_BY_THE_ROOT:
                    wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} constructs {node.func.id}")
    assert wrong == []


def test_every_type_ignore_names_its_error_code_and_a_reason():
    import re

    pattern = re.compile(r"#\s*type:\s*ignore(?P<rest>.*)$")
    bare = []
    for package in ALLOWED:
        for path in _sources(package):
            for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                m = pattern.search(line)
                if m and not re.match(r"\[[a-z, _-]+\]\s+#\s*\S", m.group("rest")):
                    bare.append(f"{path.relative_to(ROOT)}:{no}")
    assert bare == []
