"""Rendering of the Review page: annotator sessions over review batches, and the admin's batch tools.

Who is signed in comes from :func:`ui.access.current_identity` (re-checked against the accounts
on every run, so a removed account loses access at once; ``PAL_AUTH=local`` runs as the local admin).
An annotator sees only batches and items assigned to them, blinded: no method names, judge verdicts,
others' answers or majority votes; a crafted ``?batch=`` or ``?item=`` of someone else's shows an error
and never the item. Admins and researchers manage batches; only admins see the accounts.

State lives in the URL (``?batch=<id>&item=<n>``). Every answer is written the moment its button is
pressed; a completed item moves on to the next unanswered one. Keys: 1/2/3 answer the highlighted
question, n/p next/previous, u undo. All text from data goes through :func:`ui.text.md_escape`.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from palset.dataset import Dataset, dataset_key
from review.accounts import Account
from review.batches import TASKS
from review.store import ReviewStore
from ui.access import current_identity
from ui.platform_state import base_workspace, home_workspace
from ui.presenting import read_only_note, writes_allowed
from ui.review.accounts import render_accounts
from ui.review.admin import delete_control, go_to, new_batch, overview
from ui.review.content import render_content
from ui.text import md_escape, plain_links_markdown


def manages_batches(account: Account) -> bool:
    """Admins and researchers create batches and see overviews; annotators only answer, blinded."""
    return account.role in ("admin", "researcher")


def render_review(dataset: Dataset) -> None:
    st.title("Review")
    accounts, store = home_workspace().accounts, base_workspace().reviews
    account = current_identity(accounts)
    if account is None:  # app.py signs people in before any page: only a page run on its own gets here
        st.error("Sign in first.")
        return
    st.caption(f"Reviewing as **{md_escape(account.name)}** · {account.role}")
    if deleted := st.session_state.pop("review_deleted", None):  # set by the batch page's delete, shown once here
        st.success(deleted)
    batch_id = st.query_params.get("batch")
    if batch_id:
        _render_batch(store, account, batch_id, dataset)
        return
    if manages_batches(account):
        accounts_tab = account.is_admin and writes_allowed()  # presenting: this server's people are not shown
        labels = ["My assignments", "Batches", "New batch"] + (["Accounts"] if accounts_tab else [])
        tabs = st.tabs(labels)
        with tabs[0]:
            _batch_list(store, store.batches(account.name), account)
        with tabs[1]:
            _batch_list(store, store.batches(), account, admin=True)
        with tabs[2]:
            if writes_allowed():
                new_batch(store, accounts, account, dataset)
            else:
                read_only_note("no batch is created here")
        if accounts_tab:
            with tabs[3]:
                render_accounts(account)
    else:
        _batch_list(store, store.batches(account.name), account)


def _batch_list(store: ReviewStore, batches: list[dict], account: Account, admin: bool = False) -> None:
    if not batches:
        st.info("No batches yet." if admin else "No batches are assigned to you.")
        return
    for b in batches:
        cols = st.columns([4, 2, 1])
        done, total = store.progress(b["batch_id"], b["task"], account.name)
        cols[0].markdown(f"**{md_escape(b['title'])}** · {TASKS[b['task']].label} · {md_escape(b['batch_id'])}")
        if admin:
            cols[1].caption(f"{len(store.items(b['batch_id']))} items · overlap {b['overlap']} · seed {b['seed']}")
        else:
            cols[1].progress(done / total if total else 1.0, text=f"{done}/{total} done")
        cols[2].button("Open", key=f"review_open_{'admin_' if admin else ''}{b['batch_id']}", on_click=go_to,
                       args=(b["batch_id"],))


def _render_batch(store: ReviewStore, account: Account, batch_id: str, dataset: Dataset) -> None:
    batch = store.batch(batch_id)
    mine = store.assigned(batch_id, account.name) if batch else []
    st.button("All batches", key="review_back", icon=":material/arrow_back:", on_click=go_to)
    if batch is None or (not mine and not manages_batches(account)):
        st.error("This batch is not among your assignments.")
        return
    task = TASKS[batch["task"]]
    st.subheader(f"{md_escape(batch['title'])} · {task.label}")
    if batch["dataset"] != dataset_key(dataset.root):
        st.warning(f"This batch was drawn from another dataset ({md_escape(batch['dataset'])}); "
                   "switch the active dataset to see its items.")
    raw = st.query_params.get("item")
    if st.query_params.get("view") == "annotator" and manages_batches(account):
        _annotator_preview(store, batch, raw, dataset)
        return
    if manages_batches(account):
        _manager_actions(store, batch, account, mine)
        with st.expander("Batch overview: progress, agreement, disagreements, exports", expanded=not mine):
            overview(store, batch)
            if writes_allowed():
                delete_control(store, batch, account)
    if raw is not None:
        try:
            item_no = int(raw)
        except ValueError:
            item_no = -1
        if item_no not in mine:
            if manages_batches(account) and store.item(batch_id, item_no):
                _read_only_item(store, batch, item_no, dataset)
            else:
                st.error(f"Item {md_escape(raw)} is not one of your assignments in this batch.")
            return
    if mine and not writes_allowed():
        read_only_note("answers are not given here")
    elif mine:
        _annotate(store, account, batch, dataset, mine, raw)


def _manager_actions(store: ReviewStore, batch: dict, account: Account, mine: list[int]) -> None:
    """Preview the batch as its annotators get it; an admin not assigned to it may annotate it too (under local
    sign-in the one person is the admin, and the demo's batch was drawn for others)."""
    c1, c2, _ = st.columns([2, 2, 3])
    c1.button("Preview as an annotator", key="review_preview_open", icon=":material/visibility:",
              on_click=_preview_go, args=(batch["batch_id"], None))
    if account.is_admin and not mine and writes_allowed():
        c2.button("Annotate this batch yourself", key="review_join", icon=":material/edit_note:", type="primary",
                  on_click=_join, args=(store, batch["batch_id"], account.name))


def _join(store: ReviewStore, batch_id: str, who: str) -> None:
    added = store.join(batch_id, who)
    home_workspace().audit.record(who, "review.batch_join", batch_id, items=added)
    go_to(batch_id)


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
        st.markdown(plain_links_markdown(batch["guidelines"]))  # an admin's markdown: no images, links show targets
        st.button("Start", key="review_start", type="primary", shortcut="Enter", on_click=_guidelines_seen,
                  args=(batch_id,))
        return
    with st.popover("Guidelines", icon=":material/menu_book:"):
        st.markdown(plain_links_markdown(batch["guidelines"]))
    if raw is None:
        first = store.first_unanswered(batch_id, batch["task"], account.name)
        if first is None:
            st.success(f"All {total} items done. Thank you!")
            st.button("Review my answers from the start", key="review_restart", on_click=go_to, args=(batch_id, mine[0]))
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
    shown = render_content(batch, item, dataset, blinded=not manages_batches(account))
    focus = next((q.key for q in task.required if q.key not in given), None) if shown else None
    for q in task.questions:  # an item that could not be shown cannot be answered
        if q.free_text:
            st.text_input(q.label, value=given.get(q.key, ""), key=f"review_text_{batch_id}_{item_no}_{q.key}",
                          on_change=_save_text, args=(store, batch, account.name, item_no, q.key, mine),
                          disabled=not shown)
            continue
        hint = " · keys 1 2 3" if q.key == focus else ""
        st.markdown(f"**{md_escape(q.label)}**{hint}")
        cols = st.columns(len(q.options))
        for i, (value, label) in enumerate(q.options):
            cols[i].button(label, key=f"review_{q.key}_{value}", use_container_width=True,
                           type="primary" if given.get(q.key) == value else "secondary",
                           shortcut=str(i + 1) if q.key == focus else None, disabled=not shown,
                           on_click=_answer, args=(store, batch, account.name, item_no, q.key, value, mine))
    nav = st.columns(3)
    nav[0].button("Previous", key="review_prev", shortcut="p", icon=":material/chevron_left:", disabled=pos == 0,
                  on_click=go_to, args=(batch_id, mine[max(pos - 1, 0)]))
    nav[1].button("Next", key="review_next", shortcut="n", icon=":material/chevron_right:",
                  disabled=pos == len(mine) - 1, on_click=go_to, args=(batch_id, mine[min(pos + 1, len(mine) - 1)]))
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
            go_to(batch["batch_id"])  # all done
        else:
            go_to(batch["batch_id"], nxt)


def _save_text(store: ReviewStore, batch: dict, who: str, item_no: int, question: str, mine: list[int]) -> None:
    text = st.session_state.get(f"review_text_{batch['batch_id']}_{item_no}_{question}", "")
    store.answer(batch["batch_id"], item_no, who, question, text)


def _undo(store: ReviewStore, batch_id: str, who: str) -> None:
    row = store.undo_last(batch_id, who)
    if row is None:
        st.session_state["review_flash"] = "Nothing to undo."
        return
    st.session_state["review_flash"] = f"Undid the answer to “{row['question']}” of this item."
    go_to(batch_id, row["item_no"])


def _annotator_preview(store: ReviewStore, batch: dict, raw: str | None, dataset: Dataset) -> None:
    """One item exactly as its annotators get it — blinded content, guidelines, the questions — with nothing that
    answers (a researcher checking a batch, a presentation)."""
    items = store.items(batch["batch_id"])
    numbers = [i["item_no"] for i in items]
    item_no = int(raw) if raw and raw.isdigit() and int(raw) in numbers else (numbers[0] if numbers else None)
    st.info("What an annotator sees: no method names, judge verdicts or other people's answers. The questions are "
            "shown, not answered, here.", icon=":material/visibility:")
    st.button("Leave the preview", key="review_preview_leave", icon=":material/close:", on_click=_leave_preview)
    if item_no is None:
        st.caption("This batch has no items.")
        return
    task = TASKS[batch["task"]]
    with st.popover("Guidelines", icon=":material/menu_book:"):
        st.markdown(plain_links_markdown(batch["guidelines"]))
    st.markdown(f"**Item {numbers.index(item_no) + 1} of {len(numbers)}**")
    render_content(batch, store.item(batch["batch_id"], item_no), dataset, blinded=True)
    for q in task.questions:
        st.markdown(f"**{md_escape(q.label)}**")
        if q.free_text:
            st.text_input(q.label, key=f"review_preview_{q.key}", disabled=True, label_visibility="collapsed")
            continue
        cols = st.columns(len(q.options))
        for i, (value, label) in enumerate(q.options):
            cols[i].button(label, key=f"review_preview_{q.key}_{value}", use_container_width=True, disabled=True)
    nav = st.columns(2)
    pos = numbers.index(item_no)
    nav[0].button("Previous", key="review_preview_prev", icon=":material/chevron_left:", disabled=pos == 0,
                  on_click=_preview_go, args=(batch["batch_id"], numbers[max(pos - 1, 0)]))
    nav[1].button("Next", key="review_preview_next", icon=":material/chevron_right:", disabled=pos == len(numbers) - 1,
                  on_click=_preview_go, args=(batch["batch_id"], numbers[min(pos + 1, len(numbers) - 1)]))


def _preview_go(batch_id: str, item_no: int | None) -> None:
    go_to(batch_id, item_no)
    st.query_params["view"] = "annotator"


def _leave_preview() -> None:
    st.query_params.pop("view", None)


def _read_only_item(store: ReviewStore, batch: dict, item_no: int, dataset: Dataset) -> None:
    st.caption(f"Item {item_no} (read only: not assigned to you)")
    render_content(batch, store.item(batch["batch_id"], item_no), dataset, blinded=False)
    rows = store.answers(batch["batch_id"], item_no=item_no)
    if rows:
        st.dataframe(pd.DataFrame(rows)[["annotator", "question", "value"]], hide_index=True)
