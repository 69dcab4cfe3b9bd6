"""Rendering of the Review page: annotator sessions over review batches, and the admin's batch tools.

Who is signed in lives in ``st.session_state["review_account"]`` (re-checked against the accounts on
every run, so a removed account loses access at once). With no accounts and the server bound to
localhost the page runs as a single local admin. An annotator sees only batches and items assigned
to them; a crafted ``?batch=`` or ``?item=`` of someone else's shows an error and never the item.

State lives in the URL (``?batch=<id>&item=<n>``). Every answer is written the moment its button is
pressed; a completed item moves on to the next unanswered one. Keys: 1/2/3 answer the highlighted
question, n/p next/previous, u undo. All text from data goes through :func:`ui.text.md_escape`.
"""

from __future__ import annotations

import random

import pandas as pd
import streamlit as st

from backends.store.db import connect
from evaluation.human_agreement import compare_by_aspect, pairwise_votes
from evaluation.store import EvalStore
from memory.service import dataset_key
from memory.store import MemoryStore
from palset.dataset import Dataset
from review.accounts import LOCAL_ADMIN, Account, AccountStore
from review.agreement import batch_agreement, disagreements
from review.batches import TASKS, memory_candidates, pairwise_candidates, plan_batch, quality_candidates, shown_order
from review.export import answer_rows, item_rows, to_csv, to_jsonl
from review.store import ReviewStore
from sim.store import SimStore
from ui.eval_boards import render_judge_human
from ui.text import md_escape

ACCOUNT_KEY = "review_account"
LOCAL_ADDRESSES = {"localhost", "127.0.0.1", "::1"}


def bound_to_localhost() -> bool:
    return str(st.get_option("server.address") or "") in LOCAL_ADDRESSES


# ---------------------------------------------------------------- accounts


def current_account(accounts: AccountStore) -> Account | None:
    if accounts.count() == 0:
        return Account(name=LOCAL_ADMIN, role="admin") if bound_to_localhost() else None
    held = st.session_state.get(ACCOUNT_KEY)
    if not held:
        return None
    account = accounts.get(held["name"])
    if account is None:
        st.session_state.pop(ACCOUNT_KEY, None)
    return account


def _login(accounts: AccountStore) -> None:
    if accounts.count() == 0:
        st.info("No review accounts exist. Create one with `pal users add NAME --role admin`; "
                "a server bound to localhost runs without accounts as a single local admin.")
        return
    with st.form("review_login"):
        name = st.text_input("Name", key="review_login_name")
        password = st.text_input("Password", type="password", key="review_login_password")
        if st.form_submit_button("Sign in", key="review_login_submit", type="primary"):
            account = accounts.verify(name, password)
            if account is None:
                st.error("Unknown name or wrong password.")
            else:
                st.session_state[ACCOUNT_KEY] = account.model_dump()
                st.rerun()


def _logout() -> None:
    st.session_state.pop(ACCOUNT_KEY, None)
    st.query_params.clear()


# ---------------------------------------------------------------- navigation


def _go(batch: str | None = None, item: int | None = None) -> None:
    for name in ("batch", "item"):
        st.query_params.pop(name, None)
    if batch:
        st.query_params["batch"] = batch
    if item is not None:
        st.query_params["item"] = str(item)


def render_review(dataset: Dataset) -> None:
    st.title("Review")
    accounts, store = AccountStore(), ReviewStore()
    account = current_account(accounts)
    if account is None:
        _login(accounts)
        return
    left, right = st.columns([4, 1])
    left.caption(f"Signed in as **{md_escape(account.name)}** · {account.role}")
    if account.name != LOCAL_ADMIN:
        right.button("Sign out", key="review_logout", on_click=_logout)
    batch_id = st.query_params.get("batch")
    if batch_id:
        _render_batch(store, account, batch_id, dataset)
        return
    if account.is_admin:
        mine_tab, batches_tab, new_tab, people_tab = st.tabs(["My assignments", "Batches", "New batch", "Accounts"])
        with mine_tab:
            _batch_list(store, store.batches(account.name), account)
        with batches_tab:
            _batch_list(store, store.batches(), account, admin=True)
        with new_tab:
            _new_batch(store, accounts, account, dataset)
        with people_tab:
            people = accounts.list()
            if people:
                st.dataframe(pd.DataFrame([a.model_dump() for a in people]), hide_index=True)
            st.caption("Add or remove accounts with `pal users add NAME --role admin|annotator` and `pal users remove NAME`.")
    else:
        _batch_list(store, store.batches(account.name), account)


