"""Traces of the lab's records: a simulation run through the workspace has every call under the turn side that
made it; a user turn asked again names the rules that sent its drafts back; a build's calls sit under its stages;
a judgment lists each order's samples."""

from __future__ import annotations

import json

import pytest

from backends.config import ROLES
from backends.llm.fake import ScriptedLLM
from evaluation.faireval import JudgeSample, Judgment, OrderTexts
from evaluation.traces import build_steps, judgment_steps, load_trace, side_step
from palset.loader import load_dataset
from palset.vocab import Act
from sim.service import make_spec
from sim.types import Draft, Utterance
from testkit.requests import act_code, act_of, role_of, user_line, wants_json
from testkit.workspace import make_workspace
from tests.conftest import DEMO


def reply(req) -> str:
    role = role_of(req)
    if role == "simulator":
        return json.dumps({"content": user_line(req)}) if wants_json(req) else user_line(req)
    if role == "summary":
        return "help with sleep"
    return f"assistant answers ({act_code(act_of(req))})"


class Sources:
    def __init__(self, ws):
        self.ws = ws

    def calls_of(self, run_id):
        return self.ws.runs.calls_of(run_id)

    def sim_run(self, run_id):
        return self.ws.sims.load(run_id) if self.ws.sims.exists(run_id) else None

    def build_stages(self, build_id):
        return self.ws.memory.session_costs(build_id) if self.ws.memory.build_rows([build_id]) else None

    def judgment(self, key):
        return self.ws.evals.load_judgment(key) if self.ws.evals.has_judgment(key) else None


@pytest.mark.slow(seconds=8)
def test_a_simulated_run_files_every_call_under_the_side_that_made_it(tmp_path):
    ws = make_workspace(tmp_path / "pal", env={"PAL_EMBEDDER": "hash"})
    fake = ScriptedLLM(reply)
    llm = ws.llm(session_id="t", providers=dict.fromkeys(ROLES, fake))
    demo = load_dataset(DEMO)
    sim = ws.open_simulation(demo, make_spec(demo, "1000", "1000_sample7", "topic-1", "vanilla-log"), llm)
    while sim.next_slot() is not None:
        sim.step()
    run_id = sim.record.run_id
    root = load_trace(Sources(ws), run_id, cost=ws.config.cost)
    record = ws.sims.load(run_id)
    assert root.kind == "simulation" and root.attrs["status"] == "finished"
    assert len(root.children) == len(record.schedule) and root.calls == []  # every call claimed by a turn
    assert root.totals.calls == len(ws.runs.calls_of(run_id)) > 0
    assert root.totals.cost_usd == 0.0  # the configured model is a bundled local one: free, not unpriced
    for turn in root.children:
        assert [s.kind for s in turn.children] == ["side", "side"]
        for side in turn.children:
            role = "user_simulator" if side.name.startswith("user") else "assistant"
            assert side.calls and {c.role for c in side.calls} == {role}
            assert all(side.start <= c.start and c.end <= side.end + 0.05 for c in side.calls)


def utterance(**kw) -> Utterance:
    base = {"turn_no": 2, "side": "user", "actor": "simulator", "act": Act.SOLUTION_FEEDBACK, "content": "ok",
            "created_at": 5.0}
    return Utterance(**(base | kw))


def test_a_turn_asked_again_names_each_reason_and_an_older_one_says_they_were_not_kept():
    kept = utterance(attempts=3, drafts_kept=True,
                     drafts=[Draft(text="How can I help?", reasons=["offers help like an assistant"]),
                             Draft(text="You should rest.", reasons=["gives advice"]),
                             Draft(text="ok", kept=True)])
    step = side_step(kept)
    assert step.retry_reasons == ["offers help like an assistant", "gives advice"]
    assert step.attrs["intervention"] == "asked again" and step.roles == frozenset({"user_simulator"})
    old = side_step(utterance(attempts=2))
    assert len(old.retry_reasons) == 1 and "not" in old.retry_reasons[0] and "2" in old.retry_reasons[0]
    assert side_step(utterance()).retry_reasons == []
    person = side_step(utterance(actor="human"))
    assert not person.claims  # a person's turn made no call


def test_build_stages_are_sessions_logs_then_dialogue():
    rows = [{"stage": 1, "sample_id": "s0", "finished_at": 3.0}, {"stage": 0, "sample_id": "s0", "finished_at": 2.0}]
    steps = build_steps(rows)
    assert [s.name for s in steps] == ["session s0 · logs", "session s0 · dialogue"]
    assert all(s.roles == frozenset({"memory_builder"}) for s in steps)


def test_a_judgment_lists_each_orders_samples_with_why_one_was_asked_again():
    samples = [JudgeSample(order=1, index=0, ok=True, slot1=8, slot2=6, attempts=1),
               JudgeSample(order=1, index=1, ok=True, slot1=7, slot2=7, attempts=2, errors=["no scores line"]),
               JudgeSample(order=2, index=0, ok=False, attempts=3, errors=["broken JSON", "broken JSON"])]
    texts = {o: OrderTexts(assistant_1="a", assistant_2="b", **_other_texts()) for o in ("order1", "order2")}
    j = Judgment(judgment_key="jdg-1", dataset="d", user_id="u", sample_id="s", topic_key="t", aspect="preference",
                 method_a="a", method_b="b", run_a="ra", run_b="rb", k=2, judge_model="m", prompt_name="p",
                 prompt_version="1", created_at=9.0, texts=texts, samples=samples)
    o1, o2 = judgment_steps(j)
    assert [s.retry_reasons for s in o1.steps] == [[], ["no scores line"]]
    assert o2.steps[0].retry_reasons == ["broken JSON", "broken JSON"] and "no valid" in o2.steps[0].name
    assert not o1.claims and not any(s.claims for s in o1.steps)


def _other_texts() -> dict:
    fields = OrderTexts.model_fields
    return {name: "" for name, f in fields.items() if name not in ("assistant_1", "assistant_2") and f.is_required()}


def test_a_run_id_with_nothing_recorded_is_a_key_error(tmp_path):
    ws = make_workspace(tmp_path / "pal", env={"PAL_EMBEDDER": "hash"})
    with pytest.raises(KeyError, match="nothing recorded"):
        load_trace(Sources(ws), "run-none")
