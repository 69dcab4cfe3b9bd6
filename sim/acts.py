"""Dialogue-act definitions given to both sides (Mem-PAL §1.9), and which memory purpose each assistant act needs."""

from __future__ import annotations

from memory.types import Purpose
from palset.vocab import Act

DEFINITIONS: dict[Act, str] = {
    Act.TOPIC_INQUIRY: "Open the topic with a short, vague question. Do not reveal your hidden needs or background details.",
    Act.REQUIREMENT_CONFIRMATION: ("React to the assistant's guess about your hidden need: confirm it if it is right; if it "
                                   "is wrong, say so bluntly and correct only that point, without volunteering other needs."),
    Act.SOLUTION_DISCUSSION: ("User: ask about or object to details of the proposed solution, without an overall verdict "
                              "and without revealing your preferences. Assistant: answer the questions or objections about "
                              "the current solution using what you know of the user, and try to persuade."),
    Act.SOLUTION_FEEDBACK: ("Give a clear verdict on the current solution: approve it if it fits your preferences, reject it "
                            "bluntly (even annoyed) if it does not — never 'sounds good, but…'. Do not explain your preferences in detail."),
    Act.REQUIREMENT_PREDICTION: ("Proactively guess ONE hidden need behind the user's question from their situation and "
                                 "background, and ask them to confirm it. Do not propose solutions."),
    Act.SOLUTION_PROPOSAL: ("Propose ONE concrete solution (a new one if others were discussed), without explaining your "
                            "reasoning about the user."),
    Act.FEEDBACK_RESPONSE: ("Reply briefly to the user's verdict. Never offer another solution; after a rejection only "
                            "acknowledge or apologise."),
}

PURPOSE: dict[Act, Purpose] = {
    Act.REQUIREMENT_PREDICTION: "requirement",
    Act.SOLUTION_PROPOSAL: "solution",
    Act.SOLUTION_DISCUSSION: "solution",
    Act.FEEDBACK_RESPONSE: "solution",
}

REQUIREMENT_PHASE = frozenset({Act.TOPIC_INQUIRY, Act.REQUIREMENT_CONFIRMATION})
SOLUTION_PHASE = frozenset({Act.SOLUTION_DISCUSSION, Act.SOLUTION_FEEDBACK})
