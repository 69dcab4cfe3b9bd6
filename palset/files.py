"""Where each file of the PAL-Set release layout lives, and robust JSON reading.

The Chinese release names files plainly (``background/background.json``); the English one adds
``_en`` (``background/background_en.json``, ``input_en.json``). Either is accepted.

Reading never raises for content: a file over ``PAL_MAX_JSON_MB`` (default 1024 MB), one that is not
UTF-8 or not JSON, or one nested deeper than a parser can follow (about 1,000 levels) is a problem
naming the file, so a bad file never takes the app down.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from palset.problems import Problem

# logical name → path stem relative to the dataset root (".json" or "_en.json" is appended)
LAYOUT: dict[str, str] = {
    "profiles": "background/background",
    "requirement_types": "requirement/requirement",
    "preferences": "preference/preference",
    "samples": "input",
    "situations": "situation/situation",
    "timeline": "timeline/timeline",
    "requirement_framework": "dialogue_framework/requirement/requirement_framework",
    "candidate_solutions": "dialogue_framework/candidate_solution/candidate_solution",
    "solution_preference": "dialogue_framework/solution_preference/solution_preference",
    "dialogue_template": "dialogue_template",
}

# What a person loses when a file is absent (shown by the app and by ``pal validate``).
MISSING_MEANS: dict[str, str] = {
    "profiles": "no profiles or Big Five",
    "requirement_types": "no requirement types",
    "preferences": "no pos/neg preferences",
    "samples": "no sessions: logs, dialogues and topics are unavailable",
    "situations": "topics cannot be linked to requirement types and situations",
    "timeline": "no monthly timeline",
    "requirement_framework": "implicit needs have no evidences",
    "candidate_solutions": "candidate solutions are only those stored in the sessions",
    "solution_preference": "no reasons for liked/disliked solutions",
    "dialogue_template": "no per-topic act schedule (it is derived from the topics instead)",
}


def locate(root: Path) -> dict[str, Path | None]:
    """Map each logical file to its path under ``root`` (``None`` when absent)."""
    found: dict[str, Path | None] = {}
    for name, stem in LAYOUT.items():
        found[name] = next(
            (p for p in (root / f"{stem}.json", root / f"{stem}_en.json") if p.is_file()),
            None,
        )
    return found


def _loads(text: str) -> object:
    """orjson when installed (3x faster on PAL-Set-sized files); json's messages for errors."""
    try:
        import orjson
    except ImportError:  # pragma: no cover - orjson ships with chromadb
        return json.loads(text)
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)  # re-parse to raise json's error with line and column


DEFAULT_MAX_JSON_MB = 1024


def max_json_bytes() -> int:
    try:
        return int(float(os.environ.get("PAL_MAX_JSON_MB") or DEFAULT_MAX_JSON_MB) * 1e6)
    except ValueError:
        return int(DEFAULT_MAX_JSON_MB * 1e6)


def read_json(path: Path, shown: str) -> tuple[object | None, list[Problem]]:
    """Read a JSON file; never raises for bad content, returns problems instead."""
    try:
        size, cap = path.stat().st_size, max_json_bytes()
        if size > cap:
            return None, [Problem(shown, "", f"is {size / 1e6:,.0f} MB, more than the {cap / 1e6:,.0f} MB this server "
                                             "reads (PAL_MAX_JSON_MB)")]
        raw = path.read_bytes()
    except OSError as e:
        return None, [Problem(shown, "", f"cannot be read: {e.strerror or e}")]
    if not raw.strip():
        return None, [Problem(shown, "", "file is empty")]
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        return None, [
            Problem(shown, "", f"not valid UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start}); save the file as UTF-8")
        ]
    try:
        return _loads(text), []
    except json.JSONDecodeError as e:
        return None, [Problem(shown, "", f"invalid JSON: {e.msg} at line {e.lineno} column {e.colno}")]
    except RecursionError:
        return None, [Problem(shown, "", "nested too deeply to read (more than about 1,000 levels of [ ] or { })")]
