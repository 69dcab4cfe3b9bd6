"""A leaderboard's takeaway on the Evaluate page: the headlines above the board, which methods cannot be told
apart, and an empty board's reason with the command that fills it (the words come from
:mod:`evaluation.takeaways`; this module only lays them out)."""

from __future__ import annotations

import streamlit as st

from evaluation.takeaway_words import Language, Takeaway, dataset_argument, language_of
from palset.dataset import Dataset
from ui.text import md_inline


def dataset_arg(dataset: Dataset) -> str:
    """The dataset folder as a ``--dataset`` argument: relative to the project where it lies inside it."""
    return dataset_argument(dataset.root)


def board_language(dataset: Dataset) -> Language:
    """The language the board's words are in: the dataset's (a Chinese dataset reads Chinese)."""
    return language_of(dataset.language)


def with_commands(text: str) -> str:
    """Markdown of a sentence whose back-quoted parts are commands: those stay code, the rest is escaped."""
    parts = text.split("`")
    return "".join(f"`{p}`" if i % 2 else md_inline(p) for i, p in enumerate(parts))


def render_takeaway(takeaway: Takeaway, key: str) -> bool:
    """The headlines (or the empty board's reason); False when the board is empty and nothing else should draw."""
    if takeaway.empty:
        st.info(with_commands(takeaway.empty), icon=":material/info:")
        return False
    with st.container(border=True, key=f"{key}_takeaway"):
        st.markdown("\n".join(f"- {md_inline(h.text)}" for h in takeaway.headlines) or "–")
        for tie in takeaway.ties:
            st.markdown(f":material/compare_arrows: {md_inline(tie)}")
        if takeaway.note:
            st.caption(md_inline(takeaway.note))
    return True


def render_references(takeaway: Takeaway, frame, key: str, title: str) -> None:
    """The reference rows, collapsed under the methods: one line of meaning each, then their figures."""
    if not takeaway.references:
        return
    with st.expander(title):
        st.markdown("\n".join(f"- **{md_inline(r.label)}**" + (f": {md_inline(r.meaning)}" if r.meaning else "")
                              for r in takeaway.references))
        if frame is not None and len(frame):
            st.dataframe(frame, hide_index=True, width="stretch", key=key)
