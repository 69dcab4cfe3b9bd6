"""The guided tour (``tour.json`` in a dataset folder): stops on every page, each a deep link with a paragraph
of explanation, resolved against the records of the workspace the session reads (a presented bundle's, or the
home's), and a "next stop" button above the page (``?tour=N``).

A stop names what to show by what it is — a user, a session, a method, a topic — never by a stored id (run
ids and build ids depend on the machine's path to the dataset), and :func:`resolve` finds the records: the
newest finished run of that method on that topic, the judgment of that pair, the dataset's review batch.
A stop whose records are missing says which command makes them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, NamedTuple

import streamlit as st
from pydantic import BaseModel, ConfigDict, ValidationError

from backends.paths import PROJECT_ROOT
from memory.methods import METHODS, get_method_class
from palset.dataset import Dataset, dataset_key
from palset.files import read_json
from studio.workspace import Workspace
from ui.text import md_escape, md_inline

Page = Literal["users", "memory", "simulate", "evaluate", "review"]
TOUR_PARAM = "tour"


class TourStop(BaseModel):
    """One stop. ``users`` (default): a user's tab or session. ``memory``: a ``method``'s memory of the user on a
    ``tab`` (Snapshot with an ``item``, Retrieval with a ``compare`` method, ``topic`` and ``purpose``, Fidelity).
    ``simulate``: the newest finished run of ``method`` on ``topic``. ``evaluate``: ``method`` against ``compare``
    on ``topic`` and ``aspect`` (both orders of the judgment), or ``section: leaderboards``. ``review``: the
    dataset's newest review batch, its first item as an annotator sees it."""

    model_config = ConfigDict(extra="forbid")
    title: str
    text: str
    page: Page = "users"
    user: str | None = None
    session: str | None = None
    tab: str | None = None
    method: str | None = None
    compare: str | None = None
    topic: str | None = None  # "{sample_id}/{topic_key}"
    purpose: Literal["requirement", "solution"] | None = None
    item: str | None = None
    aspect: Literal["requirement", "preference"] | None = None
    section: Literal["pairwise", "leaderboards"] | None = None


class Resolved(NamedTuple):
    page: str
    params: dict[str, str]
    missing: str | None  # what to run to make the records this stop shows, when they are missing


def load_tour(dataset: Dataset) -> tuple[list[TourStop], str | None]:
    """The tour stops that point at existing users/sessions/methods, and an error message if the file is bad."""
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
    return [s for s in stops if _points_somewhere(dataset, s)], None


def _points_somewhere(dataset: Dataset, stop: TourStop) -> bool:
    user = dataset.users.get(stop.user) if stop.user else None
    if stop.user and user is None:
        return False
    if stop.page in ("users", "memory") and user is None:
        return False
    if any(m is not None and m not in METHODS for m in (stop.method, stop.compare)):
        return False
    sample = stop.session or (stop.topic.split("/", 1)[0] if stop.topic else None)
    return sample is None or user is None or user.session(sample) is not None


def tour_params(stop: TourStop, dataset_param: str | None) -> dict[str, str]:
    """Query parameters of the view a stop opens (records looked up by :func:`resolve`)."""
    params = {"user": stop.user} if stop.user and stop.page in ("users", "memory") else {}
    if stop.page == "memory":
        extra = {"method": stop.method, "session": stop.session, "tab": stop.tab, "compare": stop.compare,
                 "topic": stop.topic, "purpose": stop.purpose, "item": stop.item}
        params.update({k: v for k, v in extra.items() if v})
    elif stop.page == "users" and stop.session:
        params["session"] = stop.session
        params["tab"] = "Sessions"
    elif stop.page == "users" and stop.tab:
        params["tab"] = stop.tab
    if dataset_param:
        params["dataset"] = dataset_param
    return params


def _where(dataset: Dataset) -> str:
    root = Path(dataset.root).resolve()
    return str(root.relative_to(PROJECT_ROOT)) if root.is_relative_to(PROJECT_ROOT) else str(root)


