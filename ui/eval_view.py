"""Rendering of the Evaluate page: FairEval pairwise judging of simulated runs, and the single-turn leaderboard.

A method pair (methods with finished runs in the active dataset) and an aspect are picked; Judge runs
FairEval (k samples per order, both orders) on the paired finished runs not judged yet, storing each
judgment the moment it completes. Results: stacked win/tie/lose bars with the bootstrap 95% CI of the
adjusted win rate, the position-bias diagnostics, a per-topic drill-down (both dialogues, every judge
sample in both orders, the ground truth) and exports. Below: the single-turn leaderboard from stored
bench results, judge–human agreement against pairwise review answers (for the chosen pair and aspects)
and PersonaMem-v2 accuracy (a placeholder until results exist).

State lives in the URL (``?pair=<A>__<B>&aspect=…&topic=<sample_id>_<topic_key>``): a deep link opens
exactly one judged topic. All text from data goes through :func:`ui.text.md_escape` or a dataframe cell.
"""

from __future__ import annotations

import csv
import importlib
import importlib.util
import io
import json
from collections.abc import Iterable

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from backends.store.db import connect
from evaluation.aggregate import aggregate_judgments, leaderboard
from evaluation.faireval import ASPECTS, Judgment, apply_decision, ground_truth, judgment_key
from evaluation.human_agreement import AgreementReport, compare_by_aspect, pairwise_votes
from evaluation.service import RunPair, bench_tasks, judge_runs, pair_runs, topic_context
from evaluation.store import EvalStore
from evaluation.tasks import TaskResult
from memory.service import dataset_key
from palset.dataset import Dataset
from review.store import ReviewStore
from sim.store import SimStore
from sim.types import RunRecord
from ui import platform_state
from ui.memory_view import available_methods
from ui.text import md_escape

ASPECT_CHOICES = ["requirement", "preference", "both"]
PAIR_SEP = "__"
OUTCOME_COLOURS = {"win": "#2e7d32", "tie": "#9e9e9e", "lose": "#c62828"}
DECISION_BADGES = {"win": "green", "tie": "gray", "lose": "red", "invalid": "orange"}
_KEYS = {"a": "eval_a", "b": "eval_b", "aspect": "eval_aspect"}


# ---------------------------------------------------------------- URL-synced state


def _sync_from_url(name: str, wanted: str | None, allowed: list[str], fallback: str) -> None:
    """Before drawing a widget: a URL value that changed since the last run wins over the widget's value."""
    key, seen = _KEYS[name], f"_url_eval_{name}"
    if wanted in allowed and wanted != st.session_state.get(seen):
        st.session_state[key] = wanted
        st.session_state[seen] = wanted
    elif st.session_state.get(key) not in allowed:
        st.session_state[key] = fallback


def _pair_from_url() -> tuple[str | None, str | None]:
    raw = st.query_params.get("pair") or ""
    if PAIR_SEP in raw:
        a, b = raw.split(PAIR_SEP, 1)
        return a, b
    return None, None


def error_text(e: Exception) -> str:
    from backends.llm.errors import LLMError

    return str(e) if isinstance(e, LLMError) else f"{type(e).__name__}: {e}"


# ---------------------------------------------------------------- data


def finished_methods(sims: SimStore, dkey: str) -> list[str]:
    """Methods with at least one finished simulation run in this dataset."""
    return sorted({r["method"] for r in sims.list(dataset=dkey, status="finished")})


def latest_judgments(judgments: Iterable[Judgment]) -> list[Judgment]:
    """The newest judgment per (user, sample, topic, aspect): re-judging with other settings replaces the shown one."""
    newest: dict[tuple[str, str, str, str], Judgment] = {}
    for j in judgments:  # oldest first
        newest[(j.user_id, j.sample_id, j.topic_key, j.aspect)] = j
    return sorted(newest.values(), key=lambda j: (j.user_id, j.sample_id, j.topic_key, j.aspect))


def stored_results(dkey: str) -> list[TaskResult]:
    """Stored single-turn bench results of this dataset; the newest per (topic, method, task)."""
    path = EvalStore().path
    with connect(path) as conn:
        rows = conn.execute("SELECT data FROM bench_results WHERE dataset=? ORDER BY created_at", (dkey,)).fetchall()
    newest: dict[tuple, TaskResult] = {}
    for row in rows:
        r = TaskResult.model_validate_json(row[0])
        newest[(r.user_id, r.sample_id, r.topic_key, r.method, r.task)] = r
    return list(newest.values())


