"""H²Memory (Mem-PAL §3): hierarchical × heterogeneous memory.

|            | concrete              | abstract    |
|------------|-----------------------|-------------|
| logs       | Log Graph → situations | Background  |
| dialogues  | Topic Outline          | Principle   |

Logs stage of session k: Log Graph over sliding windows of 10 logs (with the 10 before as
context), connected components → situations with aspects (components under ``min_situation_logs`` logs join
the group nearest in time; 1 keeps Mem-PAL's components), then the recursive 4-aspect background
update. Dialogue stage: topic segmentation with solutions and feedback, requirement refinement with
the session's top-3 situations and background. After the last history session, k-means (8
clusters, ≥ 2 members each) over refined history requirements gives principles; in each query session
every new topic joins its nearest cluster (the centroid moves to the running mean), then each cluster
the dialogue touched is updated once, as the reference does: the general requirement from the
cluster's new requirements, then the principle from the general requirement, the principle and the
new preferences (two calls per touched cluster, not per topic). Every LLM step has a bounded schema and a fallback, so a tiny model
slows the memory's quality, never the build.

Calls that do not depend on each other go out together (:meth:`memory.base.MemoryMethod.each`): the log-graph
windows, one summary per situation, the refinement of each topic, the two calls of each cluster's principle; and a
session's topic outline, which reads its dialogue only, is asked beside its logs stage and kept for the dialogue
stage (asked again only if the build stopped in between). What they store, and in which order, is the same as one
call after another. Every window and situation prompt starts with the session's logs (``h2_parts.shared_logs``); the
first window goes alone and, while the outline holds a slot, the rest keep to the slots it leaves, so they find that
prefix in a slot's prompt cache instead of computing it again on another (llama.cpp caches per slot).
"""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np
from pydantic import BaseModel

from backends.llm.types import StructuredResult
from backends.prompts import language_label, load_prompt
from memory.base import MemoryMethod, MemoryView, MethodContext, dialogue_turns, log_ref, scored_part, turn_ref
from memory.methods.h2_parts import (
    BackgroundOut,
    GeneralRequirementOut,
    OutlineOut,
    PrincipleAdjustOut,
    PrincipleOut,
    RefinedOut,
    RequirementAdjustOut,
    SituationOut,
    TopicOut,
    background_text,
    bullet,
    clean_edges,
    constrained_kmeans,
    group_lines,
    log_entries,
    log_graph_model,
    principle_item,
    shared_logs,
    situation_groups,
    tile_spans,
    topic_with_feedback,
    windows,
)
from memory.privacy import redact_text
from memory.types import BlockPart, Changes, MemoryItem, PromptBlock, Purpose, RetrievalTrace, RetrievedItem
from palset.dataset import Session
from palset.vocab import ASPECTS

# ---------------------------------------------------------------- the method


