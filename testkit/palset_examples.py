"""A one-user, one-session PAL-Set release of real PAL-Set text, assembled from the authors' released examples
(``../shared/data/palset/examples.json``, CC BY-NC 4.0, Huang et al., Mem-PAL): user 0000's profile, requirement
types and preferences, the situation of 2024-04-06 – 04-12 with its 21 logs, the 17-turn dialogue written for it
and its three framework topics with their candidate solutions.

The public release lacks ``input.json``; this puts the examples' pieces together in the release layout so that
tests can run the gold memory on real (Chinese) situation text. Candidate labels come from the dialogue
framework's solutions where a candidate's text is the same, ``neu`` otherwise. Never copied into the project:
built in a test's temporary folder from the shared data.
"""

from __future__ import annotations

import json
from pathlib import Path

UID = "0000"
END = "2024-04-12"


def _write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")


def _types(requirement: dict, phrase: str) -> str:
    return next(rid for aspect in requirement.values() for rid, p in aspect.items() if p == phrase)


def release_from_examples(palset: Path, out: Path, split: str = "query") -> Path:
    """Write the release under ``out`` (the one session in ``split``: history or query); returns ``out``."""
    examples = json.loads((palset / "examples.json").read_text(encoding="utf-8"))["synthesis"]
    data = palset / "data"
    background = json.loads((data / "background" / "background.json").read_text(encoding="utf-8"))
    requirement = json.loads((data / "requirement" / "requirement.json").read_text(encoding="utf-8"))
    preference = json.loads((data / "preference" / "preference.json").read_text(encoding="utf-8"))
    dialogue = examples[f"dialogue_user{UID}_history_set"]
    framework = examples[f"requirement_framework_user{UID}"]["output"]
    candidates = examples[f"candidate_solutions_user{UID}"]["output"]
    logs = examples[f"logs_user{UID}_2024-04-06_to_04-12"]["output"]
    plan = dialogue["input"]["dialogue_framework"]
    topics = {}
    for k, (key, topic) in enumerate(framework.items(), 1):
        chosen = plan.get(f"T{k}", {}).get("solutions", {}).values()
        label = {s["solution"]: s["feedback"] for s in chosen}
        topics[key] = {"user_query": topic["user_query"], "implicit_needs": [n["need"] for n in topic["implicit_needs"]],
                       "requirement": topic["requirement"],
                       "solution": {"pos": [s for s, f in label.items() if f == "pos"],
                                    "neg": [s for s, f in label.items() if f == "neg"]},
                       "candidate_solutions": [{"solution": c, "feedback": label.get(c, "neu")} for c in candidates[key]]}
    turns = {t: {side: {"action": u["action"], "content": u["content"]} for side, u in turn.items()}
             for t, turn in dialogue["output"].items()}
    sample = {"sample_id": f"{UID}_sample0", "dialogue_timestamp": f"{END} 12:00:00",
              "logs": [{"timestamp": lg["timestamp"], "content": lg["content"]} for lg in logs],
              "dialogue": turns, "topics": topics}
    _write(out / "input.json", {UID: {"history": [sample] if split == "history" else [],
                                      "query": [sample] if split == "query" else []}})
    ids = list(dict.fromkeys(_types(requirement[UID], t["requirement_type"]) for t in framework.values()))
    _write(out / "situation" / "situation.json", {UID: {END: {
        "start_timestamp": "2024-04-06 11:00:00", "end_timestamp": f"{END} 12:00:00", "requirement_ids": ids[:3],
        "situation": dialogue["input"]["situation"]}}})
    _write(out / "background" / "background.json", {UID: background[UID]})
    _write(out / "requirement" / "requirement.json", {UID: requirement[UID]})
    _write(out / "preference" / "preference.json", {UID: preference[UID]})
    return out
