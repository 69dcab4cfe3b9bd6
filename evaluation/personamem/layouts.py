"""The file layouts PersonaMem-v2 is published in, read into plain item dicts (validated by the loader).

* **raw persona file** (``data/raw_data/raw_data_<date>_persona<i>.json``): the persona wrapped in its id,
  ``{"<id>": {…persona…, "conversations": {scenario: [item, …]}}}`` — one persona, or several from
  which one is chosen by id;
* **unwrapped persona** (a persona object with ``conversations``), as the shared excerpt's profile;
* **item wrappers** ``{"items": [{conversation_scenario, position_in_scenario, item}, …]}`` (the shared
  sample), or a list of such wrappers or of bare items;
* **benchmark CSV splits** (``benchmark/text/benchmark.csv``, ``train.csv``, ``val.csv``): one row per
  question over many personas (``persona_id``), ``user_query`` a Python dict literal, ``incorrect_answers``
  a JSON string, ``sensitive_info`` a ``True``/``False`` flag (not the secret itself), ``updated`` a flag,
  empty cells for absent values.

Every error is a :class:`PersonaMemError` naming the file and, where there is one, the field path.
"""

from __future__ import annotations

import ast
import csv
import json
import sys
from pathlib import Path
from typing import Any

PERSONA_FIELDS = ("short_persona", "name", "age", "gender", "conversations", "stereotypical_preferences",
                  "anti_stereotypical_preferences", "neutral_preferences", "personality", "sensitive_information")
FLAGS = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}
CSV_ID = "persona_id"


class PersonaMemError(ValueError):
    """A PersonaMem file that cannot be read or validated; the message names the file and field."""


def read_json(path: Path | str) -> Any:
    p = Path(path)
    if not p.is_file():
        raise PersonaMemError(f"{p}: no such file")
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise PersonaMemError(f"{p}: not JSON ({e})") from None
    except RecursionError:
        raise PersonaMemError(f"{p}: nested too deeply to read (more than about 1,000 levels)") from None


def is_persona(data: Any) -> bool:
    return isinstance(data, dict) and any(k in data for k in PERSONA_FIELDS)


def unwrap_persona(data: Any, path: Path | str, persona_id: str | None = None) -> tuple[Any, str | None]:
    """(the persona object, its id) of a raw persona file ``{"<id>": {…}}``; other data passes through unchanged
    (id None). Several personas need ``persona_id``; an unknown id is an error naming the ids there are."""
    if not isinstance(data, dict) or is_persona(data) or "items" in data or not data:
        return data, None
    if not all(is_persona(v) for v in data.values()):
        return data, None
    ids = [str(k) for k in data]
    if persona_id is None:
        if len(ids) > 1:
            raise PersonaMemError(f"{path}: holds {len(ids)} personas ({', '.join(ids[:5])}"
                                  f"{', …' if len(ids) > 5 else ''}): choose one by id (--persona-id)")
        persona_id = ids[0]
    if str(persona_id) not in ids:
        raise PersonaMemError(f"{path}: no persona {persona_id!r} (it holds {', '.join(ids[:5])})")
    return data[next(k for k in data if str(k) == str(persona_id))], str(persona_id)


def json_items(data: Any, path: Path | str) -> tuple[list[tuple[str, dict[str, Any]]], str]:
    """((field path, item dict with scenario/position merged in), layout name) of a JSON question file."""
    if isinstance(data, dict) and isinstance(data.get("items"), list):
        entries, prefix, layout = data["items"], "items", "items"
    elif isinstance(data, dict) and isinstance(data.get("conversations"), dict):
        out = []
        for scenario, items in data["conversations"].items():
            if not isinstance(items, list):
                raise PersonaMemError(f"{path}: conversations.{scenario}: expected a list of items")
            for k, it in enumerate(items):
                if isinstance(it, dict):
                    out.append((f"conversations.{scenario}[{k}]",
                                {"conversation_scenario": scenario, "position_in_scenario": k, **it}))
        return out, "persona"
    elif isinstance(data, list):
        entries, prefix, layout = data, "", "list"
    else:
        found = ", ".join(list(data)[:6]) if isinstance(data, dict) else type(data).__name__
        raise PersonaMemError(f"{path}: expected {{'items': [...]}}, a list of items, a persona with "
                              f"'conversations' or a raw persona file {{'<id>': {{…, 'conversations'}}}}; "
                              f"found {found or 'nothing'}")
    out = []
    for k, entry in enumerate(entries):
        where = f"{prefix}[{k}]"
        if not isinstance(entry, dict):
            raise PersonaMemError(f"{path}: {where}: expected an object")
        if isinstance(entry.get("item"), dict):
            out.append((f"{where}.item", {"conversation_scenario": entry.get("conversation_scenario"),
                                           "position_in_scenario": entry.get("position_in_scenario"), **entry["item"]}))
        else:
            out.append((where, entry))
    return out, layout


# ---------------------------------------------------------------- CSV splits


def _literal(text: str, path: Path | str, where: str) -> Any:
    """A cell holding JSON or a Python literal (the release mixes both)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise PersonaMemError(f"{path}: {where}: not a JSON list or Python literal: {text[:60]!r}") from None


def csv_row_item(row: dict[str, str], path: Path | str, where: str) -> dict[str, Any]:
    """One benchmark CSV row as an item dict: empty cells dropped, flags and list cells parsed."""
    item: dict[str, Any] = {k: v for k, v in row.items() if k and v not in (None, "")}
    if isinstance(item.get("incorrect_answers"), str):
        item["incorrect_answers"] = _literal(item["incorrect_answers"], path, f"{where}.incorrect_answers")
    for flag in ("updated", "sensitive_info"):
        value = item.get(flag)
        if isinstance(value, str) and value.strip().lower() in FLAGS:
            item[flag] = FLAGS[value.strip().lower()]
    return item


def csv_items(path: Path | str, persona_id: str | None = None) -> tuple[list[tuple[str, dict[str, Any]]], str | None]:
    """((row path, item dict), persona id) of a benchmark CSV, filtered to one persona. A file of several
    personas needs ``persona_id``; rows of other personas are left out."""
    p = Path(path)
    if not p.is_file():
        raise PersonaMemError(f"{p}: no such file")
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # chat snippets can be long
    with p.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        if not reader.fieldnames or "user_query" not in reader.fieldnames:
            raise PersonaMemError(f"{p}: not a PersonaMem-v2 CSV split (no user_query column; columns: "
                                  f"{', '.join((reader.fieldnames or [])[:6]) or 'none'})")
        rows = list(reader)
    ids = list(dict.fromkeys(r.get(CSV_ID, "") for r in rows))
    if persona_id is None and len(ids) > 1:
        raise PersonaMemError(f"{p}: holds questions of {len(ids)} personas: choose one by id (--persona-id)")
    wanted = str(persona_id) if persona_id is not None else ids[0] if ids else None
    if wanted is not None and CSV_ID in (reader.fieldnames or []) and wanted not in ids:
        raise PersonaMemError(f"{p}: no rows of persona {wanted!r} ({len(ids)} persona id(s) in the file)")
    out = [(f"row {n}", csv_row_item(r, p, f"row {n}")) for n, r in enumerate(rows, start=2)  # row 1: the header
           if CSV_ID not in r or r.get(CSV_ID) == wanted]
    return out, wanted
