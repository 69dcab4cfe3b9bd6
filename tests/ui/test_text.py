"""Text from data (ui.text): escaping, clipping, guidelines without images or disguised links, errors without server paths."""

import pytest

from ui.text import clip, first_sentence, md_escape, plain_links_markdown


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


@pytest.mark.parametrize(("raw", "shown"), [
    ("![x](https://e.example/p.png)", "\\[image: x\\]"),
    ("![](https://e.example/p.png)", "\\[image: no description\\]"),
    ("![x][img]\n[img]: https://e.example/p.png", "\\[image: x\\]\n"),
    ("[click](https://e.example/a)", "click (https\\://e.example/a)"),
    ("[click]( <https://e.example/a> 'title')", "click (https\\://e.example/a)"),
    ("[form][f] and [f]\n\n[f]: https://e.example/f",
     "form (https\\://e.example/f) and f (https\\://e.example/f)\n"),
    ("**Logs (1–3)**: 3 when plausible\n- a list", "**Logs (1–3)**: 3 when plausible\n- a list"),
    # brackets nested in the text: still an image that goes, a link that shows its target
    ("![a [b] c](https://e.example/p.png)", "\\[image: a \\[b\\] c\\]"),
    ("[x [y] z](https://e.example/a)", "x \\[y\\] z (https\\://e.example/a)"),
    ("[![i](https://e.example/p.png)](https://e.example/a)",
     "\\!\\[i\\]\\(https\\://e.example/p.png\\) (https\\://e.example/a)"),
    ("[unclosed ![x](https://e.example/p.png", "\\[unclosed \\!\\[x\\](https://e.example/p.png"),  # no image formed
    ("<img src=https://e.example/p.png> [a]", "\\<img src=https://e.example/p.png\\> \\[a\\]"),
])
def test_images_go_and_links_show_their_target(raw, shown):
    assert plain_links_markdown(raw) == shown


@pytest.mark.parametrize("raw", ["![a [b] c](https://e.example/p.png)", "[x [y] z](https://e.example/a)",
                                 "![x]( https://e.example/p.png )", "![[[x]]](https://e.example/p.png)",
                                 "!\\[x](https://e.example/p.png)", "![x\n](https://e.example/p.png)"])
def test_no_guideline_renders_an_image_or_a_hidden_link_in_streamlits_markdown(raw):
    """Rendered the way the page renders it (Streamlit's markdown to HTML is in the browser; CommonMark via
    markdown-it is the same grammar): no <img>, and every <a> shows its own target as its text."""
    from markdown_it import MarkdownIt

    rendered = MarkdownIt("commonmark").render(plain_links_markdown(raw))
    assert "<img" not in rendered and "<a " not in rendered


def test_errors_shown_in_the_app_carry_no_server_paths(tmp_path):
    """Audit finding 24: error texts showed where the server keeps its home and datasets."""
    from palset.loader import load_dataset
    from testkit.workspace import make_workspace
    from tests.conftest import DEMO
    from ui.text import error_text, without_paths

    ws = make_workspace(tmp_path / "pal")
    with pytest.raises(KeyError) as caught:
        ws.open_builder(load_dataset(DEMO, lazy=True), "9999", "gold")
    shown = error_text(caught.value)
    assert str(DEMO) not in shown and "…/demo" in shown and "no user '9999'" in shown
    assert without_paths("https://llm.lab.example/v1/models: 404") == "https://llm.lab.example/v1/models: 404"
    assert without_paths(f"{tmp_path}/pal/runs.sqlite is locked") == "…/runs.sqlite is locked"