def topic_id(j: Judgment) -> str:
    return f"{j.sample_id}_{j.topic_key}"


def judgments_frame(judgments: list[Judgment]) -> pd.DataFrame:
    """One row per judgment (topic × aspect), flat, for the export."""
    rows = [{"user_id": j.user_id, "sample_id": j.sample_id, "topic_key": j.topic_key, "aspect": j.aspect,
             "method_a": j.method_a, "method_b": j.method_b, "run_a": j.run_a, "run_b": j.run_b,
             "decision": j.decision, "mean_a": j.mean_a, "mean_b": j.mean_b, "flipped": j.flipped,
             "order1_winner": j.order1_winner, "order2_winner": j.order2_winner, "invalid": j.invalid,
             "k": j.k, "threshold": j.threshold, "judge_model": j.judge_model, "prompt_version": j.prompt_version,
             "judgment_key": j.judgment_key} for j in judgments]
    return pd.DataFrame(rows)


def topics_frame(judgments: list[Judgment]) -> pd.DataFrame:
    """One row per judged topic: decision per aspect and whether any aspect flipped under the swap."""
    by_topic: dict[tuple[str, str, str], dict] = {}
    for j in judgments:
        row = by_topic.setdefault((j.user_id, j.sample_id, j.topic_key),
                                  {"user": j.user_id, "sample": j.sample_id, "topic": j.topic_key,
                                   **{a: "" for a in ASPECTS}, "flipped": False})
        row[j.aspect] = j.decision
        row["flipped"] = row["flipped"] or j.flipped
    columns = ["user", "sample", "topic", *ASPECTS, "flipped"]
    return pd.DataFrame(list(by_topic.values()), columns=columns)


def aggregates_frame(rows: list[dict]) -> pd.DataFrame:
    out = []
    for r in rows:
        lo, hi = r["adjusted_win_rate_ci"]
        out.append({"method_a": r["method_a"], "method_b": r["method_b"], "aspect": r["aspect"], "n": r["n"],
                    "win": r["win"], "tie": r["tie"], "lose": r["lose"], "invalid": r["invalid"],
                    "adjusted_win_rate": r["adjusted_win_rate"], "ci_low": lo, "ci_high": hi,
                    "flip_rate": r["flip_rate"], "slot1_win_rate": r["slot1_win_rate"],
                    "invalid_samples": r["invalid_samples"], "samples": r["samples"], "threshold": r["threshold"]})
    return pd.DataFrame(out)


def to_csv(frame: pd.DataFrame) -> str:
    buf = io.StringIO()
    frame.to_csv(buf, index=False, quoting=csv.QUOTE_NONNUMERIC)
    return buf.getvalue()


def to_jsonl(judgments: list[Judgment], aggregates: list[dict]) -> str:
    """Every shown judgment in full, then every aggregate row, one JSON object a line."""
    lines = [json.dumps({"type": "judgment", **j.model_dump(mode="json")}, ensure_ascii=False) for j in judgments]
    lines += [json.dumps({"type": "aggregate", **a}, ensure_ascii=False, default=str) for a in aggregates]
    return "\n".join(lines) + "\n"


