"""The home page: a few sentences on what the app is for, and the dataset's guided tour (:mod:`ui.tour`)."""

from __future__ import annotations

import streamlit as st

from palset.dataset import Dataset
from ui.platform_state import base_workspace
from ui.text import md_escape
from ui.tour import load_tour, resolve, stop_link

INTRO = """
**PAL Studio** is a workbench for personalised, memory-equipped assistants. It lets you browse
synthetic users — their profile and Big Five personality, a monthly timeline, the interaction logs of
their devices and the dialogue sessions they had with an assistant — in the format of **PAL-Set**
(Mem-PAL, AAAI 2026). Each session ends in a dialogue where the user asks a vague question, the
assistant guesses the *implicit needs* behind it and proposes *candidate solutions*, which the user
accepts or rejects according to their preferences.

- **Users**: profiles, timelines, logs and sessions. **Memory**: what each memory method (H²Memory, RAG,
  MemoryBank, agentic, PLUM's LoRA adapter…) knows about a user, as graphs, diffs and retrieval traces, and
  how close it is to the **gold memory** built from the dataset's own annotations (an oracle upper bound).
- **Simulate**: a User-LLM plays the user against a memory-equipped assistant, live. **Evaluate**: FairEval
  win/tie/lose between methods and the single-turn leaderboard. **Review**: people annotate and agree.
- **Generate**: grow new synthetic users with the PAL-Set pipeline, step by step.
"""


def render_home(dataset: Dataset) -> None:
    st.title("PAL Studio")
    st.markdown(INTRO)
    n_sessions = sum(u.counts.sessions for u in dataset.users.values())
    c1, c2, c3 = st.columns(3)
    c1.metric("Users", len(dataset.users))
    c2.metric("Sessions", n_sessions)
    c3.metric("Logs", sum(u.counts.logs for u in dataset.users.values()))
    st.page_link("pages/users.py", label="Browse all users", icon=":material/group:",
                 query_params={"dataset": st.query_params["dataset"]} if "dataset" in st.query_params else None)
    stops, error = load_tour(dataset)
    if error:
        st.error(md_escape(error))  # a validation error quotes the file's values
    if stops:
        render_tour_list(dataset, stops)


def render_tour_list(dataset: Dataset, stops: list) -> None:
    """Every stop: its title and paragraph, a deep link, and what to run where its records are missing."""
    st.subheader("A short tour")
    dataset_param = st.query_params.get("dataset")
    ws = base_workspace()
    resolved = [resolve(stop, dataset, ws, dataset_param) for stop in stops]
    st.caption(f"{len(stops)} stops through every page; each opens a view with its explanation above it and a "
               "button to the next stop.")
    if st.button("Start the tour", key="tour_start", icon=":material/tour:", type="primary"):
        page, params = stop_link(0, resolved[0])
        st.switch_page(page, query_params=params)
    for index, (stop, where) in enumerate(zip(stops, resolved)):
        with st.container(border=True):
            st.markdown(f"**{index + 1}. {md_escape(stop.title)}** :gray[· {where.page.capitalize()}]  \n"
                        f"{md_escape(stop.text)}")
            if where.missing:
                st.caption(f":orange[Records missing:] {md_escape(where.missing)}")
            page, params = stop_link(index, where)
            st.page_link(page, label="Open this view", icon=":material/arrow_forward:", query_params=params)
