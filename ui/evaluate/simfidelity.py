"""The Evaluate page's simulator-fidelity leaderboard: one row per simulator (variant and model) over the dataset's
checked runs — the reference simulators first — with the distribution distances to the dataset's own user turns,
a form that checks the runs not checked yet, the CSV export, and the filter that keeps FairEval judgments of runs
whose simulated user passed every check, or whose runs are under a share of intervened/composed turns; each arm's
interventions beside FairEval's win/tie/lose; counterfactual probes for over-cooperation as rows of the board."""

from __future__ import annotations

import logging

import pandas as pd
import streamlit as st

from evaluation.faireval import Judgment
from evaluation.faireval_interventions import SHARES, pooled, under_share, with_interventions
from evaluation.simfidelity import CHECK_DEFINITIONS, FIGURE_DEFINITIONS
from evaluation.simfidelity.aggregate import HEADLINE, RATES, VIEWS, leaderboard
from evaluation.simfidelity.export import board_csv, figures_on
from evaluation.simfidelity.instruments import Advice, advice
from evaluation.simfidelity.probes import PROBE_SIMULATORS, build_cases, llm_side, measure_probes, reference_side
from evaluation.simfidelity.service import OWN_DIALOGUE_SIMULATORS, matchers, measure_runs, own_dialogue_runs
from evaluation.simfidelity.stance_instruments import INSTRUMENT_NAMES, STANCE_INSTRUMENTS
from evaluation.simfidelity.types import SimFidelityConfig
from evaluation.takeaway_words import Estimate, Language, cell_text, figure_label, format_value, wilson
from evaluation.takeaways import is_reference_simulator, simulator_subject, simulator_takeaway
from palset.dataset import Dataset
from sim.rulebook import rulebook_version
from sim.store import SimStore
from ui import platform_state
from ui.charts import build_estimates_figure
from ui.evaluate.takeaway import board_language, dataset_arg, render_references, render_takeaway
from ui.platform_state import base_workspace
from ui.presenting import read_only_note, writes_allowed
from ui.text import error_text, md_escape

log = logging.getLogger(__name__)


def _rate(value: float | None, signed: bool = False) -> str:
    return "–" if value is None else (f"{value:+.3f}" if signed else f"{value:.3f}")


HEADLINE_FIGURE = "verdict_consistency"  # the board's first figure (the takeaway's headline)
# then every other registered check's rate (registry order), the verdict figures and the vagueness gap
SIM_COLUMNS = (HEADLINE_FIGURE, *(f for f in HEADLINE if f != HEADLINE_FIGURE))
CHART_FIGURES = ("verdict_consistency", "truthful_rate", "persona_rate", "acceptance_rate", "implied_acceptance")


def board_frame(rows: list[dict], on: str = "kept", language: Language = "en") -> pd.DataFrame:
    """One row per simulator: the figures ``on`` what was kept or the model's first drafts under their readable
    names (n/a as –; on kept turns the share of verdicts matching the preferences with its Wilson 95% interval),
    then the share of its turns intervened in and composed, the counts, and each distance with its p-value."""
    out = []
    for r in rows:
        f = figures_on(r, on)
        i = r["interventions"]
        row: dict = {"simulator": r["simulator"], "model": r["simulator_model"]}
        for name in SIM_COLUMNS:
            row[figure_label(name, language)] = _figure_cell(r, f, name, on)
        row.update({"intervened": _rate(i["intervention_share"]), "composed": _rate(i["composed_share"]),
                    "runs": r["runs"], "passed": r["passed"], "no gold": r["no_gold"], "turns": f["turns"]})
        for name, d in r["distances"].items():
            row[f"{name} distance (p)"] = "–" if d["distance"] is None else f"{d['distance']:+.3f} ({d['p']:.3g})"
        out.append(row)
    return pd.DataFrame(out)


def _figure_cell(row: dict, figures: dict, name: str, on: str) -> str:
    """A figure as its unit reads; on kept turns a pooled share with its Wilson 95% interval beside it."""
    if name == "vagueness_gap":
        return _rate(figures.get(name), signed=True)
    if on == "kept" and (name in RATES or name in ("acceptance_rate", "implied_acceptance")):
        return cell_text(name, _count_estimate(row.get("counts") or {}, name))
    value = figures.get(name)
    return "–" if value is None else format_value(name, value)


