"""Validation of the stance classifiers against the dataset's own verdicts.

Items: every Solution Feedback turn of the dataset's own dialogues (history and query sessions) whose last
proposal matches a pos or neg candidate solution of its topic (:func:`.match.best_match`, τ of the embedder) —
the gold stance is ``accept`` for pos, ``reject`` for neg — and, where the shared real PAL-Set files are present,
the Solution Feedback turns of the authors' own example dialogue (``examples.json``: each turn references the
framework solution it answers, whose pos/neg label is given, so no matching is needed).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from evaluation.simfidelity.match import best_match
from palset.dataset import Dataset
from palset.vocab import Act, parse_act
from sim.reference import topic_turns

Classify = Callable[[str, str, str], str]  # (assistant text, user text, language) → stance label
GOLD = {"pos": "accept", "neg": "reject"}


def dataset_items(dataset: Dataset, matcher_for: Callable) -> list[dict]:
    """Solution Feedback turns with a gold stance from the candidate their proposal matches (see the docstring)."""
    items = []
    for uid, user in dataset.users.items():
        matcher = matcher_for(user.language)
        for session in user.sessions:
            for topic in session.topics:
                proposal = None
                candidates = topic.topic.candidate_solutions
                for turn in topic_turns(session, topic.key) or []:
                    if turn.user.action is Act.SOLUTION_FEEDBACK and proposal is not None:
                        found = best_match(matcher, proposal, [c.solution for c in candidates])
                        if found is not None and found[1].matched and candidates[found[0]].feedback in GOLD:
                            items.append({"source": "dataset", "user": uid, "sample": session.sample_id,
                                          "topic": topic.key, "language": user.language, "assistant": proposal,
                                          "text": turn.user.content, "gold": GOLD[candidates[found[0]].feedback],
                                          "similarity": found[1].score})
                    if turn.assistant.action is Act.SOLUTION_PROPOSAL:
                        proposal = turn.assistant.content
    return items


def example_items(examples: Path) -> list[dict]:
    """The Solution Feedback turns of Mem-PAL's example history dialogue (``examples.json``, real PAL-Set text)."""
    data = json.loads(examples.read_text(encoding="utf-8"))["synthesis"]["dialogue_user0000_history_set"]
    labels = {ref: s["feedback"] for topic in data["input"]["dialogue_framework"].values()
              for ref, s in topic["solutions"].items()}
    items, last = [], ""
    for turn in data["output"].values():
        user, assistant = turn["user"], turn["assistant"]
        if parse_act(user["action"]) is Act.SOLUTION_FEEDBACK and labels.get(user["reference"]) in GOLD:
            items.append({"source": "PAL-Set examples.json", "user": data["user_id"], "sample": "history example",
                          "topic": user["reference"], "language": "zh", "assistant": last, "text": user["content"],
                          "gold": GOLD[labels[user["reference"]]], "similarity": None})
        last = assistant["content"]
    return items


def validate(items: list[dict], classify: Classify) -> dict:
    """Accuracy overall, per language and per source; the confusion counts and every miss."""
    predicted = [classify(i["assistant"], i["text"], i["language"]) for i in items]
    hits = [p == i["gold"] for p, i in zip(predicted, items)]

    def acc(field: str, value: str) -> dict:
        sel = [h for h, i in zip(hits, items) if i[field] == value]
        return {"n": len(sel), "accuracy": sum(sel) / len(sel) if sel else None}

    return {"n": len(items), "accuracy": sum(hits) / len(hits) if hits else None,
            "by_language": {lang: acc("language", lang) for lang in sorted({i["language"] for i in items})},
            "by_source": {src: acc("source", src) for src in sorted({i["source"] for i in items})},
            "confusion": {f"{g} → {p}": n for (g, p), n in
                          sorted(Counter((i["gold"], p) for i, p in zip(items, predicted)).items())},
            "misses": [{**i, "predicted": p} for i, p, h in zip(items, predicted, hits) if not h]}
