"""Markdown injection: a value from the URL or from the data never renders as a link, colour, emphasis or
HTML — every query parameter of every page, and the data fields people see (names, ids, topic keys, texts)."""

from __future__ import annotations

import json

import pytest

from tests.pages.apptest import app_workspace, open_page

LINK = "[Session expired](https://evil.example)"
PAYLOADS = [LINK, ":red[ALERT] **bold** <b>html</b>", "![img](https://evil.example/x.png)"]
RAW = ["[Session expired](https://evil.example)", ":red[ALERT]", "**bold**", "<b>", "![img]("]


def rendered(at) -> list[str]:
    """Every string Streamlit renders as markdown on the page (bodies, headings, alerts, widget labels)."""
    out = []
    for kind in ("markdown", "caption", "title", "header", "subheader", "warning", "error", "info", "success",
                 "toast"):
        out += [e.value for e in getattr(at, kind, [])]
    out += [e.label for e in at.expander] + [b.label for b in at.button] + [t.label for t in at.tabs]
    for kind in ("selectbox", "text_input", "number_input", "multiselect", "radio", "checkbox", "text_area"):
        out += [e.label for e in getattr(at, kind, [])]
    out += [e.proto.label for e in at.get("page_link")] + [e.proto.label for e in at.get("download_button")]
    return out


def assert_inert(at, where: str) -> None:
    for text in rendered(at):
        for raw in RAW:
            assert raw not in text, f"{where}: {raw!r} rendered live in {text!r}"


QUERIES = [
    ("users", {"user": "{p}"}), ("users", {"user": "1000", "session": "{p}"}), ("users", {"user": "1000", "tab": "{p}"}),
    ("memory", {"user": "{p}"}), ("memory", {"user": "1000", "method": "{p}", "item": "{p}", "tab": "{p}"}),
    ("simulate", {"run": "{p}"}), ("simulate", {"user": "{p}", "method": "{p}", "compare": "{p}", "tab": "{p}"}),
    ("evaluate", {"pair": "{p}", "aspect": "{p}", "topic": "{p}"}), ("generate", {"run": "{p}"}),
    ("review", {"batch": "{p}"}), ("home", {"dataset": "{p}"}), ("settings", {"dataset": "{p}"}),
    ("audit", {"dataset": "{p}"}),
]


@pytest.mark.parametrize(("page", "params"), QUERIES, ids=[f"{p}-{'-'.join(q)}" for p, q in QUERIES])
@pytest.mark.parametrize("payload", PAYLOADS, ids=["link", "colour", "image"])
def test_every_query_parameter_is_inert(tmp_path, monkeypatch, page, params, payload):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    monkeypatch.setenv("PAL_EMBEDDER", "hash")
    at = open_page(page, **{k: v.format(p=payload) for k, v in params.items()})
    assert_inert(at, f"{page}?{params}")


def test_review_item_parameter_is_inert(tmp_path, monkeypatch):
    from palset.dataset import dataset_key
    from palset.loader import load_dataset
    from review.batches import plan_batch, quality_candidates
    from tests.conftest import DEMO

    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    store = app_workspace().reviews
    batch = store.create_batch(plan_batch("t", "quality", dataset_key(DEMO), quality_candidates(load_dataset(DEMO)),
                                         2, 1, 1, ["local"]), "local")
    for payload in PAYLOADS:
        assert_inert(open_page("review", batch=batch, item=payload), "review?item")


@pytest.fixture
def hostile_release(small_release, monkeypatch):
    """A release whose names, occupations, months, queries, logs and turns are markdown and HTML."""
    bg = small_release / "background" / "background.json"
    data = json.loads(bg.read_text(encoding="utf-8"))
    for uid in data:
        data[uid]["name"] = f"{LINK} :red[ALERT]"
        data[uid]["occupation"] = "**bold** <b>html</b>"
    bg.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    tl = next(small_release.glob("timeline/timeline*.json"))
    timeline = json.loads(tl.read_text(encoding="utf-8"))
    for months in timeline.values():
        months[LINK] = "![img](https://evil.example/x.png) happened"
    tl.write_text(json.dumps(timeline, ensure_ascii=False), encoding="utf-8")
    inp = small_release / "input.json"
    text = inp.read_text(encoding="utf-8")
    for field in ('"user_query": "', '"content": "'):
        text = text.replace(field, field + f"{LINK} :red[ALERT] ".replace('"', ''))
    inp.write_text(text, encoding="utf-8")
    monkeypatch.setenv("PAL_DATASETS", f"hostile={small_release}")
    return small_release


def test_data_fields_are_inert_on_every_page(tmp_path, monkeypatch, hostile_release):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    monkeypatch.setenv("PAL_EMBEDDER", "hash")
    from palset.loader import load_dataset

    ds = load_dataset(hostile_release)
    uid = next(iter(ds.users))
    session = ds.users[uid].sessions[0].sample_id
    for page, params in [("home", {}), ("users", {}), ("users", {"user": uid}),
                         ("users", {"user": uid, "tab": "Timeline"}),
                         ("users", {"user": uid, "tab": "Sessions", "session": session}),
                         ("memory", {"user": uid}), ("simulate", {"user": uid}), ("evaluate", {}), ("generate", {})]:
        at = open_page(page, dataset="hostile", **params)
        assert_inert(at, f"{page}?{params}")
        if page == "users" and params:
            assert any("Session expired" in t for t in rendered(at)), "the hostile text is shown (escaped)"
