"""The Evaluate page's Judge control: the judge samples' temperature, seed and prompt set, how many topics are not
judged yet, and a job of ``eval.judge`` units that runs in the app's workers (closing the page does not stop it).

k > 1 samples at FairEval's temperature 1 by default; k > 1 at temperature 0 is refused before anything is sent
(:func:`evaluation.faireval.sampling_temperature`): its samples would be one sample asked k times."""

from __future__ import annotations

import logging

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from backends.config import ConfigError
from evaluation.faireval import (
    DEFAULT_PROMPT_SET,
    FAIREVAL_TEMPERATURE,
    PROMPT_SETS,
    FairEvalSettingsError,
    planned_key,
    sampling_temperature,
)
from evaluation.service import RunPair
from palset.dataset import Dataset
from sim.store import SimStore
from ui import platform_state
from ui.jobs import active_job, failure_text, follow, submit, watch
from ui.platform_state import base_workspace
from ui.text import error_text, md_escape

log = logging.getLogger(__name__)


def judge_temperature(column: DeltaGenerator, k: int = 3) -> float | None:
    """The judge samples' temperature for this judging: FairEval's 1 by default for k > 1; for k = 1 the judge
    role's (None). The value shown is what the samples are drawn at."""
    try:
        role = platform_state.platform_config().role("judge").temperature
    except ConfigError:
        log.warning("judge role misconfigured; its temperature is unknown", exc_info=True)
        role = 0.0
    default = FAIREVAL_TEMPERATURE if k > 1 else role
    value = float(column.number_input("Sampling temperature", 0.0, 2.0, float(default), step=0.5, key=f"eval_temp_k{min(k, 2)}",
                                      help="Of the judge samples. FairEval samples its k evidences at 1 (the default "
                                           "for k > 1; Mem-PAL's GPT path used 0, its Qwen path 0.7); k > 1 at 0 is "
                                           "refused — the k samples of an order would be one. k = 1: the judge "
                                           "role's. A new temperature makes new judgments; stored ones are kept."))
    if k == 1 and value == role:
        return None
    return value


def judge_options(column: DeltaGenerator) -> tuple[int, str]:
    """(base sampling seed, prompt set) for this judging, both recorded with every judgment."""
    names = list(PROMPT_SETS)
    prompts = column.selectbox("Judge prompt", names, index=names.index(DEFAULT_PROMPT_SET), key="eval_prompts",
                               format_func=lambda n: PROMPT_SETS[n].label,
                               help="The Mem-PAL authors' judge prompt (the Chinese original they released for "
                                    "Chinese users, their Appendix's English version for English users), or PAL Studio's "
                                    "compact English wording. Stored judgments keep the prompt they were made with.")
    seed = int(column.number_input("Seed", 0, 2**31 - 1, 0, key="eval_seed",
                                   help="Base sampling seed, recorded: sample i of order o is drawn with seed + "
                                        "(o − 1)·k + i, so each sample is its own draw and an endpoint that honours "
                                        "seeds draws the same again."))
    return seed, prompts


def settings_problem(k: int, temperature: float | None) -> str | None:
    """Why these settings cannot judge (k > 1 at temperature 0), or None."""
    try:
        sampling_temperature(k, temperature)
    except FairEvalSettingsError as e:
        log.info("judging refused: %s", e)
        return str(e)
    return None


def render_judge_button(dataset: Dataset, sims: SimStore, pairs: list[RunPair], aspects: list[str], k: int,
                        threshold: float, temperature: float | None = None, key: str = "eval_judge",
                        seed: int | None = None, prompts: str | None = None) -> None:
    if not pairs:
        st.caption("No topic has finished runs of both methods: nothing to judge.")
        return
    if problem := settings_problem(k, temperature):
        st.error(f"Cannot judge: {md_escape(problem)}.")
        return
    try:
        llm = platform_state.llm_client()
        model = llm.config.role("judge").model
        todo = [p for p in pairs if any(not base_workspace().evals.has_judgment(planned_key(
            p.run_a, p.run_b, a, k, model, dataset.users[p.user_id].language, temperature=temperature, seed=seed,
            prompts=prompts)) for a in aspects)]
    except Exception as e:  # configuration problems are a message
        log.exception("judging cannot start")
        st.error(f"Cannot judge: {md_escape(error_text(e))}")
        return
    at = "" if temperature is None else f" at temperature {temperature:g}"
    st.caption(f"{len(pairs)} paired topic(s); {len(todo)} not judged yet with k={k} by {md_escape(model)}{at}, "
               f"seed {seed}, {md_escape(PROMPT_SETS[prompts or DEFAULT_PROMPT_SET].label)}.")
    if (running := active_job("judge-", kind="judge")) is not None:  # judging goes on with the page closed
        watch(running.job_id, "Judging")
        return
    if not st.button("Judge" + at, key=key, type="primary", icon=":material/balance:", disabled=not todo):
        return
    try:
        job_id = submit_judging(dataset, sims, todo, aspects, k, threshold, temperature, seed, prompts)
    except Exception as e:  # configuration or store problems: a message, never a traceback
        log.exception("judging cannot start")
        st.error(f"Cannot judge: {md_escape(error_text(e))}")
        return
    summary = follow(job_id, f"Judging {len(todo)} topic(s)")
    if summary.status != "done":
        st.error(f"Judging stopped: {md_escape(failure_text(summary))}. Every finished judgment is stored; press "
                 "Judge again to continue.")
        return
    st.success(f"Judged {len(todo)} topic(s).")


def submit_judging(dataset: Dataset, sims: SimStore, pairs: list[RunPair], aspects: list[str], k: int,
                   threshold: float, temperature: float | None = None, seed: int | None = None,
                   prompts: str | None = None) -> str:
    """A job of ``eval.judge`` units, one judgment after the other (a failure stops the rest, which a second
    press continues); it runs in the app's workers, so closing the page does not stop it."""
    from protocol.units import judge_units

    specs = [(sims.load(p.run_a).spec, sims.load(p.run_b).spec) for p in pairs]
    units = judge_units(dataset, specs, aspects, k, threshold, temperature=temperature, seed=seed, prompts=prompts)
    units = [u.model_copy(update={"deps": [units[i - 1].key] if i else []}) for i, u in enumerate(units)]
    return submit("judge", f"judge {specs[0][0].method} vs {specs[0][1].method}", units)