def _batch_list(store: ReviewStore, batches: list[dict], account: Account, admin: bool = False) -> None:
    if not batches:
        st.info("No batches yet." if admin else "No batches are assigned to you.")
        return
    for b in batches:
        cols = st.columns([4, 2, 1])
        done, total = store.progress(b["batch_id"], b["task"], account.name)
        cols[0].markdown(f"**{md_escape(b['title'])}** · {TASKS[b['task']].label} · `{b['batch_id']}`")
        if admin:
            cols[1].caption(f"{len(store.items(b['batch_id']))} items · overlap {b['overlap']} · seed {b['seed']}")
        else:
            cols[1].progress(done / total if total else 1.0, text=f"{done}/{total} done")
        cols[2].button("Open", key=f"review_open_{'admin_' if admin else ''}{b['batch_id']}", on_click=_go,
                       args=(b["batch_id"],))


# ---------------------------------------------------------------- a batch


def _render_batch(store: ReviewStore, account: Account, batch_id: str, dataset: Dataset) -> None:
    batch = store.batch(batch_id)
    mine = store.assigned(batch_id, account.name) if batch else []
    st.button("All batches", key="review_back", icon=":material/arrow_back:", on_click=_go)
    if batch is None or (not mine and not account.is_admin):
        st.error("This batch is not among your assignments.")
        return
    task = TASKS[batch["task"]]
    st.subheader(f"{md_escape(batch['title'])} · {task.label}")
    if batch["dataset"] != dataset_key(dataset.root):
        st.warning(f"This batch was drawn from another dataset ({md_escape(batch['dataset'])}); "
                   "switch the active dataset to see its items.")
    if account.is_admin:
        with st.expander("Batch overview: progress, agreement, disagreements, exports", expanded=not mine):
            _overview(store, batch)
    raw = st.query_params.get("item")
    if raw is not None:
        try:
            item_no = int(raw)
        except ValueError:
            item_no = -1
        if item_no not in mine:
            if account.is_admin and store.item(batch_id, item_no):
                _read_only_item(store, batch, item_no, dataset)
            else:
                st.error(f"Item {md_escape(raw)} is not one of your assignments in this batch.")
            return
    if mine:
        _annotate(store, account, batch, dataset, mine, raw)


def _guidelines_seen(batch_id: str) -> None:
    st.session_state[f"review_guidelines_seen_{batch_id}"] = True


