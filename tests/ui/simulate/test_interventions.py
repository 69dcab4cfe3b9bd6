"""The Simulate page's interventions of a simulated user turn (ui/simulate/transcript.py: intervention_lines)."""

from __future__ import annotations

from palset.vocab import Act
from sim.decision import VerdictDecision, composed
from sim.interventions import NOT_KEPT
from sim.prompting import load_role_prompt
from sim.types import Draft, Utterance
from ui.simulate.transcript import intervention_lines


def test_a_turn_shows_its_decision_each_draft_and_why_escaped_or_that_nothing_was_kept():
    prompt = load_role_prompt("sim/user_decision", "en")
    text, fallback, decision = composed(prompt, VerdictDecision(accept=True, why=""), "en", [], "M")
    new = Utterance(turn_no=3, side="user", actor="simulator", act=Act.SOLUTION_FEEDBACK, content=text,
                    fallback=fallback, decision=decision, attempts=2, drafts_kept=True,
                    drafts=[Draft(text="**How** can I help?", reasons=["offers help like an assistant"])])
    lines = intervention_lines(new)
    assert "**Decision**: accept = yes (stance accept)" in lines and "read back" not in lines
    assert r"sent back\: offers help like an assistant" in lines and r"\*\*How\*\*" in lines  # data escaped
    assert NOT_KEPT not in lines
    stored = new.model_copy(update={"decision": None, "drafts": [], "drafts_kept": False, "attempts": 4})
    lines = intervention_lines(stored)
    assert "read back from the fallback text" in lines and "4 call(s)" in lines and "before drafts were kept" in lines