def resolve(stop: TourStop, dataset: Dataset, ws: Workspace, dataset_param: str | None = None) -> Resolved:
    """Where the stop goes in this workspace, and what to run if its records are missing."""
    params, dkey, ds = tour_params(stop, dataset_param), dataset_key(dataset.root), _where(dataset)
    sample, _, topic = (stop.topic or "").partition("/")
    task = f"{sample}_{topic}"
    if stop.page == "memory":
        return Resolved("memory", params, _memory_missing(stop, ws, dkey, ds))
    if stop.page == "simulate":
        runs = ws.sims.list(dataset=dkey, user_id=stop.user or "", sample_id=sample, topic_key=topic,
                            method=stop.method or "", status="finished")
        if runs:
            return Resolved("simulate", {**params, "run": runs[0]["run_id"], "tab": "Simulation"}, None)
        return Resolved("simulate", params, f"No finished {stop.method} run on {task} yet: run `pal simulate --dataset "
                                            f"{ds} --methods {stop.method} --task-ids {task}` (or start it here).")
    if stop.page == "evaluate" and stop.section == "leaderboards":
        has = ws.fidelity.any_report(dkey) or ws.evals.any_result(dkey)  # the home page resolves every stop per rerun
        return Resolved("evaluate", {**params, "section": "leaderboards"}, None if has else (
            f"No leaderboard yet: run `pal memory fidelity --dataset {ds} --users all --method rag-turn` or "
            f"`pal bench-tasks --dataset {ds} --methods gold,rag-turn`."))
    if stop.page == "evaluate":
        judged = [j for j in ws.evals.judgments(dataset=dkey, method_a=stop.method or "", method_b=stop.compare or "")
                  if (j.sample_id, j.topic_key) == (sample, topic) and (stop.aspect is None or j.aspect == stop.aspect)]
        pair = {**params, "pair": f"{stop.method}__{stop.compare}", "aspect": stop.aspect or "both"}
        if judged:
            return Resolved("evaluate", {**pair, "topic": task, "judge": judged[-1].judge_model}, None)
        return Resolved("evaluate", pair, f"No FairEval judgment of {stop.method} vs {stop.compare} on {task} yet: "
                                          f"simulate both (`pal simulate --dataset {ds} --methods {stop.method},"
                                          f"{stop.compare} --task-ids {task}`), then `pal judge --dataset {ds} --runs "
                                          f"{stop.method} --baseline {stop.compare}`.")
    if stop.page == "review":
        batches = [b for b in ws.reviews.batches() if b["dataset"] == dkey]
        if batches:
            return Resolved("review", {**params, "batch": batches[0]["batch_id"], "item": "1", "view": "annotator"}, None)
        return Resolved("review", params, f"No review batch for this dataset yet: run `pal judge --dataset {ds} --runs "
                                          "gold --baseline vanilla-log --review-uncertain 2 --annotators a,b` (or "
                                          "New batch on the Review page).")
    return Resolved("users", params, None)


def _memory_missing(stop: TourStop, ws: Workspace, dkey: str, ds: str) -> str | None:
    """A memory stop misses its records when a build is absent that cannot be made on opening (an LLM method,
    or any method while presenting), or a presented Fidelity tab has no stored report."""
    for method in (stop.method, stop.compare if stop.tab == "Retrieval" else None):
        if method and ws.memory.find_build(dkey, stop.user or "", method) is None and (
                ws.read_only or get_method_class(method).uses_llm):
            return (f"No {method} memory of user {stop.user} yet: run `pal memory build --dataset {ds} --user "
                    f"{stop.user} --method {method}`.")
    if stop.tab == "Fidelity" and ws.read_only and not ws.fidelity.reports(dkey, stop.user):
        return f"No fidelity report of user {stop.user} yet: run `pal memory fidelity --dataset {ds} --user {stop.user} " \
               "--method rag-turn`."
    return None


def tour_index() -> int | None:
    raw = st.query_params.get(TOUR_PARAM)
    return int(raw) if raw is not None and raw.isdigit() else None


def stop_link(index: int, resolved: Resolved) -> tuple[str, dict[str, str]]:
    """The page file and query parameters of stop ``index`` (the tour position included)."""
    return f"pages/{resolved.page}.py", {**resolved.params, TOUR_PARAM: str(index)}


def render_tour_bar(dataset: Dataset, page_path: str) -> None:
    """Above a page opened from the tour: which stop this is, its explanation, what is missing, the next stop."""
    from ui.platform_state import base_workspace

    index = tour_index()
    if index is None:
        return
    stops, _ = load_tour(dataset)
    if not 0 <= index < len(stops):
        return
    ws, dataset_param = base_workspace(), st.query_params.get("dataset")
    here = resolve(stops[index], dataset, ws, dataset_param)
    if here.page != page_path:
        return
    with st.container(border=True, key="tour_bar"):
        st.markdown(f":material/tour: **Tour · stop {index + 1} of {len(stops)}: {md_escape(stops[index].title)}**  \n"
                    f"{md_escape(stops[index].text)}")
        if here.missing:
            st.warning(md_escape(here.missing), icon=":material/info:")
        c1, c2 = st.columns([3, 1])
        if index + 1 < len(stops):
            if c1.button(f"Next stop: {md_inline(stops[index + 1].title)}", key="tour_next", icon=":material/arrow_forward:",
                         type="primary"):  # the next stop's records are looked up only when it is asked for
                page, params = stop_link(index + 1, resolve(stops[index + 1], dataset, ws, dataset_param))
                st.switch_page(page, query_params=params)
        else:
            c1.caption("That was the last stop.")
        c2.page_link("pages/home.py", label="All stops", icon=":material/list:",
                     query_params={"dataset": dataset_param} if dataset_param else None)
