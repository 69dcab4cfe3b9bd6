"""What the dataset says about a simulated topic — the gold every check compares with — and which checks that
gold allows for a given run (the rest are "n/a" with the reason, never a made-up figure)."""

from __future__ import annotations

from dataclasses import dataclass, field

from palset.dataset import Dataset, dataset_key
from palset.models import Profile, Turn
from sim.reference import topic_turns
from sim.textstats import features
from sim.types import RunSpec


@dataclass
class TopicGold:
    language: str
    query: str
    requirement: str
    needs: list[str]
    evidences: list[list[str]]  # per implicit need, the evidences the framework file gives it (may be empty)
    candidates: list[tuple[str, str]]  # (solution, pos | neg | neu), in stored order
    profile: Profile | None
    name: str
    own_turns: list[Turn] | None  # the dataset's own dialogue of the topic (None: it does not split into topics)
    reference: list[dict[str, float]] = field(default_factory=list)  # features of its user turns

    @property
    def has_verdicts(self) -> bool:
        return any(label in ("pos", "neg") for _, label in self.candidates)

    def profile_text(self) -> str:
        p = self.profile
        if p is None:
            return ""
        return (f"{p.name}, {p.age}, {p.gender}. Occupation: {p.occupation} Health: {p.health_status} "
                f"Family: {p.family_members} Hobbies: {p.hobbies}")


def _needs_with_evidence(topic) -> list[tuple[str, list[str]]]:
    framework = topic.framework.implicit_needs if topic.framework else []
    return [(need, list(framework[i].evidences) if i < len(framework) else [])
            for i, need in enumerate(topic.topic.implicit_needs)]


def topic_gold(dataset: Dataset, spec: RunSpec) -> TopicGold | str:
    """The gold of the run's topic, or why there is none (another dataset, a user or topic it does not have)."""
    if spec.dataset != dataset_key(dataset.root):
        return f"the run belongs to another dataset ({spec.dataset})"
    user = dataset.users.get(spec.user_id)
    session = user.session(spec.sample_id) if user else None
    topic = next((t for t in session.topics if t.key == spec.topic_key), None) if session else None
    if user is None or session is None or topic is None:
        return f"the dataset has no topic {spec.sample_id} {spec.topic_key} of user {spec.user_id}"
    t = topic.topic
    own = topic_turns(session, spec.topic_key)
    return TopicGold(language=user.language, query=t.user_query, requirement=t.requirement,
                     needs=list(t.implicit_needs),
                     evidences=[ev for _need, ev in _needs_with_evidence(topic)], candidates=[(c.solution, c.feedback) for c in t.candidate_solutions],
                     profile=user.profile, name=user.name, own_turns=own,
                     reference=[features(turn.user.content) for turn in own or []])


def unavailable(spec: RunSpec, gold: TopicGold) -> dict[str, str]:
    """check → why this run has no gold for it."""
    out: dict[str, str] = {}
    if spec.free_query:
        out["vague"] = "the opening question was typed (free query), not the dataset's"
    if not gold.has_verdicts:
        out["verdict"] = "the topic's candidate solutions carry no pos/neg verdicts"
    if gold.profile is None:
        out["persona"] = "the user has no profile (background.json)"
    if spec.mode != "fixed":
        out["act"] = "free mode: no schedule to follow"
    return out
