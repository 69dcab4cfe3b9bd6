"""A scripted LLM for the whole protocol (memory building aside): user simulator, query summary, assistant,
the three single-turn tasks, the G-score judge and the FairEval judge — deterministic, so a test can compute
the expected tables by hand, and a killed run resumed gives the same records as an uninterrupted one.

The assistant says "remembered" when its prompt carries a memory and "plain" when it has none; the FairEval
judge gives 7/7 on the requirement aspect (a tie) and, on the preference aspect, 8 to a dialogue that says
"remembered" and 5 to one that does not. Restatement, proposal and selection answers are fixed (below); the
G-score judge always gives 1.5.
"""

from __future__ import annotations

import json
import time

from backends.llm.types import ChatRequest
from testkit.requests import act_code, act_of, all_text, role_of, user_line, wants_json

RESTATEMENT = "I need a plan for the week"
PROPOSAL = "Try a short walk after dinner"
PICKS = ["S1", "S2"]
G_SCORE = 1.5




# how each judge wording names the requirement aspect (compact; the authors' English translation and Chinese original)
REQUIREMENT_ASPECT = ("Ground truth: what the user really needed", "Current Evaluation Dimension: Need Understanding",
                      "当前评价维度：需求理解")


def _slots(text: str) -> tuple[str, str]:
    a = text.split("## assistant-1", 1)[-1].split("## assistant-2", 1)
    return a[0], a[1] if len(a) > 1 else ""


def protocol_reply(req: ChatRequest) -> str:
    text, role = all_text(req), role_of(req)
    if role == "simulator":
        words = user_line(req)
        return json.dumps({"content": words}) if wants_json(req) else words
    if role == "summary":
        return "help with the week"
    if role == "judge":
        first, second = _slots(text)
        if any(cue in text for cue in REQUIREMENT_ASPECT):
            s1 = s2 = 7
        else:
            s1, s2 = (8 if "remembered" in first else 5), (8 if "remembered" in second else 5)
        return json.dumps({"analysis": {"assistant-1": "ok", "assistant-2": "ok", "overall": "ok"},
                           "scores": {"assistant-1": s1, "assistant-2": s2}})
    if "You grade how well an assistant understood" in text:
        return json.dumps({"analysis": "half of each need", "score": G_SCORE})
    if "# The user's request" in text:
        return json.dumps({"requirement": RESTATEMENT})
    if "candidate" in text.lower() and '"S1"' in text:
        return json.dumps({"analysis": "S1 and S2 fit best", "choices": PICKS})
    if "# The user's requirement" in text:
        return json.dumps({"solution": PROPOSAL})
    if role == "assistant":
        plain = "(nothing: this assistant has no memory of the user)" in text
        return f"{'plain' if plain else 'remembered'} answer ({act_code(act_of(req))})"
    return json.dumps({"content": "ok"})


class SlowReply:
    """``protocol_reply`` after ``seconds`` (so a test can kill a run mid-way)."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __call__(self, req: ChatRequest) -> str:
        time.sleep(self.seconds)
        return protocol_reply(req)