class H2Memory(MemoryMethod):
    name = "h2memory"
    label = "H²Memory"
    layers = ("log_graph", "situation", "background", "topic_outline", "principle")
    uses_llm = True
    groups_logs_in = "situation"
    indexed_layers = ("situation", "topic_outline")  # all its retrieval and refinement search (the rest is read whole)
    description = ("Log Graph → situations, recursive Background, Topic Outlines with refined requirements, "
                   "Principles from clustered history topics (Mem-PAL).")
    # min_situation_logs: components with fewer logs join the group nearest in time (1 = Mem-PAL's components)
    default_config = {"k_situations": 3, "k_topics": 3, "clusters": 8, "seed": 0, "min_situation_logs": 4}

    def __init__(self, ctx: MethodContext):
        super().__init__(ctx)
        self._outlined: dict[str, tuple[list[TopicOut], list[str]]] = {}  # session → its topics, asked early

    # ------------------------------------------------------------ LLM plumbing

    def _ask(self, prompt_name: str, model: type[BaseModel], notes: list[str], what: str, **values: Any):
        """One structured call; None (and a note) when the model never produced valid output."""
        if self.ctx.llm is None:
            notes.append(f"{what}: no LLM configured")
            return None
        prompt = load_prompt(f"memory/{prompt_name}", language=self.ctx.user.language)
        values.setdefault("language", language_label(prompt, self.ctx.user.language))
        out = self.ctx.llm.structured("memory_builder", prompt.messages(**values), model, prompt=prompt,
                                      cancel=self.ctx.cancel)
        if isinstance(out, StructuredResult):
            return out.value
        notes.append(f"{what}: model output invalid after {out.attempts} tries ({out.errors[-1][:120]}); fallback used")
        return None

    # ------------------------------------------------------------ logs stage

    def ingest_logs(self, session: Session, memory: MemoryView) -> Changes:
        llm = self.ctx.llm
        if llm is None or not session.turns or session.sample_id in self._outlined or llm.width("memory_builder") < 2:
            return self._logs(session, memory)
        # the session's topic outline reads the dialogue only: asked now, beside the logs, for the dialogue stage
        notes: list[str] = []

        def part(which: str) -> tuple[list[TopicOut], Changes]:
            # the logs part keeps to the slots the outline leaves (see the module docstring)
            return (self._topics(session, notes), Changes()) if which == "outline" else ([], self._logs(session, memory, 1))

        (topics, _), (_, changes) = llm.fan_out("memory_builder", part, ["outline", "logs"], self.ctx.cancel)
        self._outlined[session.sample_id] = (topics, notes)
        return changes

    def _logs(self, session: Session, memory: MemoryView, held: int = 0) -> Changes:
        changes = Changes()
        entries = log_entries(session)
        edges = self._log_graph(session, entries, changes.notes, held)
        if session.logs:
            changes.upserts.append(MemoryItem(
                id=f"{session.sample_id}_log_graph", layer="log_graph", session_id=session.sample_id,
                session_index=session.index, provenance=[log_ref(session, j) for j in range(len(session.logs))],
                text=f"{len(edges)} relations among {len(session.logs)} logs",
                meta={"edges": [[a, b, kind] for a, b, kind in edges]}))
        situations = self._situations(session, entries, edges, changes.notes, held)
        changes.upserts += situations
        changes.upserts += self._background(session, memory, situations, changes.notes)
        return changes

    def _log_graph(self, session: Session, entries: dict[str, dict[str, str]], notes: list[str],
                   held: int = 0) -> list[tuple[int, int, str]]:
        jobs = [(w, window, context) for w, (window, context) in enumerate(windows(len(session.logs)))
                if len(window) + len(context) >= 2]

        def window_edges(job: tuple[int, list[int], list[int]], notes: list[str]) -> list[tuple[int, int, str]]:
            w, window, context = job
            targets = [f"log_{j}" for j in window]
            allowed = [f"log_{j}" for j in context + window[:-1]]
            out = self._ask("h2_log_graph", log_graph_model(targets, allowed), notes, f"log graph window {w}",
                            session_logs=shared_logs(entries, context + window), allowed=", ".join(allowed),
                            targets=json.dumps({t: entries[t] for t in targets}, ensure_ascii=False))
            return clean_edges([r.model_dump() for r in out.relations], window, context) if out is not None else []

        # the first window alone: the others then find the session's logs it starts with in the server's cache
        found = self.each(window_edges, jobs[:1], notes) + self.each(window_edges, jobs[1:], notes, held)
        return sorted({e for edges in found for e in edges})

    def _situations(self, session: Session, entries: dict[str, dict[str, str]], edges: list[tuple[int, int, str]],
                    notes: list[str], held: int = 0) -> list[MemoryItem]:
        groups, joined = situation_groups(len(session.logs), edges, [lg.timestamp.timestamp() for lg in session.logs],
                                          int(self.ctx.config.get("min_situation_logs", 1)))
        return self.each(lambda job, own: self._group_situation(session, entries, edges, *job, joined, own),
                         list(enumerate(groups)), notes, held)

    def _group_situation(self, session: Session, entries: dict[str, dict[str, str]], edges: list[tuple[int, int, str]],
                         c: int, group: list[int], joined: set[int], notes: list[str]) -> MemoryItem:
        """One group of logs → one situation (its summary, or the logs themselves when none came); the ``joined``
        logs (by time, not by an edge) are kept in ``meta["joined_by_time"]``."""
        out = self._ask("h2_situation", SituationOut, notes, f"situation {c}", logs=group_lines(entries, edges, group),
                        session_logs=shared_logs(entries, group))
        text = out.situation.strip() if out else ""
        if not text:  # no usable reply (or only blanks): the group's own logs stand for the situation
            text = " ".join(redact_text(session.logs[j].content) for j in group)[:600]
        aspects = list(dict.fromkeys(out.situation_aspects)) if out else []
        return MemoryItem(
            id=f"{session.sample_id}_situation{c}", layer="situation", text=text, session_id=session.sample_id,
            session_index=session.index, provenance=[log_ref(session, j) for j in group],
            importance=float(len(group)),
            meta={"aspects": aspects, "log_ids": group, "joined_by_time": [j for j in group if j in joined]})

    def _background(self, session: Session, memory: MemoryView, situations: list[MemoryItem],
                    notes: list[str]) -> list[MemoryItem]:
        uid = self.ctx.user.uid
        current = {a: memory.items.get(f"{uid}_background_{a}") for a in ASPECTS}
        first = self.ctx.user.sessions[0]
        old_span = f"{first.logs[0].timestamp:%Y-%m-%d} … {session.logs[0].timestamp:%Y-%m-%d}" if session.logs and first.logs else "nothing yet"
        new_span = (f"{session.logs[0].timestamp:%Y-%m-%d} … {session.dialogue_timestamp:%Y-%m-%d}"
                    if session.logs else f"{session.dialogue_timestamp:%Y-%m-%d}")
        out = self._ask("h2_background", BackgroundOut, notes, "background update",
                        old_span=old_span, new_span=new_span,
                        background="\n".join(f"- {a}: {background_text(current[a])}" for a in ASPECTS),
                        situations="\n".join(f"- {s.text}" for s in situations) or "(none)")
        items = []
        for a in ASPECTS:
            new_text = getattr(out.updating_content, a) if out and a in out.updating_aspects else None
            previous = current[a]
            if new_text:
                prov = [f"item:{s.id}" for s in situations if a in s.meta.get("aspects", [])][:10]
                items.append(MemoryItem(id=f"{uid}_background_{a}", layer="background", text=new_text,
                                        session_id=session.sample_id, session_index=session.index,
                                        provenance=prov or [f"item:{s.id}" for s in situations[:3]], meta={"aspect": a}))
            elif previous is None:
                items.append(MemoryItem(id=f"{uid}_background_{a}", layer="background", text="",
                                        session_id=session.sample_id, session_index=session.index, meta={"aspect": a}))
        return items

    # ------------------------------------------------------------ dialogue stage

    def ingest_dialogue(self, session: Session, memory: MemoryView) -> Changes:
        changes = Changes()
        outlines = self._outlines(session, memory, changes.notes)
        if session.split == "query":
            outlines, principles = self._update_principles(outlines, memory, changes.notes)
            changes.upserts += principles
        changes.upserts += outlines
        self.honour_forget_requests(session, memory, changes)
        return changes

    def _topics(self, session: Session, notes: list[str]) -> list[TopicOut]:
        """The dialogue's topics (the outline call, or the whole dialogue as one topic when it never answers)."""
        turns = dialogue_turns(session)
        if not turns:
            return []
        numbered = "\n".join(f"turn_{t}:\n{text}" for t, text in turns)
        out = self._ask("h2_topic_outline", OutlineOut, notes, "topic outline", dialogue=numbered)
        if out is not None:
            return out.topics
        first_user = turns[0][1].split("\n")[0].removeprefix("user: ")
        return [TopicOut(turn_span=[1, len(session.turns)], requirement=first_user[:400], solution_list=[],
                         preference="")]

    def _outlines(self, session: Session, memory: MemoryView, notes: list[str]) -> list[MemoryItem]:
        early = self._outlined.pop(session.sample_id, None)  # asked beside this session's logs
        if early is not None:
            notes.extend(early[1])
        topics = early[0] if early is not None else self._topics(session, notes)
        if not topics:
            return []
        spanned = list(zip(topics, tile_spans([t.turn_span for t in topics], len(session.turns))))
        contexts = [self._refine_context(session, memory, topic.requirement) for topic, _ in spanned]  # in order
        refinements = self.each(lambda job, own: self._refine(*job, own),
                                [(topic.requirement, *context) for (topic, _), context in zip(spanned, contexts)], notes)
        items = []
        for t, ((topic, (a, b)), refined, (situations, _)) in enumerate(zip(spanned, refinements, contexts)):
            situation_ids = [s.id for s in situations]
            items.append(MemoryItem(
                id=f"{session.sample_id}_topic{t}", layer="topic_outline", text=refined,
                session_id=session.sample_id, session_index=session.index,
                provenance=[turn_ref(session, n) for n in range(a, b + 1)] + [f"item:{s}" for s in situation_ids],
                meta={"turn_span": [a, b], "requirement_original": topic.requirement,
                      "solutions": [s.model_dump() for s in topic.solution_list], "preference": topic.preference,
                      "cluster": None}))
        return items

    def _refine_context(self, session: Session, memory: MemoryView, requirement: str) -> tuple[list[MemoryItem], str]:
        """The session's situations nearest to the requirement and the background of their aspects."""
        hits = self.ctx.index.search("situation", requirement, int(self.ctx.config["k_situations"]), memory.stage,
                                     where={"session_index": session.index}, exclude=memory.forgotten)
        situations = [memory.items[i] for i, _ in hits if i in memory.items]
        return situations, self._background_lines(memory, situations)

    def _refine(self, requirement: str, situations: list[MemoryItem], background: str, notes: list[str]) -> str:
        out = self._ask("h2_refine", RefinedOut, notes, "requirement refinement", requirement=requirement,
                        situations="\n".join(f"- {s.text}" for s in situations) or "(none)",
                        background=background or "(none)")
        refined = out.requirement.strip() if out else ""
        return refined or requirement  # blanks: the outline's own requirement

    def _background_lines(self, memory: MemoryView, situations: list[MemoryItem]) -> str:
        uid = self.ctx.user.uid
        aspects = [a for a in ASPECTS if any(a in s.meta.get("aspects", []) for s in situations)]
        lines = []
        for a in aspects:
            item = memory.items.get(f"{uid}_background_{a}")
            if item and item.text:
                lines.append(f"- {a}: {item.text}")
        return "\n".join(lines)

    # ------------------------------------------------------------ principles

    def finish_history(self, memory: MemoryView) -> Changes:
        changes = Changes()
        topics = sorted(memory.layer("topic_outline"), key=lambda i: i.id)
        if not topics:
            return changes
        vectors = self.ctx.embedder.embed_documents([t.text for t in topics])
        labels, centers = constrained_kmeans(vectors, int(self.ctx.config["clusters"]), seed=int(self.ctx.config["seed"]))
        rng = random.Random(int(self.ctx.config["seed"]))
        uid = self.ctx.user.uid
        last = topics[-1]
        clusters = []
        for c in sorted(set(int(x) for x in labels)):  # samples drawn in cluster order, before any call
            members = [t for t, lab in zip(topics, labels) if int(lab) == c]
            clusters.append((c, members, rng.sample(members, min(10, len(members)))))
        principles = self.each(lambda job, own: self._cluster_principle(job[0], job[2], own), clusters, changes.notes)
        for (c, members, _), (general_text, principle_text) in zip(clusters, principles):
            changes.upserts.append(principle_item(uid, c, general_text, principle_text, members, centers[c],
                                                        len(members), last))
            for t in members:
                changes.upserts.append(t.model_copy(update={"meta": {**t.meta, "cluster": c}}))
        return changes

    def _cluster_principle(self, c: int, sample: list[MemoryItem], notes: list[str]) -> tuple[str, str]:
        """(general requirement, principle) of one cluster from its sampled topics: two calls, one after the other."""
        general = self._ask("h2_principle_requirement", GeneralRequirementOut, notes, f"cluster {c} requirement",
                            requirements="\n".join(f"- {t.text}" for t in sample))
        general_text = general.general_requirement if general else sample[0].meta.get("requirement_original", sample[0].text)[:120]
        principle = self._ask("h2_principle_preference", PrincipleOut, notes, f"cluster {c} principle",
                              general_requirement=general_text,
                              preferences="\n".join(f"- {t.meta.get('preference', '')}" for t in sample if t.meta.get("preference")) or "(none)")
        return general_text, principle.principle if principle else ""

    def _update_principles(self, outlines: list[MemoryItem], memory: MemoryView,
                           notes: list[str]) -> tuple[list[MemoryItem], list[MemoryItem]]:
        """Assign each new topic to the nearest centroid and move it; then, once per cluster this dialogue touched,
        let the LLM adjust its general requirement (input: the new requirements) and its principle (input: the
        general requirement, the principle and the new preferences) — Mem-PAL §3.4, query phase."""
        principles = {p.id: p for p in memory.layer("principle")}
        if not principles or not outlines:
            return outlines, []
        vectors = self.ctx.embedder.embed_documents([o.text for o in outlines])
        centroids = {pid: np.array(p.meta["centroid"]) for pid, p in principles.items()}
        counts = {pid: int(p.meta["count"]) for pid, p in principles.items()}
        touched: dict[str, list[MemoryItem]] = {}
        out_items: list[MemoryItem] = []
        for outline, vec in zip(outlines, vectors):
            pid = min(centroids, key=lambda k: float(np.linalg.norm(centroids[k] - vec)))
            counts[pid] += 1
            centroids[pid] = (centroids[pid] * (counts[pid] - 1) + vec) / counts[pid]
            touched.setdefault(pid, []).append(outline)
            out_items.append(outline.model_copy(update={"meta": {**outline.meta,
                                                                 "cluster": int(pid.rsplit("cluster", 1)[1])}}))
        updated = self.each(lambda job, own: self._adjust_cluster(principles[job[0]], job[1], centroids[job[0]],
                                                                  counts[job[0]], own), list(touched.items()), notes)
        return out_items, updated

    def _adjust_cluster(self, p: MemoryItem, new: list[MemoryItem], centroid: np.ndarray, count: int,
                        notes: list[str]) -> MemoryItem:
        """One touched cluster after a dialogue: at most one requirement and one principle update."""
        general, principle = p.meta["general_requirement"], p.meta["principle"]
        adj = self._ask("h2_requirement_update", RequirementAdjustOut, notes, f"{p.id} requirement update",
                        current=general, requirements="\n".join(f"- {o.text}" for o in new))
        if adj and adj.adjust == "Yes" and adj.general_requirement:
            general = adj.general_requirement[:120]
        preferences = "\n".join(f"- {o.meta['preference']}" for o in new if o.meta.get("preference")) or "(none)"
        adj = self._ask("h2_principle_update", PrincipleAdjustOut, notes, f"{p.id} principle update",
                        general_requirement=general, current=principle, preferences=preferences)
        if adj and adj.adjust == "Yes" and adj.principle:
            principle = adj.principle
        last = new[-1]
        return p.model_copy(update={
            "text": f"{general}: {principle}".strip(": "), "session_id": last.session_id,
            "session_index": last.session_index, "importance": float(count),
            "provenance": (p.provenance + [f"item:{o.id}" for o in new])[-20:],
            "meta": {**p.meta, "general_requirement": general, "principle": principle,
                     "members": [*p.meta["members"], *(o.id for o in new)],
                     "centroid": [round(float(x), 6) for x in centroid], "count": count}})

    # ------------------------------------------------------------ retrieval

    def retrieve(self, query: str, purpose: Purpose, memory: MemoryView, current: Session | None) -> RetrievalTrace:
        cfg = self.ctx.config
        if current is not None:
            where_sit: dict[str, Any] = {"session_index": current.index}
            where_topic: dict[str, Any] = {"session_index": {"$lt": current.index}}
        else:
            latest = max((i.session_index for i in memory.items.values()), default=0)
            where_sit, where_topic = {"session_index": latest}, {}
        sit_hits = self.ctx.index.search("situation", query, int(cfg["k_situations"]), memory.stage, where=where_sit,
                                         exclude=memory.forgotten)
        topic_hits = self.ctx.index.search("topic_outline", query, int(cfg["k_topics"]), memory.stage,
                                           where=where_topic or None, exclude=memory.forgotten)
        situations = [RetrievedItem(item=memory.items[i], score=s) for i, s in sit_hits if i in memory.items]
        topics = [RetrievedItem(item=memory.items[i], score=s) for i, s in topic_hits if i in memory.items]
        uid = self.ctx.user.uid
        aspects = [a for a in ASPECTS if any(a in r.item.meta.get("aspects", []) for r in situations)]
        background = [memory.items[f"{uid}_background_{a}"] for a in aspects
                      if f"{uid}_background_{a}" in memory.items and memory.items[f"{uid}_background_{a}"].text]
        clusters = list(dict.fromkeys(r.item.meta.get("cluster") for r in topics if r.item.meta.get("cluster") is not None))
        principles = [memory.items[self.principle_id(c)] for c in clusters if self.principle_id(c) in memory.items][:3]
        def unscored(item: MemoryItem, text: str) -> BlockPart:
            return scored_part(RetrievedItem(item=item), text)

        # fitting a window leaves out the lowest-scored situations and topics first, background and principles last
        blocks = [PromptBlock.of_parts("User background and recent situations",
                                       [unscored(b, f"- {b.meta['aspect']}: {b.text}") for b in background]
                                       + [scored_part(r, bullet(r.item.text)) for r in situations], "lowest_score", "items")]
        if purpose == "requirement":
            blocks.append(PromptBlock.of_parts("The user's past requirements",
                                               [unscored(p, f"- general type: {p.meta['general_requirement']}") for p in principles]
                                               + [scored_part(r, f"- {r.item.text}") for r in topics], "lowest_score", "items"))
        else:
            blocks.append(PromptBlock.of_parts("The user's principles", [
                unscored(p, f"- {p.meta['general_requirement']}: {p.meta['principle']}") for p in principles],
                "lowest_score", "items"))
            blocks.append(PromptBlock.of_parts("Past requirements and how the user received solutions",
                                               [scored_part(r, topic_with_feedback(r.item)) for r in topics],
                                               "lowest_score", "items", sep="\n\n"))
        retrieved = situations + topics + [RetrievedItem(item=b) for b in background] + [RetrievedItem(item=p) for p in principles]
        return self.trace(query, purpose, current, retrieved, blocks)

    def principle_id(self, cluster: object) -> str:
        """The id of the principle a topic's ``meta["cluster"]`` points to (the gold memory keys them otherwise)."""
        return f"{self.ctx.user.uid}_cluster{cluster}"
