"""Render text from data as text: nothing in a log, profile or utterance is ever interpreted.

Streamlit already refuses raw HTML in markdown; escaping the markdown syntax too keeps ``*``,
``[link](…)``, ``:red[…]``, ``$x$`` and ``<b>`` from a dataset showing literally.
"""

from __future__ import annotations

import re

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:&])")


def md_escape(text: object) -> str:
    """Escape every markdown-significant character of ``text``; newlines become hard breaks."""
    escaped = _MD_SPECIAL.sub(r"\\\1", str(text))
    return escaped.replace("\n", "  \n")


_MD_INLINE = re.compile(r"([\\`*_{}\[\]()!|<>~$:&])")


def md_inline(text: object) -> str:
    """``text`` as one inert line inside markdown (a title, a label, a caption): inline syntax (links, images,
    emphasis, code, ``:colour[…]``, math, HTML) is escaped, newlines become spaces. Characters that matter only
    at the start of a line (``#``, ``-``, ``+``, ``1.``) are kept, so a title shows a name exactly as written."""
    return _MD_INLINE.sub(r"\\\1", " ".join(str(text).splitlines()))


def clip(text: str, limit: int) -> str:
    """Shorten to ``limit`` characters on a word boundary, with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
    return cut.rstrip(",.;:") + "…"


def first_sentence(text: str, limit: int = 110) -> str:
    """The first sentence (EN or ZH punctuation), clipped."""
    m = re.search(r"(.+?(?:[.!?](?=\s|$)|[。！？]))", text)
    return clip(m.group(1) if m else text, limit)


_SERVER_PATH = re.compile(r"(?<![\w.:/~-])/(?:[^\s/'\"`()\[\]{},;]+/)+([^\s/'\"`()\[\]{},;]*)")


def without_paths(text: str) -> str:
    """``text`` with every absolute server path cut to its last part (``…/runs.sqlite``): where PAL Studio's home,
    datasets and checkout live is nobody's business on a shared server (the log keeps the full text)."""
    return _SERVER_PATH.sub(lambda m: "…/" + m.group(1), text)


def error_text(e: BaseException) -> str:
    """The one way the app words an error: our typed errors carry a message written for a person (endpoint,
    file, field); anything else is shown with its type, so a bug never passes for a message. Server paths are cut
    to their last part (:func:`without_paths`)."""
    from backends.config import ConfigError
    from backends.llm.errors import LLMError
    from sim.service import SimulationSetupError
    from sim.simulator import SimulationError

    if isinstance(e, (LLMError, ConfigError, SimulationError, SimulationSetupError)):
        return without_paths(str(e))
    return without_paths(f"{type(e).__name__}: {e}")


_REF_DEF = re.compile(r"^\s{0,3}\[([^\]\n]+)\]:\s*<?(\S+?)>?(?:\s+[\"'(].*)?$", re.MULTILINE)
_INERT = "[]!<>"  # escaped wherever they are not part of a link or image turned into text


def _closing(text: str, start: int, opening: str, closing: str) -> int | None:
    """The index of the bracket closing the one at ``start``: nesting counted, backslash escapes skipped, never
    across a blank line (where markdown ends a link)."""
    depth, i = 0, start
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "\n" and text.startswith("\n\n", i):
            return None
        depth += (c == opening) - (c == closing)
        if depth == 0:
            return i
        i += 1
    return None


def _target(inside: str) -> str:
    """A link's destination without its title and angle brackets."""
    parts = inside.strip().split()
    return parts[0].strip("<>") if parts else ""


def _plain_span(text: str, i: int, refs: dict[str, str]) -> tuple[str, int] | None:
    """The link or image starting at ``text[i]`` (``[`` or ``![``) as plain text, and where it ends."""
    image = text[i] == "!"
    label_end = _closing(text, i + image, "[", "]")
    if label_end is None:
        return None
    label, after = text[i + image + 1:label_end], label_end + 1
    while after < len(text) and text[after] in " \t":
        after += 1
    target: str | None = None
    if after < len(text) and text[after] in "([":
        end = _closing(text, after, text[after], ")" if text[after] == "(" else "]")
        if end is not None:
            inside = text[after + 1:end]
            target = _target(inside) if text[after] == "(" else refs.get((inside or label).strip().lower(), "?")
            after = end + 1
    if target is None:
        known = refs.get(label.strip().lower())
        if known is None:
            return None
        target, after = known, label_end + 1
    if image:
        return f"\\[image: {md_inline(label) or 'no description'}\\]", after
    return f"{md_inline(label)} ({md_inline(target)})", after


def plain_links_markdown(text: str) -> str:
    """Markdown written by a person for others (a batch's guidelines), with nothing that fetches or disguises: an
    image becomes ``[image: alt]`` (no request leaves the reader's browser), a link shows where it goes —
    ``text (https://…)`` — inline, reference or shortcut, brackets nested in it or not; every other ``[``, ``]``,
    ``!``, ``<`` and ``>`` is shown as written, so no link, image or HTML can form. Emphasis, lists and headings
    stay."""
    refs = {m.group(1).strip().lower(): m.group(2) for m in _REF_DEF.finditer(text)}
    text = _REF_DEF.sub("", text)
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            out.append(text[i:i + 2])
            i += 2
            continue
        span = _plain_span(text, i, refs) if c == "[" or text.startswith("![", i) else None
        if span is not None:
            out.append(span[0])
            i = span[1]
            continue
        out.append(f"\\{c}" if c in _INERT else c)
        i += 1
    return "".join(out)