def _annotate(store: ReviewStore, account: Account, batch: dict, dataset: Dataset, mine: list[int],
              raw: str | None) -> None:
    batch_id, task = batch["batch_id"], TASKS[batch["task"]]
    done, total = store.progress(batch_id, batch["task"], account.name)
    st.progress(done / total if total else 1.0, text=f"{done}/{total} done")
    seen_key = f"review_guidelines_seen_{batch_id}"
    if not st.session_state.get(seen_key) and not store.answers(batch_id, account.name):
        st.markdown("#### Guidelines")
        st.markdown(batch["guidelines"])  # written by the admin for annotators: rendered as markdown
        st.button("Start", key="review_start", type="primary", shortcut="Enter", on_click=_guidelines_seen,
                  args=(batch_id,))
        return
    with st.popover("Guidelines", icon=":material/menu_book:"):
        st.markdown(batch["guidelines"])
    if raw is None:
        first = store.first_unanswered(batch_id, batch["task"], account.name)
        if first is None:
            st.success(f"All {total} items done. Thank you!")
            st.button("Review my answers from the start", key="review_restart", on_click=_go, args=(batch_id, mine[0]))
            return
        st.query_params["item"] = str(first)
        item_no = first
    else:
        item_no = int(raw)
    pos = mine.index(item_no)
    item = store.item(batch_id, item_no)
    given = {a["question"]: a["value"] for a in store.answers(batch_id, account.name, item_no)}
    state = "answered" if all(q.key in given for q in task.required) else "open"
    st.markdown(f"**Item {pos + 1} of {total}** · {state}")
    if flash := st.session_state.pop("review_flash", None):
        st.toast(flash)
    _render_content(batch, item, dataset)
    focus = next((q.key for q in task.required if q.key not in given), None)
    for q in task.questions:
        if q.free_text:
            st.text_input(q.label, value=given.get(q.key, ""), key=f"review_text_{batch_id}_{item_no}_{q.key}",
                          on_change=_save_text, args=(store, batch, account.name, item_no, q.key, mine))
            continue
        hint = " · keys 1 2 3" if q.key == focus else ""
        st.markdown(f"**{md_escape(q.label)}**{hint}")
        cols = st.columns(len(q.options))
        for i, (value, label) in enumerate(q.options):
            cols[i].button(label, key=f"review_{q.key}_{value}", use_container_width=True,
                           type="primary" if given.get(q.key) == value else "secondary",
                           shortcut=str(i + 1) if q.key == focus else None,
                           on_click=_answer, args=(store, batch, account.name, item_no, q.key, value, mine))
    nav = st.columns(3)
    nav[0].button("Previous", key="review_prev", shortcut="p", icon=":material/chevron_left:", disabled=pos == 0,
                  on_click=_go, args=(batch_id, mine[max(pos - 1, 0)]))
    nav[1].button("Next", key="review_next", shortcut="n", icon=":material/chevron_right:",
                  disabled=pos == len(mine) - 1, on_click=_go, args=(batch_id, mine[min(pos + 1, len(mine) - 1)]))
    nav[2].button("Undo last answer", key="review_undo", shortcut="u", icon=":material/undo:",
                  on_click=_undo, args=(store, batch_id, account.name))


def _next_open(store: ReviewStore, batch: dict, who: str, item_no: int, mine: list[int]) -> int | None:
    done = store.done_items(batch["batch_id"], batch["task"], who)
    after = mine[mine.index(item_no) + 1:] + mine[:mine.index(item_no)]
    return next((n for n in after if n not in done), None)


def _answer(store: ReviewStore, batch: dict, who: str, item_no: int, question: str, value: str,
            mine: list[int]) -> None:
    store.answer(batch["batch_id"], item_no, who, question, value)
    given = {a["question"] for a in store.answers(batch["batch_id"], who, item_no)}
    if all(q.key in given for q in TASKS[batch["task"]].required):
        nxt = _next_open(store, batch, who, item_no, mine)
        if nxt is None:
            _go(batch["batch_id"])  # all done
        else:
            _go(batch["batch_id"], nxt)


def _save_text(store: ReviewStore, batch: dict, who: str, item_no: int, question: str, mine: list[int]) -> None:
    text = st.session_state.get(f"review_text_{batch['batch_id']}_{item_no}_{question}", "")
    store.answer(batch["batch_id"], item_no, who, question, text)


def _undo(store: ReviewStore, batch_id: str, who: str) -> None:
    row = store.undo_last(batch_id, who)
    if row is None:
        st.session_state["review_flash"] = "Nothing to undo."
        return
    st.session_state["review_flash"] = f"Undid the answer to “{row['question']}” of this item."
    _go(batch_id, row["item_no"])


# ---------------------------------------------------------------- item content


