"""Markdown a person writes for others (guidelines) renders without images or disguised links."""

import pytest

from ui.text import plain_links_markdown


@pytest.mark.parametrize(("raw", "shown"), [
    ("![x](https://e.example/p.png)", "\\[image: x\\]"),
    ("![](https://e.example/p.png)", "\\[image: no description\\]"),
    ("![x][img]\n[img]: https://e.example/p.png", "\\[image: x\\]\n"),
    ("[click](https://e.example/a)", "click (https\\://e.example/a)"),
    ("[click]( <https://e.example/a> 'title')", "click (https\\://e.example/a)"),
    ("[form][f] and [f]\n\n[f]: https://e.example/f", "form (https\\://e.example/f) and [f]\n"),
    ("**Logs (1–3)**: 3 when plausible\n- a list", "**Logs (1–3)**: 3 when plausible\n- a list"),
])
def test_images_go_and_links_show_their_target(raw, shown):
    assert plain_links_markdown(raw) == shown