def _count_estimate(counts: dict, name: str) -> Estimate:
    if name in ("acceptance_rate", "implied_acceptance"):
        hit = "accepted" if name == "acceptance_rate" else "implied"
        return wilson(counts.get(hit, 0), counts.get("verdict_matched", 0))
    check = RATES[name]
    return wilson(counts.get(f"{check}_pass", 0), counts.get(f"{check}_n", 0))


def chart_series(rows: list[dict]) -> dict[str, dict[str, tuple]]:
    """simulator → figure → (share, Wilson low, high) over the kept turns' counts, for the chart above the board."""
    series: dict[str, dict[str, tuple]] = {}
    for r in rows:
        estimates = {n: _count_estimate(r.get("counts") or {}, n) for n in CHART_FIGURES}
        series[simulator_subject(r)] = {n: (e.value, e.low, e.high) for n, e in estimates.items() if e.value is not None}
    return series


def render_simulator_board(dataset: Dataset, dkey: str) -> None:
    results = base_workspace().simfidelity.results(dkey)
    rows = leaderboard(results)
    language = board_language(dataset)
    takeaway = simulator_takeaway(rows, language, dataset=dataset_arg(dataset))
    if render_takeaway(takeaway, "eval_simfid"):
        st.plotly_chart(build_estimates_figure(chart_series(rows), {n: figure_label(n, language)
                                                                    for n in CHART_FIGURES}),
                        key="eval_simfid_chart", width="stretch")
        on = st.segmented_control("Figures on", list(VIEWS), default="kept", required=True, key="eval_simfid_on",
                                  help=FIGURE_DEFINITIONS["on"])
        simulators = [r for r in rows if not is_reference_simulator(r["simulator"])]
        references = [r for r in rows if is_reference_simulator(r["simulator"])]
        if simulators:
            st.dataframe(board_frame(simulators, on, language), hide_index=True, width="stretch",
                         key="eval_simfid_board")
        else:
            st.caption("Only the reference simulators are checked here yet (folded below): check runs of a simulator "
                       "to rank it against them.")
        render_references(takeaway, board_frame(references, on, language), "eval_simfid_refs",
                          f"Reference simulators ({len(references)}): the ceiling and the floors")
        notes = [f"{r['simulator']} · {r['simulator_model']}: {r['interventions']['note']}" for r in rows
                 if r["interventions"]["note"]]
        if on != "kept":
            for r in rows:
                if r["first_drafts"]["note"]:
                    st.caption(f"{md_escape(r['simulator'])} · {md_escape(r['simulator_model'])}: "
                               f"{md_escape(r['first_drafts']['note'])}.")
        if notes:
            with st.expander("What the record cannot say"):
                st.markdown("\n".join(f"- {md_escape(n)}" for n in notes))
        st.caption("Rates pool the checked user turns of each simulator's runs (n/a turns left out); runs without "
                   "gold count only in 'no gold' (n/a — no gold). Reference simulators: replay (the dataset's own "
                   "dialogue, the ceiling), always-accept and random-verdict (floors).")
        with st.expander("What each check and figure means"):
            st.markdown("\n".join(f"- **{md_escape(k)}**: {md_escape(v)}"
                                   for k, v in {**CHECK_DEFINITIONS, **FIGURE_DEFINITIONS}.items()))
        st.download_button("Simulator fidelity CSV", lambda: board_csv(rows), file_name="simulator_fidelity.csv",
                           mime="text/csv", icon=":material/download:", key="eval_simfid_csv", on_click="ignore")
    if not writes_allowed():
        read_only_note("runs are not checked here; the table shows the bundle's results")
        return
    render_check_form(dataset, dkey, {r.run_id for r in results})


def stance_advice() -> Advice | None:
    """What the stored corpus measurements (``pal simulate corpus --save``) say of the configured judge model as the
    stance instrument against the rules of the current rulebook (None: not both measured)."""
    ws = base_workspace()
    judge = ws.config.role("judge").model
    return advice(ws.instruments.latest("rule", "", rulebook_version()), ws.instruments.latest("judge", judge))