def outcome_figure(rows: list[dict], method_a: str, method_b: str) -> go.Figure:
    """Stacked win/tie/lose shares per aspect (A's view), with the adjusted win rate and its 95% bootstrap CI."""
    fig = go.Figure()
    aspects = [r["aspect"] for r in rows]
    for outcome in ("win", "tie", "lose"):
        fig.add_bar(y=aspects, x=[r[f"{outcome}_rate"] for r in rows], name=outcome, orientation="h",
                    marker_color=OUTCOME_COLOURS[outcome], text=[f"{r[outcome]}" for r in rows],
                    textposition="inside", customdata=[r[outcome] for r in rows],
                    hovertemplate=f"{outcome}: %{{customdata}} (%{{x:.0%}})<extra></extra>")
    adj = [r["adjusted_win_rate"] for r in rows]
    lo = [r["adjusted_win_rate_ci"][0] for r in rows]
    hi = [r["adjusted_win_rate_ci"][1] for r in rows]
    fig.add_scatter(y=aspects, x=adj, mode="markers", name="adjusted win rate (95% CI)",
                    marker={"color": "black", "symbol": "diamond", "size": 10},
                    error_x={"type": "data", "symmetric": False, "array": [h - a for h, a in zip(hi, adj)],
                             "arrayminus": [a - low for a, low in zip(adj, lo)], "color": "black", "thickness": 2},
                    hovertemplate="adjusted win rate %{x:.3f}<extra></extra>")
    for aspect, a, low, high in zip(aspects, adj, lo, hi):
        fig.add_annotation(y=aspect, x=1.0, xanchor="left", showarrow=False, xshift=6,
                           text=f"{a:.2f} [{low:.2f}, {high:.2f}]")
    fig.update_layout(barmode="stack", height=120 + 70 * len(rows), margin={"l": 10, "r": 130, "t": 30, "b": 30},
                      xaxis={"range": [0, 1], "tickformat": ".0%", "title": f"share of topics ({method_a} vs {method_b})"},
                      legend={"orientation": "h", "y": 1.15})
    return fig


# ---------------------------------------------------------------- page


def render_evaluate(dataset: Dataset) -> None:
    st.title("Evaluate")
    dkey = dataset_key(dataset.root)
    sims = SimStore()
    methods = finished_methods(sims, dkey)
    st.header("Multi-turn: FairEval pairwise judging")
    selection = None
    if len(methods) < 2:
        st.info("Judging needs finished simulation runs of at least two methods on the same topics in this dataset. "
                "Run them on the Simulate page (or with `pal simulate`).")
    else:
        selection = render_pairwise(dataset, dkey, sims, methods)
    st.header("Single-turn leaderboard")
    render_leaderboard(dataset, dkey)
    st.header("Judge–human agreement")
    render_agreement(dkey, selection)
    st.header("PersonaMem-v2 accuracy by type")
    render_personamem(dkey)


def _pick(methods: list[str]) -> tuple[str, str, list[str]]:
    url_a, url_b = _pair_from_url()
    _sync_from_url("a", url_a, methods, methods[0])
    c1, c2, c3 = st.columns([2, 2, 2])
    with c1:
        a = st.selectbox("Method under test (A)", methods, key=_KEYS["a"])
    others = [m for m in methods if m != a]
    _sync_from_url("b", url_b, others, others[0])
    with c2:
        b = st.selectbox("Baseline (B)", others, key=_KEYS["b"])
    _sync_from_url("aspect", st.query_params.get("aspect"), ASPECT_CHOICES, "both")
    with c3:
        aspect = st.segmented_control("Aspect", ASPECT_CHOICES, required=True, key=_KEYS["aspect"])
    pair = f"{a}{PAIR_SEP}{b}"
    if st.query_params.get("pair") != pair:
        st.query_params["pair"] = pair
        st.query_params.pop("topic", None)
    st.query_params["aspect"] = aspect
    st.session_state["_url_eval_a"], st.session_state["_url_eval_b"] = a, b
    st.session_state["_url_eval_aspect"] = aspect
    return a, b, list(ASPECTS) if aspect == "both" else [aspect]


def render_pairwise(dataset: Dataset, dkey: str, sims: SimStore,
                    methods: list[str]) -> tuple[str, str, list[str], float]:
    """The pairwise section; returns the chosen (A, B, aspects, tie threshold) for the agreement section."""
    a, b, aspects = _pick(methods)
    pairs = pair_runs(sims, dkey, a, b)
    c1, c2, c3 = st.columns([1, 1, 2])
    k = int(c1.number_input("Samples per order (k)", 1, 10, 3, key="eval_k",
                            help="FairEval Multiple Evidence: k judge samples with A shown first, k with B first."))
    threshold = float(c2.number_input("Tie threshold", 0.0, 9.0, 0.0, step=0.25, key="eval_threshold",
                                      help="A tie when the mean scores differ by at most this (0: exact equality, "
                                           "as the paper). Decisions of stored judgments are recomputed with it."))
    with c3:
        render_judge_button(dataset, sims, pairs, aspects, k, threshold)
    store = EvalStore()
    judgments = latest_judgments(j for j in store.judgments(dataset=dkey, method_a=a, method_b=b)
                                 if j.aspect in aspects)
    judgments = [apply_decision(j, threshold) for j in judgments]
    if not judgments:
        st.info(f"No judgments of {md_escape(a)} vs {md_escape(b)} yet: press Judge.")
        return a, b, aspects, threshold
    rows = aggregate_judgments(judgments, threshold)
    render_results(rows, judgments, a, b)
    render_drilldown(dataset, sims, judgments, a, b)
    render_exports(judgments, rows, a, b)
    return a, b, aspects, threshold


