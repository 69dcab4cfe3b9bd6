"""The ground-truth memory (``gold``): the H²Memory a perfect builder would make from PAL-Set's own annotations.

No LLM, seconds per user, the same five layers, item ids, provenance and retrieval as :mod:`h2memory`
(it subclasses it and replaces only the building), so every view, retrieval and fidelity metric treats
it like any other memory. It is an **oracle upper bound**: it reads what the dataset's generator knew —
but never what the test items were made from. At session k it holds only what was known *before* session
k's dialogue, and at a **query** session nothing of that session's situations: Mem-PAL writes a query
topic's user query, implicit needs and requirement from its situation paragraph, so the paragraph — and the
aspects of the topics' requirement types — would hand the answers over.

Logs stage of session k (what the device logs since the last dialogue tell):

- log graph: the session's logs, with **no relations** — PAL-Set annotates none between logs (the item says how
  many logs and gold situations the session has);
- situations: one item per gold situation met in this session's logs, with exactly those logs (a log belongs to
  the situation whose ``situation.json`` time span contains it; the nearest span when none does, with a note).
  At a history session the item holds the situation paragraph and the aspects of its requirement ids (the ids
  themselves are *not* kept); at a query session it holds the **logs themselves** instead of the paragraph and
  all four aspects (``meta.withheld`` says so);
- background: the four aspects from the profile (occupation, health status, family members, hobbies) — the
  annotation, unchanged from the first session on.

Dialogue stage of a *history* session: a topic outline per topic (the gold requirement; the user query,
implicit needs, the turn span from the Topic Inquiry acts, and the solutions the assistant proposed with the
user's verdicts) and, per requirement type met so far, a principle (the type's phrase with its pos/neg
preference). Which candidate a proposal put forward is **derived, not annotated** (token overlap, at least
``MIN_MATCH``; a proposal below it keeps its own words with an unknown verdict); each solution and the
outline's liked/disliked line say so (``meta.derived``). A *query* session's dialogue adds nothing: query
topics are the evaluation set and never enter the gold memory. Without ``situation/situation.json`` there are
no situations and no principles (topics cannot be linked to requirement types); without
``background/background.json`` no background. Every build stage says so in its notes.
"""

from __future__ import annotations

from typing import ClassVar

from memory.base import MemoryView, MethodContext, log_ref, render_log, turn_ref
from memory.methods.gold_parts import (
    DERIVED_OUTLINE,
    PROFILE_FIELDS,
    groups_in_order,
    log_situations,
    profile_texts,
    proposals,
    template,
    topic_spans,
)
from memory.methods.h2memory import H2Memory
from memory.privacy import redact_text
from memory.types import Changes, MemoryItem
from palset.dataset import Session, User
from palset.vocab import ASPECTS

ORACLE_NOTE = "oracle upper bound: built from the dataset's annotations, not learnt from the sessions"
NEEDS_SITUATIONS = ("no situation/situation.json: the gold log graph, situations and principles need it "
                    "(logs are placed in situations by their time spans; topics reach requirement types through them)")


