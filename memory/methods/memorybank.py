"""MemoryBank (Zhong et al., AAAI 2024), adapted to PAL sessions.

Per session the LLM writes an *event summary* (what happened: situation from the logs, what the
user discussed) and rewrites the *user portrait* (personality, preferences, needs) from the
previous portrait and the session's dialogue. Events fade along an Ebbinghaus forgetting curve,
retention ``R = exp(-days since last recall / (strength × decay_days))``; when a session starts
and an event's retention has fallen below ``forget_threshold`` it is deleted. Retrieval ranks
earlier events by vector similarity × retention. Retrieval writes nothing, so recall does not
strengthen an event here (every event keeps ``strength`` 1.0 and ``last_recall`` = its own date).
"""

from __future__ import annotations

import math
from datetime import date

from backends.prompts import load_prompt
from memory.base import (
    MemoryMethod,
    MemoryView,
    forget_requests,
    log_ref,
    render_dialogue,
    render_logs,
    scored_part,
    turn_ref,
)
from memory.rewriting import (
    ask,
    failure_note,
    forget_instruction,
    language_name,
    scrub_items,
    text_schema,
    view_with,
)
from memory.types import Changes, MemoryItem, PromptBlock, Purpose, RetrievalTrace, RetrievedItem
from palset.dataset import Session

NO_PORTRAIT = "No portrait yet."


class MemoryBank(MemoryMethod):
    name = "memorybank"
    label = "MemoryBank"
    layers = ("event", "portrait")
    uses_llm = True
    groups_logs_in = "event"
    description = ("An event summary per session that fades along an Ebbinghaus forgetting curve, plus an evolving "
                   "user portrait; the top-3 events by similarity × retention, the portrait and current logs.")
    default_config = {"k": 3, "decay_days": 30, "forget_threshold": 0.05}

    @property
    def portrait_id(self) -> str:
        return f"{self.ctx.user.uid}_portrait"

    def retention(self, item: MemoryItem, when: date) -> float:
        """Ebbinghaus retention of an event at ``when``."""
        last = item.meta.get("last_recall") or item.meta.get("date")
        if not last:
            return 1.0
        days = max(0, (when - date.fromisoformat(str(last)[:10])).days)
        strength = float(item.meta.get("strength", 1.0)) or 1.0
        decay = float(self.ctx.config.get("decay_days", 30))
        return math.exp(-days / (strength * decay))

    def _threshold(self) -> float:
        return float(self.ctx.config.get("forget_threshold", 0.05))

    def ingest_dialogue(self, session: Session, memory: MemoryView) -> Changes:
        changes = Changes()
        today = session.dialogue_timestamp.date()
        for event in sorted(memory.layer("event"), key=lambda i: (i.session_index, i.id)):
            r = self.retention(event, today)
            if r < self._threshold():
                changes.deletes.append(event.id)
                changes.notes.append(f"forgetting curve: event {event.id} (last recalled {event.meta.get('last_recall')}) "
                                     f"retention {r:.3f} < {self._threshold()} on {today} → forgotten")
        requests = forget_requests(session)
        language = language_name(self.ctx.language)
        dialogue = render_dialogue(session)
        if session.logs or dialogue:
            prompt = load_prompt("memory/memorybank_event")
            schema = text_schema("EventSummary", "summary", 1000, "What happened in this session, in 1-3 sentences")
            result = ask(self.ctx, prompt, schema, language=language, date=f"{today:%Y-%m-%d}",
                         logs=render_logs(session) or "(none)", dialogue=dialogue or "(none)",
                         forget=forget_instruction(requests))
            if result.ok and result.value.summary.strip():
                refs = ([log_ref(session, j) for j in range(len(session.logs))]
                        + [turn_ref(session, t) for t in range(1, len(session.turns) + 1)])
                changes.upserts.append(MemoryItem(
                    id=f"{session.sample_id}_event", layer="event", text=result.value.summary.strip(),
                    session_id=session.sample_id, session_index=session.index, provenance=refs,
                    meta={"date": today.isoformat(), "strength": 1.0, "last_recall": today.isoformat()}))
            elif not result.ok:
                changes.notes.append(failure_note("event summary", session, result, "events (none added)"))
        if dialogue:
            prev = memory.items.get(self.portrait_id)
            prompt = load_prompt("memory/memorybank_portrait")
            schema = text_schema("UserPortrait", "portrait", 2000,
                                 "The updated portrait: personality, preferences, needs, situation")
            result = ask(self.ctx, prompt, schema, language=language, previous=prev.text if prev else NO_PORTRAIT,
                         date=f"{today:%Y-%m-%d}", dialogue=dialogue, forget=forget_instruction(requests))
            if result.ok and result.value.portrait.strip():
                refs = [turn_ref(session, t) for t in range(1, len(session.turns) + 1)]
                changes.upserts.append(MemoryItem(
                    id=self.portrait_id, layer="portrait", text=result.value.portrait.strip(),
                    session_id=session.sample_id, session_index=session.index,
                    provenance=[*refs, f"item:{self.portrait_id}"]))
            elif not result.ok:
                changes.notes.append(failure_note("portrait update", session, result, "portrait"))
        if requests:
            current = view_with(memory, changes)
            scrub_items([i for i in current.items.values() if i.layer == "portrait" or i.session_id == session.sample_id],
                        requests, memory, changes)
        self.honour_forget_requests(session, view_with(memory, changes), changes)
        return changes

    def ranked_events(self, query: str, memory: MemoryView, current: Session | None) -> list[RetrievedItem]:
        """Earlier events by similarity × retention (events already below the threshold left out), best k."""
        events = memory.layer("event")
        if not events:
            return []
        when = current.dialogue_timestamp.date() if current else max(
            date.fromisoformat(str(e.meta.get("date", "1970-01-01"))[:10]) for e in events)
        where = {"session_index": {"$lt": current.index}} if current is not None else None
        hits = self.ctx.index.search("event", query, len(events), memory.stage, where=where, exclude=memory.forgotten)
        scored = []
        for item_id, similarity in hits:
            item = memory.items.get(item_id)
            if item is None:
                continue
            r = self.retention(item, when)
            if r >= self._threshold():
                scored.append(RetrievedItem(item=item, score=similarity * r))
        scored.sort(key=lambda h: -(h.score or 0.0))
        return scored[: int(self.ctx.config.get("k", 3))]

    def retrieve(self, query: str, purpose: Purpose, memory: MemoryView, current: Session | None) -> RetrievalTrace:
        portrait = memory.items.get(self.portrait_id)
        events = self.ranked_events(query, memory, current)
        blocks = [
            PromptBlock(title="User portrait", text=portrait.text if portrait else ""),
            PromptBlock.of_parts("Related past events", [
                scored_part(h, f"- [{h.item.meta.get('date', h.item.session_id)}] {h.item.text}") for h in events],
                "lowest_score", "items"),
            self.current_logs_block(current),
        ]
        retrieved = ([RetrievedItem(item=portrait)] if portrait else []) + events
        return self.trace(query, purpose, current, retrieved, blocks)
