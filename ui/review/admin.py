"""The Review page's admin parts: a batch's progress and agreement overview, judge–human agreement, new batches."""

from __future__ import annotations

import logging
import random

import pandas as pd
import streamlit as st

from evaluation.human_agreement import compare_by_aspect, pairwise_votes
from palset.dataset import Dataset, dataset_key
from review.accounts import LOCAL_ADMIN, Account, AccountStore
from review.agreement import batch_agreement, disagreements
from review.batches import TASKS, memory_candidates, pairwise_candidates, plan_batch, quality_candidates
from review.export import answer_rows, item_rows, to_csv, to_jsonl
from review.store import BatchAnswered, ReviewStore
from ui.agreement import render_judge_human
from ui.platform_state import base_workspace, home_workspace
from ui.review.simturns import candidates as simturn_candidates
from ui.review.simturns import render_checker_agreement
from ui.text import error_text, md_escape

log = logging.getLogger(__name__)


def overview(store: ReviewStore, batch: dict) -> None:
    batch_id = batch["batch_id"]
    progress = [{"annotator": who, **dict(zip(("done", "assigned"), store.progress(batch_id, batch["task"], who)))}
                for who in batch["annotators"]]
    st.markdown(f"Seed **{batch['seed']}** · overlap **{batch['overlap']}** · created by {md_escape(batch['created_by'])}")
    st.dataframe(pd.DataFrame(progress), hide_index=True)
    st.markdown("**Agreement**")
    agreement = batch_agreement(store, batch_id)
    st.dataframe(pd.DataFrame([{**r, "kappa": None if r["kappa"] is None else round(r["kappa"], 3)}
                               for r in agreement]), hide_index=True)
    if not any(r["items"] for r in agreement):
        st.caption("κ needs items answered by all of their annotators (overlap ≥ 2).")
    worklist = disagreements(store, batch_id)
    st.markdown(f"**Disagreements** ({len(worklist)})")
    for i, d in enumerate(worklist[:100]):
        cols = st.columns([1, 2, 4, 1])
        cols[0].markdown(f"item {d['item_no']}")
        cols[1].markdown(md_escape(d["question"]))
        cols[2].markdown(md_escape(", ".join(f"{k}: {v}" for k, v in d["answers"].items())))
        cols[3].button("Open", key=f"review_dis_{i}", on_click=go_to, args=(batch_id, d["item_no"]))
    if batch["task"] == "pairwise":
        judge_agreement(store, batch)
    if batch["task"] == "simturn":
        render_checker_agreement(store, batch)
    items, answers = item_rows(store, batch_id), answer_rows(store, batch_id)
    cols = st.columns(4)
    cols[0].download_button("Items CSV", to_csv(items), f"{batch_id}-items.csv", "text/csv")
    cols[1].download_button("Items JSONL", to_jsonl(items), f"{batch_id}-items.jsonl", "application/jsonl")
    cols[2].download_button("Answers CSV", to_csv(answers), f"{batch_id}-answers.csv", "text/csv")
    cols[3].download_button("Answers JSONL", to_jsonl(answers), f"{batch_id}-answers.jsonl", "application/jsonl")


def judge_agreement(store: ReviewStore, batch: dict) -> None:
    """The LLM judge's stored FairEval decisions against this batch's human majority, per aspect."""
    st.markdown("**Judge–human agreement**")
    votes = pairwise_votes(store, [batch["batch_id"]])
    if not votes:
        st.caption("No answers yet.")
        return
    pair = votes[0].methods
    judgments = [j for j in base_workspace().evals.judgments(dataset=batch["dataset"])
                 if {j.method_a, j.method_b} == set(pair)]
    reports = compare_by_aspect(votes, judgments, pair)
    if not any(r.matched for r in reports.values()):
        st.caption(f"No stored judgment of {md_escape(pair[0])} vs {md_escape(pair[1])} matches these items yet "
                   "(Evaluate page).")
        return
    render_judge_human(reports, f"review_human_{batch['batch_id']}")


def memory_builds(dataset: Dataset) -> list[tuple[str, str]]:
    """(build id, user id) of this dataset's memory builds, newest first."""
    return base_workspace().memory.builds(dataset_key(dataset.root))


