"""RecurSum (recursive summaries), as Mem-PAL adapts it: a running dialogue summary and a separate
running log summary, each rewritten every session from its previous version and that session's
text; the assistant sees both summaries plus every log of the current session."""

from __future__ import annotations

from backends.prompts import load_prompt
from memory.base import (
    MemoryMethod,
    MemoryView,
    dialogue_turns,
    forget_requests,
    log_ref,
    render_logs,
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

NO_SUMMARY = "No previous summary."


class RecurSum(MemoryMethod):
    name = "recursum"
    label = "RecurSum"
    layers = ("summary", "log_summary")
    uses_llm = True
    description = ("Recursive summaries: a dialogue summary and a separate log summary, each rewritten every "
                   "session from its previous version; plus all current-session logs.")
    default_config = {"summary_chars": 3000}

    @property
    def summary_id(self) -> str:
        return f"{self.ctx.user.uid}_summary"

    @property
    def log_summary_id(self) -> str:
        return f"{self.ctx.user.uid}_log_summary"

    def _limit(self) -> int:
        return int(self.ctx.config.get("summary_chars", 3000))

    def ingest_logs(self, session: Session, memory: MemoryView) -> Changes:
        changes = Changes()
        if not session.logs:
            return changes
        prev = memory.items.get(self.log_summary_id)
        prompt = load_prompt("memory/recursum_log_summary")
        schema = text_schema("LogSummary", "summary", self._limit(), "The updated summary of the user's device logs")
        result = ask(self.ctx, prompt, schema, language=language_name(self.ctx.language),
                     previous=prev.text if prev else NO_SUMMARY, date=f"{session.dialogue_timestamp:%Y-%m-%d}",
                     logs=render_logs(session), summary_chars=self._limit())
        if not result.ok:
            changes.notes.append(failure_note("log summary update", session, result, "log summary"))
            return changes
        text = result.value.summary.strip()
        if text:
            refs = [log_ref(session, j) for j in range(len(session.logs))]
            changes.upserts.append(self._item(self.log_summary_id, "log_summary", text, session, refs))
        return changes

    def ingest_dialogue(self, session: Session, memory: MemoryView) -> Changes:
        changes = Changes()
        requests = forget_requests(session)
        turns = dialogue_turns(session)
        prev = memory.items.get(self.summary_id)
        if turns:
            prompt = load_prompt("memory/recursum_dialogue_summary")
            schema = text_schema("DialogueSummary", "summary", self._limit(),
                                 "The updated summary of the user's dialogues with the assistant")
            result = ask(self.ctx, prompt, schema, language=language_name(self.ctx.language),
                         previous=prev.text if prev else NO_SUMMARY, date=f"{session.dialogue_timestamp:%Y-%m-%d}",
                         dialogue="\n".join(text for _, text in turns), forget=forget_instruction(requests),
                         summary_chars=self._limit())
            if result.ok:
                text = result.value.summary.strip()
                if text:
                    refs = [turn_ref(session, t) for t, _ in turns]
                    changes.upserts.append(self._item(self.summary_id, "summary", text, session, refs))
            else:
                changes.notes.append(failure_note("dialogue summary update", session, result, "summary"))
        if requests:
            current = view_with(memory, changes)
            scrub_items([i for i in (current.items.get(self.summary_id), current.items.get(self.log_summary_id)) if i],
                        requests, memory, changes)
        self.honour_forget_requests(session, view_with(memory, changes), changes)
        return changes

    def _item(self, item_id: str, layer: str, text: str, session: Session, refs: list[str]) -> MemoryItem:
        return MemoryItem(id=item_id, layer=layer, text=text, session_id=session.sample_id,
                          session_index=session.index, provenance=[*refs, f"item:{item_id}"])

    def retrieve(self, query: str, purpose: Purpose, memory: MemoryView, current: Session | None) -> RetrievalTrace:
        summary = memory.items.get(self.summary_id)
        logs = memory.items.get(self.log_summary_id)
        blocks = [
            PromptBlock(title="Summary of earlier dialogues", text=summary.text if summary else ""),
            PromptBlock(title="Summary of the user's logs", text=logs.text if logs else ""),
            self.current_logs_block(current),
        ]
        return self.trace(query, purpose, current, [RetrievedItem(item=i) for i in (summary, logs) if i], blocks)
