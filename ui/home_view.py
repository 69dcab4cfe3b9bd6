"""The home page: a few sentences on what the app is for, and the dataset's guided tour."""

from __future__ import annotations

from typing import Literal

import streamlit as st
from pydantic import BaseModel, ConfigDict, ValidationError

from memory.methods import METHODS
from palset.dataset import Dataset
from palset.files import read_json
from ui.text import md_escape

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


class TourStop(BaseModel):
    """One stop of a dataset's guided tour (``tour.json`` in the dataset folder).

    A stop opens the Users page (default) or the Memory page (``page: "memory"``, with a ``method``, a
    ``tab`` such as Snapshot, Retrieval or Fidelity, and for a retrieval a ``compare`` method, ``topic`` and
    ``purpose``)."""

    model_config = ConfigDict(extra="forbid")
    title: str
    text: str
    user: str
    session: str | None = None
    tab: str | None = None
    page: Literal["users", "memory"] = "users"
    method: str | None = None
    compare: str | None = None
    topic: str | None = None
    purpose: Literal["requirement", "solution"] | None = None


def load_tour(dataset: Dataset) -> tuple[list[TourStop], str | None]:
    """The tour stops that point at existing users/sessions, and an error message if the file is bad."""
    path = dataset.root / "tour.json"
    if not path.is_file():
        return [], None
    data, problems = read_json(path, "tour.json")  # never raises: huge, deep or broken JSON is a problem
    if problems:
        return [], str(problems[0])
    try:
        stops = [TourStop.model_validate(item) for item in data]  # type: ignore[union-attr]  # a non-list raises TypeError, reported below
    except (ValueError, ValidationError, TypeError) as e:
        return [], f"tour.json: {e}"
    valid = []
    for stop in stops:
        user = dataset.users.get(stop.user)
        known = all(m is None or m in METHODS for m in (stop.method, stop.compare))
        if user and known and (stop.session is None or user.session(stop.session)):
            valid.append(stop)
    return valid, None


def tour_params(stop: TourStop, dataset_param: str | None) -> dict[str, str]:
    """Query parameters of the view a tour stop opens."""
    params = {"user": stop.user}
    if stop.page == "memory":
        extra = {"method": stop.method, "session": stop.session, "tab": stop.tab, "compare": stop.compare,
                 "topic": stop.topic, "purpose": stop.purpose}
        params.update({k: v for k, v in extra.items() if v})
    elif stop.session:
        params["session"] = stop.session
        params["tab"] = "Sessions"
    elif stop.tab:
        params["tab"] = stop.tab
    if dataset_param:
        params["dataset"] = dataset_param
    return params


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
        st.subheader("A short tour")
        for stop in stops:
            with st.container(border=True):
                st.markdown(f"**{md_escape(stop.title)}**  \n{md_escape(stop.text)}")
                st.page_link(f"pages/{stop.page}.py", label="Open this view", icon=":material/arrow_forward:",
                             query_params=tour_params(stop, st.query_params.get("dataset")))
