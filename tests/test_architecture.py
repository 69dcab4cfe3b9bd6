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
                                "ReviewStore", "AccountStore", "SessionStore", "SynthStore", "ChromaStore", "LocalServers", "Database",
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


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_imports(path: Path, modules: set[str]) -> set[str]:
    """The project modules ``path`` imports anywhere in the file (type-checking and function-level imports
    included): ``from a.b import c`` counts as ``a.b.c`` when that is a module, else as ``a.b``."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                out.add(sub if sub in modules else node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return out & modules


def import_graph(packages: list[str]) -> dict[str, set[str]]:
    files = {_module_name(p): p for package in packages for p in _sources(package)}
    return {name: _module_imports(path, set(files)) - {name} for name, path in files.items()}


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return circles


def test_import_circles_are_found():
    graph = {"a.x": {"a.y"}, "a.y": {"a.z"}, "a.z": {"a.x"}, "a.w": {"a.x"}, "a.v": set()}
    assert import_circles(graph) == [["a.x", "a.y", "a.z"]]
    assert import_circles({"a.x": {"a.y"}, "a.y": set()}) == []


def test_no_two_files_import_each_other_even_through_others():
    """A circle of files (type-only and function-level imports count) is a module hiding in two: split out what
    both need, or name what one needs of the other as a Protocol on its side."""
    assert import_circles(import_graph([p for p in ALLOWED if p != "bench"])) == []


def _ui_page_packages() -> set[str]:
    return {p.parent.name for p in (ROOT / "ui").glob("*/__init__.py")}


def test_a_page_package_imports_no_other_page_package_and_shared_modules_import_none():
    """``ui/<page>/`` serves one page: it may import itself and the shared ``ui/*.py`` modules, never another
    page's package; shared modules import no page package (what two pages need moves down to them)."""
    pages = _ui_page_packages()
    assert {"memory", "simulate", "evaluate", "review", "generate", "settings"} <= pages
    modules = {_module_name(p) for p in _sources("ui")}
    wrong = []
    for path in _sources("ui"):
        rel = path.relative_to(ROOT / "ui").parts
        own = rel[0] if len(rel) > 1 else None
        for target in _module_imports(path, modules):
            parts = target.split(".")
            if len(parts) > 2 and parts[1] in pages and parts[1] != own:
                wrong.append(f"{path.relative_to(ROOT)} imports {target}")
    assert wrong == []


def test_each_page_script_renders_through_its_own_package():
    """``pages/<name>.py`` imports its page package (if it has one) and shared modules only."""
    pages = _ui_page_packages()
    modules = {_module_name(p) for p in _sources("ui")}
    wrong = []
    for path in sorted((ROOT / "pages").glob("*.py")):
        for target in _module_imports(path, modules):
            parts = target.split(".")
            if len(parts) > 2 and parts[1] in pages and parts[1] != path.stem:
                wrong.append(f"{path.relative_to(ROOT)} imports {target}")
    assert wrong == []


def test_every_state_file_is_spelt_once():
    """The home's file names (``backends/paths.py``) appear as string literals nowhere else in the code, scripts and
    benches included: a name spelt twice drifts."""
    from backends import paths

    names = {paths.RUNS_DB, paths.CACHE_DB, paths.SESSION_KEY}
    wrong = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in (".venv", "tests") or rel == Path("backends/paths.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
                wrong.append(f"{rel}:{node.lineno} spells {node.value!r}")
    assert wrong == []
