"""A scripted H²Memory 'LLM': answers each structured step by schema name, deterministically."""

from __future__ import annotations

import json
import re

from backends.llm.types import ChatRequest
from testkit.requests import schema_name


def situation_group(prompt: str) -> list[str]:
    """The group's own log lines of a situation prompt (they follow the session's logs every such prompt starts with)."""
    part = prompt.split("form one group", 1)[1] if "form one group" in prompt else prompt.split("属于同一组", 1)[1]
    return [line for line in part.splitlines()[1:] if line.startswith("log_")]


def h2_reply(req: ChatRequest) -> str:
    name = schema_name(req)
    prompt = next(m.content for m in req.messages if m.role == "user")  # the step's own part (the system: rules)
    if name == "LogGraphOut":
        schema = req.response_format["json_schema"]["schema"]
        rel = schema["properties"]["relations"]["items"]["properties"]
        targets = rel["log"]["enum"]
        allowed = set(rel["follows"]["items"].get("enum", []))
        out = []
        for t in targets:
            b = int(t.removeprefix("log_"))
            prev = f"log_{b - 2}"  # even and odd logs form two chains → two situations per session
            out.append({"log": t, "caused_by": [], "follows": [prev] if prev in allowed else []})
        return json.dumps({"relations": out})
    if name == "SituationOut":
        group = situation_group(prompt)
        first = re.search(r"log_(\d+)", group[0]).group(1)
        aspect = "work" if int(first) % 2 == 0 else "health"
        return json.dumps({"situation": f"situation starting at log {first}: " + group[1 % len(group)][:80],
                           "situation_aspects": [aspect]})
    if name == "BackgroundOut":
        span = re.search(r"New situations \((.*?)\)", prompt).group(1)
        return json.dumps({"updating_aspects": ["work"], "updating_content": {"work": f"works hard ({span})"}})
    if name == "OutlineOut":
        turns = [int(n) for n in re.findall(r"turn_(\d+):", prompt)]
        mid = max(turns[len(turns) // 2 - 1], 1)
        return json.dumps({"topics": [
            {"turn_span": [1, mid], "requirement": "needs help with sleep after night shifts",
             "solution_list": [{"solution": "blackout blind", "user_feedback": "liked it", "feedback_type": "pos"},
                               {"solution": "meditation app", "user_feedback": "hated it", "feedback_type": "neg"}],
             "preference": "likes concrete fixes, rejects apps"},
            {"turn_span": [mid + 1, max(turns)], "requirement": "wants to support her brother",
             "solution_list": [], "preference": "prefers listening"}]})
    if name == "RefinedOut":
        req_text = re.search(r"The requirement from the conversation: (.*)", prompt).group(1)
        return json.dumps({"requirement": f"refined: {req_text}"})
    if name == "GeneralRequirementOut":
        return json.dumps({"general_requirement": "general need"})
    if name == "PrincipleOut":
        return json.dumps({"principle": "likes concrete fixes"})
    if name == "RequirementAdjustOut":
        return json.dumps({"adjust": "No"})
    if name == "PrincipleAdjustOut":
        return json.dumps({"adjust": "Yes", "principle": "adjusted"})
    raise AssertionError(f"unexpected request {name}")