def _render_content(batch: dict, item: dict, dataset: Dataset) -> None:
    p = item["payload"]
    try:
        if batch["task"] == "quality":
            _quality_content(p, dataset)
        elif batch["task"] == "pairwise":
            _pairwise_content(p, dataset)
        else:
            _memory_content(p, dataset)
    except (KeyError, ValueError) as e:
        st.error(f"This item cannot be shown: {md_escape(e)}")


def _user(dataset: Dataset, uid: str):
    user = dataset.users.get(uid)
    if user is None:
        raise KeyError(f"user {uid} is not in the active dataset")
    return user


def _profile(user) -> None:
    if user.profile:
        pr = user.profile
        st.markdown(f"**{md_escape(pr.name)}** · {md_escape(pr.gender)} · {pr.age} · {md_escape(pr.occupation)}  \n"
                    f"Hobbies: {md_escape(pr.hobbies)}")


def _preferences(user, session) -> None:
    lines = []
    for t in session.topics if session else []:
        pref = user.preferences.get(t.requirement_type_id or "")
        if pref:
            lines.append(f"- {md_escape(pref.requirement)}: likes {md_escape(pref.preference.pos)}; "
                         f"dislikes {md_escape(pref.preference.neg)}")
    if lines:
        st.markdown("**Preferences**\n" + "\n".join(lines))


def _quality_content(p: dict, dataset: Dataset) -> None:
    user = _user(dataset, p["user_id"])
    session = user.session(p["sample_id"])
    if session is None:
        raise KeyError(f"session {p['sample_id']} is not in the active dataset")
    _profile(user)
    _preferences(user, session)
    situation = user.situations.get(session.situation_id or "")
    if situation:
        st.markdown(f"**Situation**: {md_escape(situation.situation)}")
    left, right = st.columns(2)
    with left.container(height=420):
        st.markdown(f"**Logs** ({len(session.logs)})")
        for lg in session.logs:
            st.markdown(f"`{lg.timestamp}` {md_escape(lg.content)}")
    with right.container(height=420):
        st.markdown(f"**Dialogue** ({len(session.turns)} turns)")
        for turn in session.turns:
            st.markdown(f"**User**: {md_escape(turn.user.content)}  \n**Assistant**: {md_escape(turn.assistant.content)}")


def _pairwise_content(p: dict, dataset: Dataset) -> None:
    sims = SimStore()
    shown_a, shown_b = shown_order(p)
    runs = {p["method_a"]: p["run_a"], p["method_b"]: p["run_b"]}
    user = dataset.users.get(p["user_id"])
    if user:
        _profile(user)
        _preferences(user, user.session(p["sample_id"]))
    st.caption(f"{md_escape(p['sample_id'])} · {md_escape(p['topic_key'])}")
    cols = st.columns(2)
    for col, label, method in zip(cols, ("A", "B"), (shown_a, shown_b)):
        rec = sims.load(runs[method])
        with col.container(height=480):
            st.markdown(f"#### Dialogue {label}")
            for u in rec.utterances:
                who = "User" if u.side == "user" else "Assistant"
                st.markdown(f"**{who}**: {md_escape(u.content)}")


def _source_text(dataset: Dataset, uid: str, ref: str) -> str:
    kind, _, rest = ref.partition(":")
    user = dataset.users.get(uid)
    if kind in ("log", "turn") and user:
        sample_id, _, idx = rest.rpartition(":")
        session = user.session(sample_id)
        if session and idx.isdigit():
            n = int(idx)
            if kind == "log" and n < len(session.logs):
                return f"log {session.logs[n].timestamp}: {session.logs[n].content}"
            if kind == "turn" and n < len(session.turns):
                t = session.turns[n]
                return f"User: {t.user.content} / Assistant: {t.assistant.content}"
    return ref


def _memory_content(p: dict, dataset: Dataset) -> None:
    st.markdown(f"**Memory item** ({md_escape(p['layer'])}, from {md_escape(p['session_id'])})")
    st.info(md_escape(p["text"]))
    st.markdown("**Provenance**")
    if not p["provenance"]:
        st.caption("No sources recorded.")
    for ref in p["provenance"]:
        st.markdown(f"- `{md_escape(ref)}` {md_escape(_source_text(dataset, p.get('user_id', ''), ref))}")