def render_judge_button(dataset: Dataset, sims: SimStore, pairs: list[RunPair], aspects: list[str], k: int,
                        threshold: float) -> None:
    if not pairs:
        st.caption("No topic has finished runs of both methods: nothing to judge.")
        return
    try:
        llm = platform_state.llm_client()
        from backends.prompts import load_prompt

        model = llm.config.role("judge").model
        versions = {a: load_prompt(f"eval/faireval_{a}").version for a in aspects}
    except Exception as e:  # noqa: BLE001 - configuration problems are a message
        st.error(f"Cannot judge: {md_escape(error_text(e))}")
        return
    store = EvalStore()
    todo = [p for p in pairs if any(not store.has_judgment(judgment_key(p.run_a, p.run_b, a, k, model, versions[a]))
                                    for a in aspects)]
    st.caption(f"{len(pairs)} paired topic(s); {len(todo)} not judged yet with k={k} by {md_escape(model)}.")
    if not st.button("Judge", key="eval_judge", type="primary", icon=":material/balance:", disabled=not todo):
        return
    bar = st.progress(0.0, text=f"Judging {len(todo)} topic(s)…")

    def progress(done: int, total: int, what: str) -> None:
        bar.progress(done / total, text=f"[{done}/{total}] {what}")

    try:
        judge_runs(llm, dataset, sims, store, todo, aspects, k=k, threshold=threshold,  # type: ignore[arg-type]
                   progress=progress)
    except Exception as e:  # noqa: BLE001 - LLM, dataset or store problems: a message, never a traceback
        st.error(f"Judging stopped: {md_escape(error_text(e))}. Every finished judgment is stored; press Judge "
                 "again to continue.")
        return
    bar.empty()
    st.success(f"Judged {len(todo)} topic(s).")


def render_results(rows: list[dict], judgments: list[Judgment], a: str, b: str) -> None:
    st.subheader("Outcomes")
    st.caption(f"From {md_escape(a)}'s side against {md_escape(b)}: win/tie/lose per topic; diamond = adjusted win "
               "rate (win + ½ tie) with its 95% bootstrap CI over topics.")
    st.plotly_chart(outcome_figure(rows, a, b), key="eval_outcomes", width="stretch")
    st.subheader("Position bias")
    for r in rows:
        c1, c2, c3, c4 = st.columns(4)
        c1.metric(f"{r['aspect']}: topics", r["n"], help="valid decisions (win + tie + lose)")
        c2.metric("Flip rate", f"{r['flip_rate']:.0%}",
                  help="topics where the winner changed when the two dialogues were swapped")
        c3.metric("Slot-1 win rate", f"{r['slot1_win_rate']:.0%}",
                  help="share of valid samples where whichever dialogue was shown first scored higher (0.5 = no bias)")
        c4.metric("Invalid samples", f"{r['invalid_samples']} / {r['samples']}")
    frame = aggregates_frame(rows)
    st.dataframe(frame, hide_index=True, width="stretch", key="eval_aggregates")
    per_user = [{"aspect": r["aspect"], "user": u, **{x: c[x] for x in ("win", "tie", "lose", "invalid")},
                 "adjusted_win_rate": c["adjusted_win_rate"]} for r in rows for u, c in r["per_user"].items()]
    if per_user:
        with st.expander("Per user"):
            st.dataframe(pd.DataFrame(per_user), hide_index=True, width="stretch", key="eval_per_user")
    models = sorted({f"{j.judge_model} · k={j.k} · prompt {j.prompt_version}" for j in judgments})
    st.caption("Judge: " + md_escape("; ".join(models)))


# ---------------------------------------------------------------- drill-down


def _select_topic(ids: list[str]) -> None:
    rows = (st.session_state.get("eval_topics_table") or {}).get("selection", {}).get("rows", [])
    if rows and rows[0] < len(ids):
        st.query_params["topic"] = ids[rows[0]]


