"""Every intervention travels in a bundle: a run's drafts, reasons and decision, a judgment's arms' interventions
and a simulator-fidelity result's first-draft figures come back the same after export → import."""

from __future__ import annotations

import pytest

from backends.config import ROLES
from backends.embeddings import HashEmbedder
from backends.llm.fake import ScriptedLLM
from evaluation.faireval import judge_pair
from evaluation.service import topic_context
from evaluation.simfidelity.service import matchers, measure_run
from palset.loader import load_dataset
from sim.decision import VerdictDecision, composed
from sim.prompting import load_role_prompt
from sim.types import Draft, Utterance
from studio.bundle.export import export_bundle
from studio.bundle.importer import import_bundle
from testkit.workspace import make_workspace
from tests.conftest import DEMO
from tests.evaluation.conftest import MARKER, SAMPLE, TOPIC, USER, prefers_marker, store_run

pytestmark = pytest.mark.slow(seconds=12)


def test_drafts_decisions_and_shares_come_back_the_same(tmp_path):
    ws = make_workspace(tmp_path / "source", env={"PAL_EMBEDDER": "hash"})
    dataset = load_dataset(DEMO)
    a, b = store_run(ws.sims, "vanilla-log", MARKER), store_run(ws.sims, "vanilla", "plain")
    text, fallback, decision = composed(load_role_prompt("sim/user_decision", "en"), VerdictDecision(accept=False),
                                        "en", [], "Megan")
    ws.sims.add_utterance(a.run_id, Utterance(
        turn_no=2, side="user", actor="simulator", act="Solution Feedback", content=text, fallback=fallback,
        decision=decision, attempts=2, drafts_kept=True,
        drafts=[Draft(text="How can I help?", reasons=["offers help like an assistant"])]))
    a = ws.sims.load(a.run_id)
    llm = ws.llm(session_id="t", providers=dict.fromkeys(ROLES, ScriptedLLM(prefers_marker)))
    j = judge_pair(llm, topic_context(dataset, USER, SAMPLE, TOPIC), a, b, "requirement", k=1, prompts="compact")
    ws.evals.save_judgment(j)
    emb = HashEmbedder()
    result = measure_run(a, dataset, matchers(lambda _language: emb), ws.simfidelity)
    out = tmp_path / "work.palbundle"
    export_bundle(ws, dataset, out)

    target = make_workspace(tmp_path / "target", env={"PAL_EMBEDDER": "hash"})
    import_bundle(target, out, known={"demo": DEMO})
    moved = target.sims.load(a.run_id).utterances[-1]
    assert moved.drafts == a.utterances[-1].drafts and moved.decision == decision and moved.drafts_kept
    (judged,) = target.evals.judgments()
    assert judged.interventions == j.interventions and judged.interventions["a"].composed == 1
    checked = target.simfidelity.of_run(a.run_id)
    assert checked is not None and checked.interventions == result.interventions
    assert checked.first_drafts == result.first_drafts and checked.figures_first == result.figures_first
