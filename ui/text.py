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


_IMAGE = re.compile(r"!\[([^\]\n]*)\]\s*(\([^)\n]*\)|\[[^\]\n]*\])")
_LINK = re.compile(r"(?<!!)\[([^\]\n]+)\]\s*\(\s*<?([^)\s>]*)>?(?:\s+[\"'][^\"'\n]*[\"'])?\s*\)")
_REF_LINK = re.compile(r"(?<!!)\[([^\]\n]+)\]\s*\[([^\]\n]*)\]")
_REF_DEF = re.compile(r"^\s{0,3}\[([^\]\n]+)\]:\s*<?(\S+?)>?(?:\s+[\"'(].*)?$", re.MULTILINE)


def plain_links_markdown(text: str) -> str:
    """Markdown written by a person for others (a batch's guidelines), with nothing that fetches or disguises: an
    image becomes ``[image: alt]`` (no request leaves the reader's browser), a link shows where it goes —
    ``text (https://…)`` — including reference-style links; emphasis, lists and headings stay."""
    refs = {m.group(1).strip().lower(): m.group(2) for m in _REF_DEF.finditer(text)}
    text = _REF_DEF.sub("", text)
    text = _IMAGE.sub(lambda m: f"\\[image: {md_inline(m.group(1)) or 'no description'}\\]", text)
    text = _LINK.sub(lambda m: f"{md_inline(m.group(1))} ({md_inline(m.group(2))})", text)
    return _REF_LINK.sub(lambda m: f"{md_inline(m.group(1))} "
                                   f"({md_inline(refs.get((m.group(2) or m.group(1)).strip().lower(), '?'))})", text)