def render_drilldown(dataset: Dataset, sims: SimStore, judgments: list[Judgment], a: str, b: str) -> None:
    st.subheader("Judged topics")
    frame = topics_frame(judgments)
    ids = [f"{s}_{t}" for s, t in zip(frame["sample"], frame["topic"])]
    st.caption("Select a row to read both dialogues and every judge sample.")
    st.dataframe(frame, hide_index=True, width="stretch", key="eval_topics_table", selection_mode="single-row",
                 on_select=lambda: _select_topic(ids))
    wanted = st.query_params.get("topic")
    if not wanted:
        return
    chosen = [j for j in judgments if topic_id(j) == wanted]
    if not chosen:
        st.warning(f"No judgment of {md_escape(a)} vs {md_escape(b)} on {md_escape(wanted)} in this view.")
        return
    render_topic(dataset, sims, chosen)


def render_topic(dataset: Dataset, sims: SimStore, chosen: list[Judgment]) -> None:
    first = chosen[0]
    st.subheader(f"{first.user_id} · {first.sample_id} · {first.topic_key}", anchor="eval-topic")
    if st.button("Close", key="eval_close_topic", icon=":material/close:", type="tertiary"):
        st.query_params.pop("topic", None)
        st.rerun()
    render_ground_truth(dataset, first)
    render_dialogues(sims, first)
    for j in chosen:
        render_samples(j)


def render_ground_truth(dataset: Dataset, j: Judgment) -> None:
    with st.expander("Ground truth (what the judge was given)", expanded=True):
        try:
            ctx = topic_context(dataset, j.user_id, j.sample_id, j.topic_key)
        except Exception as e:  # noqa: BLE001 - the dataset may lack this topic
            st.caption(f"The active dataset does not have this topic: {md_escape(error_text(e))}")
            return
        c1, c2 = st.columns(2)
        for col, aspect in zip((c1, c2), ASPECTS):
            with col:
                st.markdown(f"**{aspect.capitalize()}**  \n{md_escape(ground_truth(ctx, aspect))}")


def _load(sims: SimStore, run_id: str) -> RunRecord | None:
    try:
        return sims.load(run_id)
    except KeyError:
        return None


def render_dialogues(sims: SimStore, j: Judgment) -> None:
    c1, c2 = st.columns(2, gap="medium")
    for col, method, run_id, label in ((c1, j.method_a, j.run_a, "A"), (c2, j.method_b, j.run_b, "B")):
        with col:
            st.markdown(f"#### {label}: {md_escape(method)}  \n:gray[{md_escape(run_id)}]")
            record = _load(sims, run_id)
            if record is None:
                st.caption("This run is no longer stored; the judged text follows.")
                st.markdown(md_escape(j.texts["order1"].assistant_1 if label == "A" else j.texts["order1"].assistant_2))
                continue
            for utt in record.utterances:
                with st.chat_message("user" if utt.side == "user" else "assistant"):
                    st.markdown(f":gray-badge[{md_escape(utt.act.value)}]  \n{md_escape(utt.content)}")


def render_samples(j: Judgment) -> None:
    colour = DECISION_BADGES.get(j.decision, "gray")
    means = f"{j.mean_a:.2f} vs {j.mean_b:.2f}" if j.mean_a is not None and j.mean_b is not None else "no valid samples"
    st.markdown(f"##### {j.aspect.capitalize()}: :{colour}-badge[{j.decision}] :gray[mean {means} · "
                f"order 1 → {j.order1_winner} · order 2 → {j.order2_winner}"
                f"{' · flipped' if j.flipped else ''} · {j.invalid} invalid]")
    names = {1: (j.method_a, j.method_b), 2: (j.method_b, j.method_a)}
    c1, c2 = st.columns(2, gap="medium")
    for col, order in ((c1, 1), (c2, 2)):
        first, second = names[order]
        with col:
            title = "as is" if order == 1 else "swapped"
            st.markdown(f"**Order {order} ({title}): assistant-1 = {md_escape(first)}, "
                        f"assistant-2 = {md_escape(second)}**")
            for s in [s for s in j.samples if s.order == order]:
                with st.container(border=True):
                    if not s.ok:
                        st.markdown(f":orange-badge[invalid] :gray[sample {s.index + 1} · {s.attempts} tries]  \n"
                                    + md_escape("; ".join(s.errors) or "no valid output"))
                        continue
                    st.markdown(f":gray[sample {s.index + 1}] · assistant-1 **{s.slot1}** · assistant-2 **{s.slot2}** "
                                f"→ {md_escape(j.method_a)} {s.score_a}, {md_escape(j.method_b)} {s.score_b}")
                    analysis = s.analysis or {}
                    for part in ("assistant-1", "assistant-2", "overall"):
                        if analysis.get(part):
                            st.markdown(f"*{part}:* {md_escape(analysis[part])}")


