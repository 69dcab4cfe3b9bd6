"""Escaping and clipping of text from data (ui.text)."""

from ui.text import clip, first_sentence, md_escape


def test_md_escape_neutralises_markdown_and_html():
    raw = "<script>alert(1)</script> **bold** [x](http://e.vil) :red[hi] $x$"
    out = md_escape(raw)
    for token in ("<script>", "**bold**", "[x](", ":red[", "$x$"):
        assert token not in out
    assert out.replace("\\", "") == raw


def test_clip_and_first_sentence():
    assert clip("one two three four", 9) == "one two…"
    assert first_sentence("The user is a nurse. She works nights.") == "The user is a nurse."
    assert first_sentence("用户是一名护士。她上夜班。") == "用户是一名护士。"