def render_check_form(dataset: Dataset, dkey: str, checked: set[str]) -> None:
    runs = base_workspace().sims.list(dataset=dkey)
    with st.expander(f"Check simulated users ({len(runs) - len(checked & {r['run_id'] for r in runs})} of "
                     f"{len(runs)} run(s) not checked)"):
        c1, c2, c3 = st.columns(3)
        note = stance_advice()
        if note is not None:
            st.caption(md_escape(note.text))
        classifier = c1.segmented_control("Stance classifier", list(INSTRUMENT_NAMES), required=True,
                                          default="judge" if note is not None and note.judge_better else "rule",
                                          key="eval_simfid_classifier",
                                          help="; ".join(f"{i.name}: {i.description}" for i in STANCE_INSTRUMENTS)
                                               + " — each measured on the held-out stance corpus (FIDELITY.md, "
                                                 "`pal simulate corpus`)")
        persona_judge = c2.checkbox("Judge profile contradictions", key="eval_simfid_persona",
                                    help="the judge role reads turns that state facts about the user")
        again = c3.checkbox("Check checked runs again", key="eval_simfid_again")
        own = st.checkbox("Also the dataset's own query dialogues: as written (the ceiling) and with the floors' "
                          "turns answering its assistant (so the verdict columns have a scale)", key="eval_simfid_own")
        probes = st.multiselect("Counterfactual probes for over-cooperation", list(PROBE_SIMULATORS),
                                key="eval_simfid_probes",
                                help="The dataset's query dialogues up to their first Solution Feedback, the "
                                     "assistant's proposal replaced by each disliked and each liked candidate "
                                     "solution; the simulator answers each (llm: one User-LLM turn per probe — "
                                     "long on a local model; `pal simulate fidelity --probes llm` runs it too). "
                                     "Stored: a probe is asked once.")
        if not st.button("Check runs", key="eval_simfid_run", icon=":material/fact_check:",
                         disabled=not (runs or own or probes)):
            return
        todo = [r["run_id"] for r in runs if again or r["run_id"] not in checked]
        config = SimFidelityConfig(classifier=classifier, persona_judge=persona_judge)
        check_runs(dataset, todo, config, again, own, rerun=not probes)
        if probes:
            check_probes(dataset, probes, config)


def check_probes(dataset: Dataset, simulators: list[str], config: SimFidelityConfig) -> None:
    """Every counterfactual probe of each simulator (stored ones reused), with a progress bar; then the board."""
    ws = platform_state.workspace()
    matcher_for = matchers(lambda language: ws.embedder(None, language))
    cases = build_cases(dataset)
    failed: dict[str, str] = {}
    for kind in simulators:
        try:
            llm = platform_state.llm_client() if kind == "llm" or config.classifier == "judge" else None
            side = llm_side(llm) if kind == "llm" and llm is not None else reference_side(kind)
            model = llm.config.role("user_simulator").model if kind == "llm" and llm is not None else kind
        except Exception as e:  # configuration problems: a message
            log.exception("counterfactual probes of %s cannot start", kind)
            st.error(f"Cannot probe {md_escape(kind)}: {md_escape(error_text(e))}")
            continue
        bar = st.progress(0.0, text=f"Probing {kind}…")

        def progress(done: int, total: int, run_id: str, bar=bar) -> None:
            bar.progress(done / total, text=f"[{done}/{total}] {run_id}")

        _results, errors = measure_probes(dataset, cases, kind, side, model, matcher_for, ws.simfidelity,
                                          config=config, llm=llm, progress=progress)
        bar.empty()
        failed.update(errors)
    for run_id, error in failed.items():
        st.warning(f"{md_escape(run_id)}: {md_escape(error)}")
    if not failed:
        st.rerun()


def check_runs(dataset: Dataset, run_ids: list[str], config: SimFidelityConfig, recompute: bool,
               own_dialogues: bool = False, rerun: bool = True) -> None:
    ws = platform_state.workspace()
    try:
        llm = platform_state.llm_client() if config.classifier == "judge" or config.persona_judge else None
        records = [ws.sims.load(i) for i in run_ids]
        if own_dialogues:
            records += [r for kind in OWN_DIALOGUE_SIMULATORS for r in own_dialogue_runs(dataset, simulator=kind)]
    except Exception as e:  # configuration or store problems: a message
        log.exception("simulator checks cannot start")
        st.error(f"Cannot check: {md_escape(error_text(e))}")
        return
    bar = st.progress(0.0, text="Checking simulated users…")

    def progress(done: int, total: int, run_id: str) -> None:
        bar.progress(done / total, text=f"[{done}/{total}] {run_id}")

    _results, errors = measure_runs(records, dataset, matchers(lambda language: ws.embedder(None, language)),
                                    ws.simfidelity, config=config, llm=llm, progress=progress, recompute=recompute)
    bar.empty()
    for run_id, error in errors.items():
        st.warning(f"{md_escape(run_id)}: {md_escape(error)}")
    if not errors and rerun:
        st.rerun()