# ---------------------------------------------------------------- exports


def render_exports(judgments: list[Judgment], rows: list[dict], a: str, b: str) -> None:
    stem = f"faireval_{a}_vs_{b}"
    c1, c2, c3 = st.columns(3)
    c1.download_button("Judgments CSV", to_csv(judgments_frame(judgments)), file_name=f"{stem}_judgments.csv",
                       mime="text/csv", icon=":material/download:", key="eval_csv", on_click="ignore")
    c2.download_button("Aggregates CSV", to_csv(aggregates_frame(rows)), file_name=f"{stem}_aggregates.csv",
                       mime="text/csv", icon=":material/download:", key="eval_agg_csv", on_click="ignore")
    c3.download_button("Judgments + aggregates JSONL", to_jsonl(judgments, rows), file_name=f"{stem}.jsonl",
                       mime="application/jsonl", icon=":material/download:", key="eval_jsonl", on_click="ignore")


# ---------------------------------------------------------------- single-turn leaderboard


def _cell(m: dict, digits: int = 1) -> str:
    lo, hi = m["ci"]
    return f"{m['value']:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]" if m["n"] else "–"


LEADER_COLUMNS = [("R-BLEU-1", "restatement_bleu1"), ("R-BLEU-2", "restatement_bleu2"),
                  ("R-BLEU-3", "restatement_bleu3"), ("R-BLEU-4", "restatement_bleu4"), ("G-score", "g_score"),
                  ("P-BLEU-1", "proposal_bleu1"), ("P-BLEU-2", "proposal_bleu2"), ("P-BLEU-3", "proposal_bleu3"),
                  ("P-BLEU-4", "proposal_bleu4"), ("S-score", "s_score")]


def leaderboard_frame(rows: list[dict]) -> pd.DataFrame:
    out = []
    for r in rows:
        row = {"method": r["method"], **{name: _cell(r[key]) for name, key in LEADER_COLUMNS},
               "topics": r["g_score"]["n"] or r["s_score"]["n"],
               "invalid": r["restatement_invalid"] + r["proposal_invalid"] + r["selection_invalid"]}
        out.append(row)
    return pd.DataFrame(out, columns=["method", *(n for n, _ in LEADER_COLUMNS), "topics", "invalid"])


def render_leaderboard(dataset: Dataset, dkey: str) -> None:
    results = stored_results(dkey)
    if results:
        frame = leaderboard_frame(leaderboard(results))
        st.dataframe(frame, hide_index=True, width="stretch", key="eval_leaderboard")
        st.caption("BLEU ×100 (restatement R-, proposal P-), G-score 0–100, S-score −100–100; "
                   "95% bootstrap CIs over topics.")
        st.download_button("Leaderboard CSV", to_csv(frame), file_name="single_turn_leaderboard.csv", mime="text/csv",
                           icon=":material/download:", key="eval_leader_csv", on_click="ignore")
    else:
        st.info("No single-turn results for this dataset yet.")
    with st.expander("Run single-turn tasks"):
        methods = st.multiselect("Methods", available_methods(), key="eval_bench_methods")
        users = st.multiselect("Users (empty: all)", list(dataset.users), key="eval_bench_users")
        if st.button("Run single-turn tasks", key="eval_bench_run", icon=":material/play_arrow:",
                     disabled=not methods):
            bar = st.progress(0.0, text="Running the single-turn tasks…")
            try:
                bench_tasks(platform_state.llm_client(), dataset, methods, EvalStore(), users or None,
                            progress=lambda d, t, w: bar.progress(d / t, text=f"[{d}/{t}] {w}"))
            except Exception as e:  # noqa: BLE001 - a message, never a traceback; finished results are stored
                st.error(f"The tasks stopped: {md_escape(error_text(e))}. Finished results are stored; run again "
                         "to continue.")
                return
            st.rerun()


