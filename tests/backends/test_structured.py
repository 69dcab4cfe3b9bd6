from typing import Literal

import pytest
from pydantic import BaseModel, Field

from backends.llm.structured import (
    StructuredError,
    bounded_schema,
    extract_json,
    parse_structured,
    schema_instructions,
)


class Item(BaseModel):
    name: str = Field(max_length=30)
    kind: Literal["a", "b"]


class Bag(BaseModel):
    items: list[Item] = Field(max_length=3)
    score: int = Field(ge=1, le=10)


class Loose(BaseModel):
    notes: list[str]


def test_bounded_schema_inlines_refs_and_refuses_unbounded_models():
    schema = bounded_schema(Bag)
    assert "$defs" not in schema and schema["properties"]["items"]["maxItems"] == 3
    assert schema["properties"]["items"]["items"]["properties"]["name"]["maxLength"] == 30
    with pytest.raises(ValueError, match=r"unbounded schema at \$.notes, \$.notes\[\]"):
        bounded_schema(Loose)


def test_a_models_schema_is_built_once_and_shared_by_every_call(monkeypatch):
    class Once(BaseModel):
        word: str = Field(max_length=5)

    built = []
    original = Once.model_json_schema.__func__  # type: ignore[attr-defined]  # a classmethod's function

    def counting(cls, *args, **kwargs):
        built.append(cls)
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(Once, "model_json_schema", classmethod(counting))
    first = bounded_schema(Once)
    assert all(bounded_schema(Once) is first for _ in range(5)) and built == [Once]
    with pytest.raises(ValueError):  # a refusal is not cached as an answer
        bounded_schema(Loose)
    with pytest.raises(ValueError):
        bounded_schema(Loose)


def test_a_shared_schemas_instructions_are_written_once_and_another_schemas_each_time(monkeypatch):
    import json

    class Twice(BaseModel):
        word: str = Field(max_length=5)

    shared = bounded_schema(Twice)
    first = schema_instructions(shared)
    assert json.loads(first.split("\n", 1)[1]) == shared
    assert schema_instructions(shared, full=False) == "Reply with one JSON object only (fields: word), no prose."
    dumps = []
    monkeypatch.setattr(json, "dumps", lambda *a, **k: dumps.append(1) or "{}")
    assert schema_instructions(shared) == first and dumps == []  # written once
    own = dict(shared)  # a schema built elsewhere may change between calls: written each time
    schema_instructions(own)
    own["properties"] = {}
    assert schema_instructions(own, full=False) == "Reply with one JSON object only (fields: ), no prose."
    assert len(dumps) == 1


@pytest.mark.parametrize(
    ("text", "repaired"),
    [
        ('{"items": [], "score": 3}', False),
        ('Sure! ```json\n{"items": [], "score": 3}\n```', True),
        ('Here you go: {"items": [{"name": "x", "kind": "a"},], "score": 3,} hope it helps', True),
        ("{'items': [], 'score': 3}".replace("'", '"'), False),
        ('{"items": [], "score": 3, "ok": True}', True),
    ],
)
def test_extract_json_repairs_trivial_slips(text, repaired):
    data, was_repaired = extract_json(text)
    assert data["score"] == 3 and was_repaired is repaired


def test_parse_errors_say_what_is_wrong():
    with pytest.raises(StructuredError, match="empty reply"):
        extract_json("  ")
    with pytest.raises(StructuredError, match="not valid JSON"):
        extract_json('{"items": [')
    with pytest.raises(StructuredError, match="score: Input should be less than or equal to 10"):
        parse_structured('{"items": [], "score": 11}', Bag)