def passing_runs(dkey: str) -> dict[str, bool | None]:
    """run id → whether its simulated user passed every check (None: nothing checkable); unchecked runs absent."""
    return {r.run_id: r.passed for r in base_workspace().simfidelity.results(dkey)}


def filter_by_simulator(judgments: list[Judgment], dkey: str) -> list[Judgment]:
    """The FairEval judgments to show: all, or (toggle) only those whose two runs' simulated users passed."""
    only = st.toggle("Only dialogues whose simulated user passed every check", key="eval_simfid_filter",
                     help="Keeps the topics where both runs were checked (simulator fidelity, below) and every "
                          "applicable check of every simulated user turn passed.")
    if not only:
        return judgments
    passed = passing_runs(dkey)
    kept = [j for j in judgments if passed.get(j.run_a) is True and passed.get(j.run_b) is True]
    unchecked = len({r for j in judgments for r in (j.run_a, j.run_b) if r not in passed})
    st.caption(f"{len(kept)} of {len(judgments)} judgment(s) kept" + (f"; {unchecked} run(s) not checked yet"
                                                                      if unchecked else "") + ".")
    return kept


def with_arm_interventions(judgments: list[Judgment], sims: SimStore) -> list[Judgment]:
    """The judgments with both arms' interventions: recorded, or (judgments made before they were) from the stored
    runs, which the caption then says."""
    filled, derived = with_interventions(judgments, sims.load)
    if derived:
        st.caption(f"{derived} judgment(s) were made before interventions were recorded: their arms' interventions "
                   "come from the stored runs (attempts and composed turns; the drafts' reasons were not kept).")
    return filled


def filter_by_interventions(judgments: list[Judgment]) -> list[Judgment]:
    """All the judgments, or (toggle) only those whose two runs are under a share of intervened/composed turns."""
    c1, c2, c3 = st.columns([2, 2, 2])
    only = c1.toggle("Only runs under an intervention share", key="eval_interv_filter",
                     help="Keeps the judgments whose two runs each have at most this share of simulated user turns "
                          "composed from the model's decision (or intervened in at all).")
    if not only:
        return judgments
    share = c2.selectbox("Share", list(SHARES), format_func=lambda s: SHARES[s], key="eval_interv_share")
    limit = c3.slider("At most", 0.0, 1.0, 0.2, step=0.05, key="eval_interv_limit")
    kept, unknown = under_share(judgments, share, limit)
    st.caption(f"{len(kept)} of {len(judgments)} judgment(s) kept" + (f"; {unknown} without interventions to read "
                                                                      "(their runs are gone)" if unknown else "") + ".")
    return kept


def interventions_frame(judgments: list[Judgment], a: str, b: str) -> pd.DataFrame:
    """Each arm's interventions over the distinct runs the shown judgments compare: turns, shares and the note."""
    rows = []
    for arm, method in zip(("a", "b"), (a, b)):
        i = pooled(judgments)[arm]
        rows.append({"arm": f"{arm.upper()}: {method}", "simulated user turns": i.user_turns,
                     "intervened": _share(i.intervened, i.intervention_share),
                     "asked again": i.asked_again, "composed": _share(i.composed, i.composed_share),
                     "user query": i.user_query, "drafts kept": i.drafts_kept, "note": i.note})
    return pd.DataFrame(rows)


def _share(count: int, share: float | None) -> str:
    return "–" if share is None else f"{count} ({share:.0%})"


def render_arm_interventions(judgments: list[Judgment], a: str, b: str) -> None:
    """What shaped the simulated user each arm was judged with, beside its win/tie/lose."""
    st.markdown("**The simulated user's interventions, per arm**")
    st.dataframe(interventions_frame(judgments, a, b), hide_index=True, width="stretch", key="eval_interventions")
    st.caption("A turn is intervened in when a draft was asked again, it was composed from the model's decision "
               "(the decision is the model's, the words are fixed ones) or an opening was sent as the user query. "
               "Restrict the outcomes to runs under a share above.")