# ---------------------------------------------------------------- agreement and PersonaMem-v2


def agreement_reports(dkey: str, a: str, b: str, aspects: list[str], threshold: float) -> dict[str, AgreementReport]:
    """Per aspect: the judge (either orientation, decisions recomputed with the threshold) against the human
    majority of every pairwise review batch of this dataset on the pair ``a``/``b``; win is ``a``'s side."""
    votes = [v for v in pairwise_votes(ReviewStore(), dataset=dkey)
             if set(v.methods) == {a, b} and v.aspect in aspects]
    judgments = [apply_decision(j, threshold) for j in EvalStore().judgments(dataset=dkey)
                 if {j.method_a, j.method_b} == {a, b} and j.aspect in aspects]
    return compare_by_aspect(votes, judgments, (a, b))


def render_agreement(dkey: str, selection: tuple[str, str, list[str], float] | None) -> None:
    reports = agreement_reports(dkey, *selection) if selection else {}
    if not any(r.matched for r in reports.values()):
        items = sum(r.items for r in reports.values())
        st.info("Judge–human agreement appears here once pairwise human annotations (Review page) of the chosen "
                "method pair match stored judgments" + (f": {items} answered item(s), none judged yet." if items
                                                       else "."))
        return
    render_judge_human(reports, "eval_human")


def render_judge_human(reports: dict[str, AgreementReport], key: str) -> None:
    """The agreement section: one block per aspect (metrics, the confusion table, the items)."""
    for aspect, report in reports.items():
        render_agreement_report(aspect, report, f"{key}_{aspect}")


def _fmt(value: float | None, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def render_agreement_report(aspect: str, r: AgreementReport, key: str) -> None:
    a, b = r.pair
    st.markdown(f"**{md_escape(aspect.capitalize())}**: win/tie/lose from {md_escape(a)}'s side against "
                f"{md_escape(b)}, judge vs the human majority")
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Matched items", r.matched, help=f"human items with a judgment; {r.unmatched} without one, "
                                                 f"{r.unmatched_judgments} judgment(s) without human answers")
    c2.metric("Agreement (no ties)", _fmt(r.agreement_rate, ".0%"),
              help=f"{r.agreements} of {r.compared} items that neither side called a tie")
    c3.metric("Cohen's κ (no ties)", _fmt(r.kappa, ".3f"),
              help=f"win/lose items only; over win/tie/lose: {_fmt(r.kappa_all, '.3f')}")
    c4.metric("Unmatched items", r.unmatched, help="human items without a valid judgment")
    st.caption(f"{r.human_ties} human tie(s), {r.judge_ties} judge tie(s), {r.splits} split vote(s) "
               "(no majority: left out of the table).")
    left, right = st.columns([2, 3])
    left.dataframe(r.confusion, key=f"{key}_confusion")
    right.dataframe(pd.DataFrame(r.rows), hide_index=True, width="stretch", key=f"{key}_items")


def personamem_results(dkey: str) -> list[dict] | None:
    """Stored PersonaMem-v2 accuracy rows when evaluation.personamem exposes them; None otherwise."""
    if importlib.util.find_spec("evaluation.personamem") is None:
        return None
    try:
        mod = importlib.import_module("evaluation.personamem")
    except Exception:  # noqa: BLE001 - a module being written must not break the page
        return None
    if callable(getattr(mod, "stored_records", None)) and callable(getattr(mod, "accuracy_by_method", None)):
        try:
            return mod.accuracy_by_method(mod.stored_records())
        except Exception:  # noqa: BLE001
            return None
    for name in ("accuracy_by_type", "stored_accuracy", "stored_results"):
        fn = getattr(mod, name, None)
        if callable(fn):
            try:
                rows = fn()
            except Exception:  # noqa: BLE001
                return None
            return [r if isinstance(r, dict) else r.model_dump() if hasattr(r, "model_dump") else {"value": r}
                    for r in rows]
    return None


def render_personamem(dkey: str) -> None:
    rows = personamem_results(dkey)
    if not rows:
        st.info("No PersonaMem-v2 results yet. `pal personamem` prints its accuracy report (and writes every record "
                "with `--records`); results appear here once they are stored in the PAL home.")
        return
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key="eval_personamem")