def _read_only_item(store: ReviewStore, batch: dict, item_no: int, dataset: Dataset) -> None:
    st.caption(f"Item {item_no} (read only: not assigned to you)")
    _render_content(batch, store.item(batch["batch_id"], item_no), dataset)
    rows = store.answers(batch["batch_id"], item_no=item_no)
    if rows:
        st.dataframe(pd.DataFrame(rows)[["annotator", "question", "value"]], hide_index=True)


# ---------------------------------------------------------------- admin


def _overview(store: ReviewStore, batch: dict) -> None:
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
        cols[3].button("Open", key=f"review_dis_{i}", on_click=_go, args=(batch_id, d["item_no"]))
    if batch["task"] == "pairwise":
        _judge_agreement(store, batch)
    items, answers = item_rows(store, batch_id), answer_rows(store, batch_id)
    cols = st.columns(4)
    cols[0].download_button("Items CSV", to_csv(items), f"{batch_id}-items.csv", "text/csv")
    cols[1].download_button("Items JSONL", to_jsonl(items), f"{batch_id}-items.jsonl", "application/jsonl")
    cols[2].download_button("Answers CSV", to_csv(answers), f"{batch_id}-answers.csv", "text/csv")
    cols[3].download_button("Answers JSONL", to_jsonl(answers), f"{batch_id}-answers.jsonl", "application/jsonl")


def _judge_agreement(store: ReviewStore, batch: dict) -> None:
    """The LLM judge's stored FairEval decisions against this batch's human majority, per aspect."""
    st.markdown("**Judge–human agreement**")
    votes = pairwise_votes(store, [batch["batch_id"]])
    if not votes:
        st.caption("No answers yet.")
        return
    pair = votes[0].methods
    judgments = [j for j in EvalStore(store.path).judgments(dataset=batch["dataset"])
                 if {j.method_a, j.method_b} == set(pair)]
    reports = compare_by_aspect(votes, judgments, pair)
    if not any(r.matched for r in reports.values()):
        st.caption(f"No stored judgment of {md_escape(pair[0])} vs {md_escape(pair[1])} matches these items yet "
                   "(Evaluate page).")
        return
    render_judge_human(reports, f"review_human_{batch['batch_id']}")


def _builds(dataset: Dataset) -> list[tuple[str, str]]:
    store = MemoryStore()
    with connect(store.path) as conn:
        return [(r[0], r[1]) for r in conn.execute(
            "SELECT build_id, user_id FROM memory_builds WHERE dataset=? ORDER BY updated_at DESC",
            (dataset_key(dataset.root),))]


def _new_batch(store: ReviewStore, accounts: AccountStore, account: Account, dataset: Dataset) -> None:
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
        runs = SimStore().list(dataset=dataset_key(dataset.root), status="finished")
        methods = sorted({r["method"] for r in runs})
        if len(methods) < 2:
            st.info("Pairwise batches need finished runs of two methods on the same topics (Simulate page).")
            return
        c = st.columns(2)
        extra["method_a"] = c[0].selectbox("Method 1", methods, key="review_new_ma")
        extra["method_b"] = c[1].selectbox("Method 2", methods, index=1, key="review_new_mb")
    elif task == "memory":
        builds = _builds(dataset)
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
            else:
                build_id, uid = extra["build"]
                ms = MemoryStore()
                stages = ms.done_stages(build_id)
                candidates = memory_candidates(build_id, ms.items_as_of(build_id, stages[-1]) if stages else [], uid)
            plan = plan_batch(title, task, dataset_key(dataset.root), candidates, n, seed, overlap, annotators,
                              guidelines)
            batch_id = store.create_batch(plan, account.name)
        except ValueError as e:
            st.error(str(e))
            return
        st.success(f"Created batch {batch_id} with {len(plan.items)} items.")
        st.session_state.pop("review_new_seed_default", None)