class GoldMemory(H2Memory):
    name = "gold"
    label = "Ground truth (oracle upper bound)"
    uses_llm = False
    oracle: ClassVar[bool] = True
    indexed_layers = H2Memory.indexed_layers  # it is retrieved as H²Memory is
    index_on_build = False  # building takes well under a second; embedding waits for the first retrieval
    description = ("Oracle upper bound, no LLM: the H²Memory a perfect builder would make from PAL-Set's annotations "
                   "(gold situations and their logs, profile background, gold requirements with the proposed "
                   "solutions and verdicts, each requirement type's pos/neg preference). Query topics never enter it, "
                   "nor a query session's situation paragraph or its topics' aspects.")
    default_config = {"k_situations": 3, "k_topics": 3}

    def principle_id(self, cluster: object) -> str:
        return f"{self.ctx.user.uid}_principle_{cluster}"

    # ------------------------------------------------------------ logs stage

    def ingest_logs(self, session: Session, memory: MemoryView) -> Changes:
        changes = Changes()
        user = self.ctx.user
        situations: list[MemoryItem] = []
        if not user.situations:
            changes.notes.append(NEEDS_SITUATIONS)
        elif session.logs:
            labels, outside = log_situations(session, user.situations)
            groups = groups_in_order(labels)
            changes.upserts.append(MemoryItem(
                id=f"{session.sample_id}_log_graph", layer="log_graph", session_id=session.sample_id,
                session_index=session.index, provenance=[log_ref(session, j) for j in range(len(session.logs))],
                text=template(user.language, "graph", logs=len(session.logs), groups=len(groups)),
                meta={"edges": [], "oracle": True}))
            situations = [self._situation(session, c, key, group) for c, (key, group) in enumerate(groups)]
            if outside:
                changes.notes.append(f"{outside} log(s) lay outside every situation span: placed in the nearest one")
            if session.split == "query":
                changes.notes.append("query session: its situations hold their logs, not the situation paragraph or "
                                     "its requirement types' aspects (the query topics are written from them)")
        changes.upserts += situations
        if user.profile is None:
            changes.notes.append("no background/background.json: the gold background has no profile part")
        changes.upserts += self._gold_background(session, memory)
        return changes

    def _situation(self, session: Session, c: int, key: str, group: list[int]) -> MemoryItem:
        sit = self.ctx.user.situations[key]
        meta: dict = {"log_ids": group, "gold_situation": key, "oracle": True,
                      "span": [f"{sit.start_timestamp:%Y-%m-%d %H:%M}", f"{sit.end_timestamp:%Y-%m-%d %H:%M}"]}
        if session.split == "query":  # what was known before the query dialogue: its logs, not their paragraph
            text = "\n".join(render_log(session, j) for j in group)
            meta.update(aspects=list(ASPECTS), withheld=template(self.ctx.user.language, "withheld"))
        else:
            text = redact_text(sit.situation)
            meta["aspects"] = list(dict.fromkeys(rid.split("-", 1)[0] for rid in sit.requirement_ids))
        return MemoryItem(
            id=f"{session.sample_id}_situation{c}", layer="situation", text=text, session_id=session.sample_id,
            session_index=session.index, provenance=[log_ref(session, j) for j in group],
            importance=float(len(group)), meta=meta)

    def _gold_background(self, session: Session, memory: MemoryView) -> list[MemoryItem]:
        """The profile's sentence per aspect, written once (the annotation does not change over the sessions)."""
        user = self.ctx.user
        profile = profile_texts(user)
        return [MemoryItem(id=f"{user.uid}_background_{aspect}", layer="background", text=redact_text(profile[aspect]),
                           session_id=session.sample_id, session_index=session.index,
                           provenance=[f"profile:{PROFILE_FIELDS[aspect]}"],
                           meta={"aspect": aspect, "profile": redact_text(profile[aspect]), "oracle": True})
                for aspect in ASPECTS
                if profile[aspect] and f"{user.uid}_background_{aspect}" not in memory.items]

    # ------------------------------------------------------------ dialogue stage

    def ingest_dialogue(self, session: Session, memory: MemoryView) -> Changes:
        changes = Changes()
        if session.split == "query":
            changes.notes.append("query session: its topics are the evaluation set and never enter the gold memory")
        else:
            spans, exact = topic_spans(session)
            if not exact:
                changes.notes.append("topic turn spans split evenly: the Topic Inquiry turns do not match the topics")
            principles: dict[str, MemoryItem] = {}
            for t, (topic, span) in enumerate(zip(session.topics, spans)):
                outline = self._outline(session, memory, t, topic, span)
                changes.upserts.append(outline)
                rid = topic.requirement_type_id
                if rid is None:
                    continue
                principle = self._principle(session, rid, outline, principles.get(rid) or memory.items.get(self.principle_id(rid)))
                if principle is not None:
                    principles[rid] = principle
            changes.upserts += list(principles.values())
            if session.topics and not self.ctx.user.situations:
                changes.notes.append(NEEDS_SITUATIONS)
        self.honour_forget_requests(session, memory, changes)
        return changes

    def _outline(self, session: Session, memory: MemoryView, t: int, topic, span: tuple[int, int]) -> MemoryItem:
        lang = self.ctx.user.language
        props = proposals(session, topic, span, lang)
        liked = [p.solution for p in props if p.feedback_type == "pos"]
        disliked = [p.solution for p in props if p.feedback_type == "neg"]
        none = template(lang, "none")
        preference = template(lang, "preference", pos=" / ".join(liked) or none, neg=" / ".join(disliked) or none)
        derived = {"solutions": DERIVED_OUTLINE, "preference": DERIVED_OUTLINE} if props else {}
        home = [i.id for i in memory.layer("situation") if i.session_id == session.sample_id
                and i.meta.get("gold_situation") == session.situation_id]
        a, b = span
        return MemoryItem(
            id=f"{session.sample_id}_topic{t}", layer="topic_outline", text=redact_text(topic.topic.requirement),
            session_id=session.sample_id, session_index=session.index,
            provenance=[turn_ref(session, n) for n in range(a, b + 1)] + [f"item:{i}" for i in home],
            meta={"turn_span": [a, b], "requirement_original": redact_text(topic.topic.user_query),
                  "implicit_needs": [redact_text(n) for n in topic.topic.implicit_needs],
                  "solutions": [{"solution": redact_text(p.solution), "user_feedback": redact_text(p.user_feedback),
                                 "feedback_type": p.feedback_type, "turn": p.turn, "match": p.overlap,
                                 "derived": p.how} for p in props],
                  "preference": redact_text(preference), "cluster": topic.requirement_type_id,
                  "requirement_id": topic.requirement_type_id, "requirement_type": topic.requirement_type,
                  "topic_key": topic.key, "oracle": True, "derived": derived})

    def _principle(self, session: Session, rid: str, outline: MemoryItem, previous: MemoryItem | None) -> MemoryItem | None:
        user = self.ctx.user
        pref = user.preferences.get(rid)
        if pref is None:
            return None
        members = [*(previous.meta["members"] if previous else []), outline.id]
        phrase = redact_text(user.requirement_phrase(rid) or pref.requirement)
        pos, neg = redact_text(pref.preference.pos), redact_text(pref.preference.neg)
        principle = template(user.language, "principle", pos=pos, neg=neg)
        return MemoryItem(
            id=self.principle_id(rid), layer="principle", text=f"{phrase}: {principle}",
            session_id=session.sample_id, session_index=session.index,
            provenance=[f"item:{m}" for m in members][-20:], importance=float(len(members)),
            meta={"requirement_id": rid, "general_requirement": phrase, "principle": principle, "pos": pos, "neg": neg,
                  "members": members, "count": len(members), "oracle": True})

    def finish_history(self, memory: MemoryView) -> Changes:
        return Changes()  # principles grow with every history topic; nothing to cluster


def gold_stages(user: User) -> list[dict[str, MemoryItem]]:
    """The gold memory right after every stage (two per session: logs, dialogue), built in memory.

    Deterministic and pure (no store, no index, no embedder): the reference every fidelity figure is
    measured against, independent of any stored build a person may have edited. Cached on the user.
    """
    cache = user.derived_cache
    if "gold_stages" not in cache:
        method = GoldMemory(MethodContext("", user, "gold", None, None, None, dict(GoldMemory.default_config)))  # type: ignore[arg-type]  # gold needs no LLM, embedder or index to compute its stages
        items: dict[str, MemoryItem] = {}
        stages: list[dict[str, MemoryItem]] = []
        for session in user.sessions:
            for step in (method.ingest_logs, method.ingest_dialogue):
                changes = step(session, MemoryView(len(stages) - 1, dict(items)))
                for item_id in changes.deletes:
                    items.pop(item_id, None)
                items.update({i.id: i for i in changes.upserts})
                stages.append(dict(items))
        cache["gold_stages"] = stages
    return cache["gold_stages"]
