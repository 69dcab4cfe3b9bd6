"""Every intervention on the record (sim/interventions.py): drafts with their reasons, the decision a judging turn
was composed from, and what a turn stored before drafts were kept still says."""

from __future__ import annotations

import json

from palset.vocab import Act
from sim.decision import GuessDecision, VerdictDecision, composed
from sim.interventions import NOT_KEPT, decision_of, first_draft, kind_of, summarise
from sim.prompting import load_role_prompt
from sim.types import Draft, Utterance
from tests.sim.conftest import default_reply, finished_run, side_of


def _user(turn_no: int, content: str, **fields) -> Utterance:
    """A User-LLM turn (its prompt's name on it, as the simulator stores it)."""
    return Utterance(turn_no=turn_no, side="user", actor="simulator", act=fields.pop("act", Act.SOLUTION_FEEDBACK),
                     content=content, prompt_name=fields.pop("prompt_name", "sim/user_simulator"), **fields)


def test_a_stored_composed_turn_gives_back_the_decision_its_fallback_names():
    """A turn stored before decisions were kept: its fallback text is all there is; read back, it is the decision the
    composition made (value, clause and whether the clause was kept), marked derived — in English and Chinese, with
    quotes inside the clause."""
    cases = [("en", VerdictDecision(accept=False, why="it's too pricey for me, \"honestly\"")),
             ("en", GuessDecision(guessed=True, point="")),
             ("zh", VerdictDecision(accept=True, why="我正好想剪个短片")),
             ("en", VerdictDecision(accept=True, why="How can I help?"))]  # an assistant's clause: left out
    for language, decision in cases:
        prompt = load_role_prompt("sim/user_decision", language)
        text, fallback, record = composed(prompt, decision, language, [], "Megan")
        act = record.act
        derived = decision_of(_user(3, text, act=act, fallback=fallback, attempts=4))
        assert derived is not None and derived.derived
        assert derived.model_dump(exclude={"derived"}) == record.model_dump(exclude={"derived"})
    assert decision_of(_user(2, "Sounds good.")) is None  # nobody structured a draft
    assert decision_of(_user(1, "What should I do?", act=Act.TOPIC_INQUIRY,
                             fallback="the user query: no draft spoke as the user (last draft: '')")) is None


def test_a_stored_run_says_what_it_can_and_that_its_reasons_were_not_kept():
    prompt = load_role_prompt("sim/user_decision", "en")
    text, fallback, _ = composed(prompt, VerdictDecision(accept=False, why=""), "en", [], "M")
    turns = [_user(1, "Any idea?", act=Act.TOPIC_INQUIRY, fallback="the user query: no draft spoke as the user",
                   attempts=3),
             _user(2, "I see.", act=Act.SOLUTION_DISCUSSION, attempts=2),
             _user(3, text, fallback=fallback, attempts=4),
             _user(4, "Fine.", act=Act.SOLUTION_DISCUSSION),
             Utterance(turn_no=4, side="assistant", actor="assistant", act=Act.SOLUTION_PROPOSAL, content="Try X.")]
    assert [kind_of(u) for u in turns[:4]] == ["user query", "asked again", "composed", "none"]
    s = summarise(turns)
    assert (s.user_turns, s.intervened, s.asked_again, s.composed, s.user_query) == (4, 3, 3, 1, 1)
    assert s.intervention_share == 0.75 and s.composed_share == 0.25 and s.decisions == {"accept: no": 1}
    assert s.drafts_kept == 0 and NOT_KEPT in s.note and s.reasons == {}
    assert [first_draft(u) for u in turns[:4]] == [None, None, None, "Fine."]  # only a turn sent as first drafted
    both = s + summarise([_user(1, "Hi", drafts=[Draft(text="Hi", kept=True)], drafts_kept=True)])
    assert both.user_turns == 5 and both.drafts_kept == 1 and "4 of 5" in both.note
    fixed = summarise([_user(1, "Yes, exactly.", prompt_name="reference/always-accept"),
                       _user(2, "As the dataset wrote it.", prompt_name=None)])
    assert fixed.user_turns == 2 and fixed.drafted == 0 and not fixed.note  # no model drafted: nothing was lost


def test_a_composed_turn_keeps_every_draft_with_the_reason_it_was_sent_back_and_its_decision(sim_env):
    """A run whose User-LLM answers as an assistant: each judging turn keeps its three drafts and why each went
    back, the decision it was composed from, and later turns decided at once keep the decision and no draft."""
    def reply(req):
        last = req.messages[-1].content
        if side_of(req) == "user" and ("just guessed" in last or "just suggested" in last):
            return json.dumps({"guessed": False, "point": "I need it in writing"} if "just guessed" in last
                              else {"accept": False, "why": "I can't afford it"})
        if side_of(req) == "user" and "The chat has not started" not in last:
            return "How can I help you with your rota today?"
        return default_reply(req)

    record, _ = finished_run(sim_env, reply)
    user = [u for u in record.utterances if u.side == "user"]
    assert all(u.drafts_kept for u in user)
    judging = [u for u in user if u.composed]
    first, later = judging[0], judging[1:]
    assert len(first.drafts) == 3 and all(d.reasons and not d.kept for d in first.drafts)
    assert first.drafts[-1].reasons == ["no draft spoke as the user"]
    assert first.decision is not None and not first.decision.value and not first.decision.derived
    assert later and all(not u.drafts and u.decision is not None for u in later)
    assert all(decision_of(u) == u.decision for u in judging)
    plain = [u for u in user if not u.composed and u.attempts == 1]
    assert all(u.drafts[-1].kept and u.drafts[-1].text == u.content for u in plain)
    s = summarise(record.utterances)
    assert s.composed == len(judging) and s.drafts_kept == len(user) and not s.note
    assert sum(s.reasons.values()) == sum(len(u.drafts) - sum(d.kept for d in u.drafts) for u in user)


def test_the_transcript_export_shows_each_intervention_and_what_was_not_kept():
    from sim.export import run_to_json, run_to_markdown
    from sim.types import RunRecord, RunSpec

    prompt = load_role_prompt("sim/user_decision", "en")
    text, fallback, decision = composed(prompt, VerdictDecision(accept=False, why="too dear"), "en", [], "M")
    new = _user(3, text, fallback=fallback, decision=decision, attempts=4, drafts_kept=True,
                drafts=[Draft(text="How can I help?", reasons=["offers help like an assistant"])])
    stored = _user(5, text, fallback=fallback, attempts=4)
    spec = RunSpec(dataset="/d", user_id="1000", sample_id="s", topic_key="t", method="vanilla")
    record = RunRecord(run_id="run-x", spec=spec, utterances=[_user(1, "Any idea?", act=Act.TOPIC_INQUIRY), new, stored])
    md = run_to_markdown(record)
    assert "Interventions: 2 of 3 simulated user turn(s)" in md and "2 of 3 turn(s) recorded before drafts" in md
    assert "- draft 1 (sent back: offers help like an assistant): How can I help?" in md
    assert md.count("Decision: accept = no (stance reject") == 2 and "read back from the fallback text" in md
    assert NOT_KEPT in md
    assert '"drafts"' in run_to_json(record) and '"decision"' in run_to_json(record)
