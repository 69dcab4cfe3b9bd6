"""Programmatic PAL-Set-shaped datasets for benchmarks and tests.

Filler text, never shown as demo data: it exists to measure loading and rendering at PAL-Set scale
(100 users, ~29 sessions, ~35 logs and ~14 turns per session) and to give tests a valid dataset
whose every field they control. Output goes through :mod:`palset.assemble`, like real synthesis.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from pathlib import Path

from palset.assemble import UserBundle, write_release
from palset.vocab import Act, LogType

ASPECTS = ("work", "health", "family", "leisure")
_PATTERNS = {
    LogType.WEB_SEARCH: 'The user searched for "{w}" on Google and viewed a guide about {w}.',
    LogType.CONTENT_PUBLISHING: "The user published a post on Instagram, main content: notes on {w}.",
    LogType.CONTENT_BROWSING: "The user browsed an article on Medium, main content: {w}.",
    LogType.MESSAGE_SENDING: 'The user sent Alex a message: "Can we talk about {w} tonight?"',
    LogType.MESSAGE_RECEIVING: 'The user received a message from Sam: "Reminder about {w}."',
    LogType.SCHEDULE_MANAGEMENT: 'The user created the schedule "{w}" in Google Calendar, time 18:00-19:00, place home.',
    LogType.TRANSACTION_RECORD: "The user bought a book about {w} via Amazon, item: paperback, 12.99 USD.",
    LogType.DEVICE_OPERATION: "The user performed a sleep-tracking sync on a Fitbit: {n} minutes recorded.",
}
_WORDS = ["time management", "sleep hygiene", "family dinner", "weekend hike", "budget plan", "meal prep",
          "back pain", "team meeting", "school play", "guitar lessons"]


def _topic(rng: random.Random, rid: str, tag: str) -> dict:
    cands = [f"Option {tag}-{i}: try approach number {i} for {rid}." for i in range(1, 9)]
    order = rng.sample(cands, 4)
    return {
        "requirement_type": f"Requirement {rid}",
        "user_query": f"Any ideas about {rid}? ({tag})",
        "implicit_needs": [{"need": f"need A of {tag}", "evidences": ["the profile says so"]},
                           {"need": f"need B of {tag}", "evidences": ["a recent log"]}],
        "requirement": f"The user needs help with {rid} in situation {tag}.",
        "candidate_solutions": cands,
        "analysis": "filler",
        "pos_list": [{"solution": order[0], "feedback_reason": "fits"}, {"solution": order[1], "feedback_reason": "fits"}],
        "neg_list": [{"solution": order[2], "feedback_reason": "no"}, {"solution": order[3], "feedback_reason": "no"}],
    }


def _dialogue(n_topics: int, turns: int) -> list[dict]:
    """A grammar-following dialogue of about ``turns`` turns over ``n_topics`` topics."""
    per_topic = max(3, turns // n_topics)
    out = []
    for _ in range(n_topics):
        seq = [(Act.TOPIC_INQUIRY, Act.REQUIREMENT_PREDICTION), (Act.REQUIREMENT_CONFIRMATION, Act.REQUIREMENT_PREDICTION),
               (Act.REQUIREMENT_CONFIRMATION, Act.SOLUTION_PROPOSAL)]
        while len(seq) < per_topic - 1:
            seq.append((Act.SOLUTION_DISCUSSION, Act.SOLUTION_DISCUSSION))
            if len(seq) < per_topic - 1:
                seq.append((Act.SOLUTION_FEEDBACK, Act.SOLUTION_PROPOSAL))
        seq.append((Act.SOLUTION_FEEDBACK, Act.FEEDBACK_RESPONSE))
        for u, a in seq:
            out.append({"user": {"action": u.value, "content": f"user says something ({u.value})"},
                        "assistant": {"action": a.value, "content": f"assistant replies ({a.value})"}})
    return out


def make_bundle(uid: str, sessions: int = 10, logs_per_session: int = 20, turns: int = 14, topics: int = 2,
                seed: int = 0, query_sessions: int = 2) -> UserBundle:
    """One filler user with ``sessions`` kept situations, the last ``query_sessions`` of them in the query set."""
    rng = random.Random(f"{seed}-{uid}")
    req_types = {a: {f"{a}-{i}": f"Requirement {a}-{i}" for i in range(1, 5)} for a in ASPECTS}
    prefs = {a: {rid: {"pos": f"Likes concrete plans for {rid}.", "neg": f"Rejects vague advice on {rid}."}
                 for rid in ids} for a, ids in req_types.items()}
    all_ids = [rid for ids in req_types.values() for rid in ids]
    start = datetime(2024, 1, 1)
    days_per = max(2, 330 // sessions)
    situations = []
    for i in range(sessions):
        d0 = start + timedelta(days=i * days_per)
        d1 = d0 + timedelta(days=days_per - 1)
        kept = "query" if i >= sessions - query_sessions else "history"
        rids = rng.sample(all_ids, topics)
        span_minutes = int((d1 + timedelta(hours=20) - (d0 + timedelta(hours=8))).total_seconds() // 60)
        offsets = sorted(rng.sample(range(1, span_minutes - 1), logs_per_session))
        types = list(LogType)
        logs = []
        for j, off in enumerate(offsets):
            t = types[j % len(types)]
            ts = d0 + timedelta(hours=8, minutes=off)
            logs.append({"timestamp": ts.strftime("%Y-%m-%d %H:%M"), "type": t.value,
                         "content": _PATTERNS[t].format(w=rng.choice(_WORDS), n=rng.randint(10, 500))})
        situations.append({
            "time_span": f"{d0:%Y-%m-%d} ~ {d1:%Y-%m-%d}", "start_hour": 8, "end_hour": 20,
            "requirement_ids": rids, "situation": f"Filler situation {i} of user {uid}.", "kept": kept,
            "logs": logs, "topics": [_topic(rng, r, f"{uid}-{i}-{k}") for k, r in enumerate(rids)],
            "dialogue": _dialogue(topics, turns),
        })
    levels = ["low", "medium", "high"]
    profile = {
        "name": f"Filler User {uid}", "gender": rng.choice(["Male", "Female"]), "age": rng.randint(25, 55),
        "occupation": "The user works as a filler occupation.", "health status": "The user is in average health.",
        "family members": "The user lives with a partner.", "hobbies": "The user likes reading.",
        "personality": {t: rng.choice(levels) for t in
                        ("Openness", "Conscientiousness", "Extraversion", "Agreeableness", "Neuroticism")},
    }
    months = sorted({s["time_span"][:7] for s in situations})
    return UserBundle.model_validate({
        "uid": uid, "lang": "en", "profile": profile, "requirement_types": req_types, "preferences": prefs,
        "timeline": {m: f"Filler month {m}." for m in months}, "situations": situations,
    })


def make_release(root: str | Path, users: int = 3, **kwargs) -> Path:
    """Write a filler dataset of ``users`` users under ``root`` and return ``root``."""
    root = Path(root)
    write_release(root, [make_bundle(f"{i:04d}", **kwargs) for i in range(users)])
    return root