def new_batch(store: ReviewStore, accounts: AccountStore, account: Account, dataset: Dataset) -> None:
    task = st.selectbox("Task type", list(TASKS), format_func=lambda k: TASKS[k].label, key="review_new_task")
    title = st.text_input("Title", key="review_new_title", placeholder=TASKS[task].label)
    people = [a.name for a in accounts.list()] or [LOCAL_ADMIN]
    annotators = st.multiselect("Annotators (round-robin order)", people, key="review_new_annotators")
    cols = st.columns(3)
    n = int(cols[0].number_input("Items", min_value=1, max_value=5000, value=20, key="review_new_n"))
    seed = int(cols[1].number_input("Seed", min_value=0, value=st.session_state.setdefault(
        "review_new_seed_default", random.randrange(1_000_000)), key="review_new_seed"))
    overlap = int(cols[2].number_input("Annotators per item", min_value=1, max_value=20, value=min(2, max(len(annotators), 1)),
                                       key="review_new_overlap"))
    extra: dict = {}
    if task == "pairwise":
        runs = base_workspace().sims.list(dataset=dataset_key(dataset.root), status="finished")
        methods = sorted({r["method"] for r in runs})
        if len(methods) < 2:
            st.info("Pairwise batches need finished runs of two methods on the same topics (Simulate page).")
            return
        c = st.columns(2)
        extra["method_a"] = c[0].selectbox("Method 1", methods, key="review_new_ma")
        extra["method_b"] = c[1].selectbox("Method 2", methods, index=1, key="review_new_mb")
    elif task == "simturn":
        variants = sorted({base_workspace().sims.load(r["run_id"]).spec.simulator_variant
                           for r in base_workspace().sims.list(dataset=dataset_key(dataset.root), status="finished")})
        if not variants:
            st.info("Simulated-turn batches need finished simulation runs of this dataset (Simulate page).")
            return
        extra["simulators"] = st.multiselect("Simulators (empty: all)", variants, key="review_new_simulators",
                                             help="Annotators never see which simulator wrote a turn.")
    elif task == "memory":
        builds = memory_builds(dataset)
        if not builds:
            st.info("Memory audits need a memory build of this dataset (Memory page).")
            return
        extra["build"] = st.selectbox("Memory build", builds, format_func=lambda b: f"{b[0]} (user {b[1]})",
                                      key="review_new_build")
    guidelines = st.text_area("Guidelines (markdown, shown before the first item)", value=TASKS[task].guidelines,
                              key=f"review_new_guidelines_{task}", height=200)
    if st.button("Create batch", key="review_create", type="primary"):
        try:
            if task == "quality":
                candidates = quality_candidates(dataset)
            elif task == "pairwise":
                candidates = pairwise_candidates(runs, extra["method_a"], extra["method_b"])
            elif task == "simturn":
                candidates = simturn_candidates(dataset, extra["simulators"] or None)
            else:
                build_id, uid = extra["build"]
                ms = base_workspace().memory
                stages = ms.done_stages(build_id)
                candidates = memory_candidates(build_id, ms.items_as_of(build_id, stages[-1]) if stages else [], uid)
            plan = plan_batch(title, task, dataset_key(dataset.root), candidates, n, seed, overlap, annotators,
                              guidelines)
            batch_id = store.create_batch(plan, account.name)
        except ValueError as e:
            log.info("batch not created: %s", e)
            st.error(md_escape(error_text(e)))
            return
        home_workspace().audit.record(account.name, "review.batch_create", batch_id, title=plan.title, task=task,
                                      items=len(plan.items), annotators=plan.annotators, seed=seed)
        st.success(f"Created batch {md_escape(batch_id)} with {len(plan.items)} items.")
        st.session_state.pop("review_new_seed_default", None)


def delete_control(store: ReviewStore, batch: dict, account: Account) -> None:
    """Delete a batch nobody has answered in (a mistaken one, or one whose runs are recorded anew); admins and the
    batch's creator only, behind a confirmation. A batch with answers cannot go: the store refuses, and this says so."""
    batch_id = batch["batch_id"]
    if not (account.is_admin or batch["created_by"] == account.name):
        return
    if answers := store.count_answers(batch_id):
        st.caption(f"Kept: {answers} answer(s) given in this batch, so it cannot be deleted.")
        return
    sure = st.checkbox("Delete this batch with its items and assignments (nobody has answered yet)",
                       key=f"review_delete_sure_{batch_id}")
    if not st.button("Delete batch", key=f"review_delete_{batch_id}", disabled=not sure,
                     icon=":material/delete:"):
        return
    try:
        gone = store.delete_batch(batch_id)
    except (BatchAnswered, KeyError) as e:  # answered, or deleted, since the page was drawn
        log.warning("review batch %s not deleted for %s: %s", batch_id, account.name, e)
        st.error(error_text(e))
        return
    home_workspace().audit.record(account.name, "review.batch_delete", batch_id, title=gone["title"],
                                  task=gone["task"], items=gone["items"])
    st.session_state["review_deleted"] = f"Deleted batch {batch_id} ({gone['items']} item{'' if gone['items'] == 1 else 's'})."
    go_to()
    st.rerun()


def go_to(batch: str | None = None, item: int | None = None) -> None:
    for name in ("batch", "item"):
        st.query_params.pop(name, None)
    if batch:
        st.query_params["batch"] = batch
    if item is not None:
        st.query_params["item"] = str(item)
