"""Role ``assistant`` of a simulated dialogue: the memory-equipped assistant. It shares the turn loop with the
User-LLM simulator (:mod:`sim.simulator`: ``retrying``, ``streamed``, ``clean``, ``usable``, the turn budgets)."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Any

from backends.llm.client import LLMClient
from backends.prompts import prompt_language
from memory.base import assistant_client
from memory.build import MemoryBuilder
from memory.fit import without_shown
from memory.sentences import sentences
from memory.types import RetrievalTrace
from palset.vocab import Act
from sim.acts import PURPOSE, act_name, definition
from sim.fit import FittedMessages, fit_messages
from sim.persona_check import NARRATION_EN, NARRATION_ZH, PROMPT_TALK, echoes, flat_text, repeats_earlier
from sim.prompting import (
    assistant_messages,
    assistant_note,
    kept_note,
    load_role_prompt,
    render_messages,
    summary_note,
)
from sim.simulator import (
    ASSISTANT_TURN_TOKENS,
    MAX_TRIES,
    PARAGRAPH,
    TopicContext,
    clean,
    retrying,
    streamed,
    turn_tokens,
    usable,
)
from sim.types import Utterance

log = logging.getLogger(__name__)
QUERY_TOKENS = 48  # the demo runs' queries are 3–20 words (a Chinese one 10–25 characters); one line, then it stops
_QUERY_JSON = re.compile(r'^\{\s*"query"\s*:\s*"(.*?)"\s*\}?$', re.S)
# "Query:", "Search:", "search for …" — labels the 1.5B put before its query in the demo recording
_QUERY_LABEL = re.compile(r"^\s*(?:(?:search query|search|query|查询语句|查询|检索|搜索)\s*[:：]|search for\b)\s*", re.I)


NOTE_LABELS = ("Act:", "[Note", "动作：", "动作:", "【给助手")  # how the note's lines begin, in both wordings


def query_text(text: str) -> str:
    """The retrieval query in a query-summary answer: its first line without a "Query:" label, wrapping quotes or
    the JSON object a model used to structured output may still write (``{"query": "…"}``); "" when none."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if found := _QUERY_JSON.match(line):
        line = found.group(1)
    line = clean(_QUERY_LABEL.sub("", line)).strip("「」'").strip()  # clean: role prefixes and wrapping quotes
    return line if usable(line) else ""


# an assistant that, asked to propose, asks the user for the proposal: "好的，请提供你的方案。", "Sure! How can we start
# with the proposed solution?" — 21 of the 108 Solution Proposal replies the 1.5B recorded for the demo workspace (19
# of them Chinese: it reads 提出一个具体的方案 as something to ask for), none of the demo data's 862 assistant turns
ASKS_FOR_PROPOSAL = re.compile("|".join([
    r"^\W*(?:好的|好|嗯|明白了?|了解了?|当然)?[，,！!。\s]*请(?:你|您)?(?:先)?(?:根据[^，。]*[，,]?\s*)?"
    r"(?:提供|告诉我|分享|说说|说一下|给出|提出|描述|继续提出)",
    r"我建议(?:你|您)(?:先)?(?:提供|给出|提出|说说|告诉我)(?:一个|一下)?(?:你的|具体的?)*(?:方案|想法|建议|计划)",
    r"\b(?:please )?(?:share|tell me|provide|give me|describe) (?:me )?(?:with )?(?:more about )?your (?:own )?"
    r"(?:proposal|plan|ideas?|thoughts|suggestions?|solution)\b",
    r"\bwhat (?:do|would) you (?:suggest|propose)\b",
    r"^\W*(?:sure|okay|ok|great)?[,!.\s]*how (?:can|should|do) we start\b",
]), re.I)


_COLONS = (":", "：")


def asks_for_proposal(text: str, act: Act) -> bool:
    """Whether a reply in ``act`` that should propose a solution asks the user for one instead (asked again)."""
    return act == Act.SOLUTION_PROPOSAL and bool(ASKS_FOR_PROPOSAL.search(text))


def announces_more(text: str) -> bool:
    """Whether a reply ends by announcing what follows ("Here's how you could do it:", "具体如下："): what came after was
    cut where its first paragraph ends (decoding stops there). 36 of the 340 replies the 1.5B recorded for the demo
    workspace, 26 of them Solution Proposals — the tour's own dialogue among them — kept only the announcement."""
    return text.rstrip().endswith(_COLONS)


def without_announcement(text: str) -> str:
    """``text`` without its last sentence when that only announces what was cut (:func:`announces_more`) and something
    is left before it ("I suggest a structured approach." of "… Here's how you could do it:"); else ``text``."""
    if not announces_more(text):
        return text
    lines = text.rstrip().splitlines()
    kept = "".join(sentences(lines[-1])[:-1]).strip()
    rest = "\n".join([*lines[:-1], kept] if kept else lines[:-1]).strip()
    return rest if usable(rest) else text


UNTOLD_GUESS = re.compile(r"^\W*is it that you (?:have not|haven't|did not|didn't) (?:yet )?(?:told|tell) me\b", re.I)


def talks_about_the_user(text: str) -> bool:
    """Whether a reply talks *about* the user instead of to them ("Based on the information provided, the user seems
    to…", "用户需要…") or uses the prompt's own terms ("You've mentioned a couple of hidden needs", "here's a concrete
    solution proposal"): the instruction showing through. 48 of the 340 replies the 1.5B recorded for the demo
    workspace (27 of 54 runs); none of the demo data's 862 assistant turns. A guess whose need is the definition's own
    words is one too: "Is it that you have not told me about your mother's rule…?" (4 of the 36 English guesses the
    1.5B recorded under the act's "a need … that they have not told you")."""
    return bool(NARRATION_EN.search(text) or NARRATION_ZH.search(text) or PROMPT_TALK.search(text)
                or UNTOLD_GUESS.search(text))


# the assistant thanking the user for help or a suggestion — the user's line: "Thank you for your help! I'm considering
# adding a dedicated team meeting…" (the 1.5B as user 1002's assistant), "…谢谢你的帮助！" — 2 of the 340 replies the
# 1.5B recorded for the demo workspace, none of the demo data's 862 assistant turns
# … or accepting its suggestion ("明白了，谢谢您的耐心和指导！我已接受您的建议。", "I accept your suggestion": the 1.5B as
# user 1006's and 1007's assistant, 2 more recorded replies)
THANKS_FOR_HELP = re.compile(
    r"\bthanks? (?:you )?(?:so much |very much )?for (?:your|the) (?:help|assistance|advice|support|suggestions?|"
    r"solutions?|ideas?|proposals?)\b|(?:感谢|谢谢)(?:你|您)(?:的)?(?:耐心和)?(?:帮助|帮忙|建议|方案|指导|提醒)|"
    r"\bI(?: will|'ll)? accept your (?:suggestion|proposal|advice)\b|"
    r"我(?:已|已经|会|愿意|就)?(?:接受|采纳)(?:了|并执行)?(?:您|你)的(?:建议|方案|安排)", re.I)


def thanks_like_the_user(text: str) -> bool:
    """Whether a reply thanks the user for help or a suggestion, or accepts the user's suggestion, as only the user
    would (the roles swapped)."""
    return bool(THANKS_FOR_HELP.search(text))


def why_asked_again(words: str, act: Act, earlier: list[str], said: str = "") -> str:
    """Why a reply is asked again although it is the assistant's own words ("" when it is not): it says one of the
    assistant's ``earlier`` replies again (word for word or nearly), mostly copies what the user just ``said``, talks
    about the user or in the prompt's terms, asks the user for the proposal it should make, or announces what was
    cut, or thanks the user for help as only the user would."""
    if repeats_earlier(words, earlier):
        return "says an earlier reply again"
    if repeats_earlier(words, [said]):  # 15 of the 340 recorded replies of the 1.5B; none of the demo data's 862
        return "mostly copies the user's last message"
    if talks_about_the_user(words):
        return "talks about the user or the prompt's terms"
    if thanks_like_the_user(words):
        return "thanks the user for help, as the user would"
    if asks_for_proposal(words, act):
        return "asks the user for the proposal it should make"
    if announces_more(words):
        return "announces what its first paragraph does not hold"
    return ""


def _label_only(line: str, instruction: str) -> bool:
    """Whether ``line`` is only a label taken from the instruction — the act's name and a colon ("方案讨论：", the
    1.5B's whole reply to user 1006 once): its words, before the colon, are in the instruction."""
    if not announces_more(line):  # a label ends with its colon
        return False
    flat = flat_text(line)
    return bool(flat) and flat in flat_text(instruction)


def without_copied_note(text: str, note: str, instruction: str = "") -> str | None:
    """The assistant's reply without the lines it copied from its own note (a small model starts with "What you know
    about the user: …" or "Act: …") or that are mostly its ``instruction`` reworded (the act's name and definition:
    the 1.5B answered user 1006 "提出方案（如果之前讨论过别的方案，就提一个新的）：提供一个具体的方案…" while
    recording the demo workspace); None when nothing of its own is left. Not the note's memory: a reply may rightly
    say again what the memory says of the user."""
    lines = text.splitlines()

    def copied(line: str) -> bool:
        line = line.strip()
        return (not line or (len(line) >= 12 and line in note) or line.startswith(NOTE_LABELS)
                or bool(instruction) and (echoes(line, instruction) or _label_only(line, instruction)))

    while lines and copied(lines[0]):
        lines = lines[1:]
    rest = "\n".join(lines).strip()
    return rest if usable(rest) else None


class Assistant:
    """Role ``assistant``: summarise the need into a retrieval query, retrieve from memory, answer in the act.

    A method whose memory does not depend on the dialogue (``uses_query`` false) has it in the system message,
    so it is read once per run; a retrieved memory goes into the turn's note, after the user's words."""

    def __init__(self, llm: LLMClient, ctx: TopicContext, builder: MemoryBuilder | None, method_label: str):
        self.ctx, self.builder, self.method_label = ctx, builder, method_label
        # a method with its own model (PLUM) answers the assistant role itself
        self.llm = assistant_client(llm, builder.impl if builder else None, ctx.session)
        self.max_tokens = turn_tokens(self.llm, "assistant", ASSISTANT_TURN_TOKENS)  # a turn's answer budget
        self.prompt = load_role_prompt("sim/assistant", ctx.user.language)
        self.summary_prompt = load_role_prompt("sim/query_summary", ctx.user.language)

    @property
    def static_memory(self) -> bool:
        """Whether the memory is the same whatever the dialogue says (it then sits in the system message)."""
        return self.builder is None or not getattr(self.builder.impl, "uses_query", True)

    def _query(self, history: list[Utterance], salt: str, on_query: Callable[[str], None] | None) -> str:
        """The turn's retrieval query: one streamed line, or the user's last words when the model gives nothing
        usable. ``on_query`` gets the query *so far* each time it grows (so a page shows the memory search at once)
        and, last, the query retrieval uses: what a page shows last is what was searched with, by construction."""
        if self.static_memory:
            return ""
        note = summary_note(self.summary_prompt, self.ctx)
        fitted = fit_messages(self.llm.budget("assistant", max_tokens=QUERY_TOKENS),
                              lambda _m, kept, dropped: assistant_messages(self.prompt, self.ctx, kept, note,
                                                                           dropped=dropped), history)
        so_far: list[str] = []

        def grown(delta: str) -> None:
            so_far.append(delta)
            if on_query is not None:
                on_query("".join(so_far))

        text, _ = streamed(self.llm, "assistant", fitted.messages, self.summary_prompt, f"{salt}/query", fitted.cuts,
                            grown, max_tokens=QUERY_TOKENS, stop=["\n"])
        query = query_text(text or "")
        if not query:
            log.info("assistant's query summary gave nothing usable (%r): the user's last words are the query", text)
            query = next((u.content for u in reversed(history) if u.side == "user"), "")
        if on_query is not None:
            on_query(query)
        return query

    def fitted(self, act: Act, history: list[Utterance], trace: RetrievalTrace | None) -> tuple[FittedMessages, str]:
        """(the messages fitted into the window, what later turns keep of the note they end with: "" for a memory
        in the system message). A retrieval method's note holds only what the notes kept in the transcript do not
        already show (:func:`memory.fit.without_shown`); when fitting leaves old utterances out, their notes go
        with them, so what only they showed is shown again."""
        static = self.static_memory
        notes: list[str] = []  # what each build keeps of its note for later turns: the last one is the turn's

        def build(memory: str, kept: list[Utterance], dropped: int) -> list[dict[str, str]]:
            notes.append("" if static else kept_note(self.prompt, memory))
            return assistant_messages(self.prompt, self.ctx, kept,
                                      assistant_note(self.prompt, self.ctx, act, None if static else memory),
                                      static_memory=memory if static else None, dropped=dropped)

        budget = self.llm.budget("assistant", max_tokens=self.max_tokens)
        if static or trace is None:
            return fit_messages(budget, build, history, trace, memory_of=self._memory_text), notes[-1]
        dropped = -1
        fitted = FittedMessages([])
        while fitted.dropped > dropped:  # at most once per utterance left out; usually once
            dropped = fitted.dropped
            shown = "\n".join(u.note for u in history[dropped:] if u.note)
            new, repeated = without_shown(trace, shown)
            fitted = fit_messages(budget, build, history, new, memory_of=self._memory_text)
            fitted.repeated = repeated
        return fitted, notes[-1]

    def say(self, turn_no: int, act: Act, history: list[Utterance], salt: str,
            on_token: Callable[[str], None] | None = None,
            on_query: Callable[[str], None] | None = None) -> Utterance:
        """The assistant's utterance in ``act``: ``on_query`` gets the retrieval query as it streams (retrieval
        methods), then ``on_token`` the reply."""
        started = time.perf_counter()
        query = self._query(history, salt, on_query)
        trace = None
        if self.builder is not None:
            trace = self.builder.retrieve(query or self.ctx.topic.topic.user_query, PURPOSE[act], self.ctx.session)
        fitted, note = self.fitted(act, history, trace)
        msgs = fitted.messages
        reasoning = ""
        lang = prompt_language(self.prompt)
        instruction = f"{act_name(act, lang)} {definition('assistant', act, lang)}"
        earlier = [u.content for u in history if u.side == "assistant"]
        said = next((u.content for u in reversed(history) if u.side == "user"), "")

        def attempt(n: int) -> str | None:
            nonlocal reasoning
            text, reasoning = streamed(self.llm, "assistant", msgs, self.prompt, f"{salt}/{n}", fitted.all_cuts,
                                        on_token if n == 1 else None,
                                        max_tokens=self.max_tokens, stop=[PARAGRAPH])
            if text is None:
                return None
            words = without_copied_note(clean(text), msgs[-1]["content"], instruction)  # the user's words and the note
            if words is None and n < MAX_TRIES:
                log.info("assistant turn %s copied its note, asked again: %.80s", turn_no, text)
                return None
            if words is not None and n < MAX_TRIES and (why := why_asked_again(words, act, earlier, said)):
                log.info("assistant turn %s %s, asked again: %.80s", turn_no, why, words)
                return None
            return without_announcement(words or clean(text))

        content, tries = retrying(f"assistant, turn {turn_no} ({act.value})", attempt)
        return Utterance(turn_no=turn_no, side="assistant", actor="assistant", act=act, content=content,
                         prompt_name=self.prompt.name, prompt_version=self.prompt.version, prompt=render_messages(msgs),
                         retrieval_query=query or None, note=note or None,
                         trace=_trace_record(fitted),
                         cuts=fitted.cuts, reasoning=reasoning, attempts=tries,
                         model=self.llm.config.role("assistant").model,
                         latency_ms=(time.perf_counter() - started) * 1000, created_at=time.time())

    def _memory_text(self, trace: RetrievalTrace | None) -> str:
        if self.builder is None:
            return "(nothing: this assistant has no memory of the user)"
        if trace is not None and not trace.context and trace.items:  # every item is in an earlier turn's note
            return self.prompt.part("nothing_new").strip()
        return (trace.context if trace else "") or "(nothing relevant)"


def _trace_record(fitted: FittedMessages) -> dict[str, Any] | None:
    """What the utterance keeps of its retrieval: the trace's summary, and which of its parts were not sent again
    because an earlier turn's note, still in the transcript, shows them."""
    if fitted.trace is None:
        return None
    summary = fitted.trace.summary()
    if fitted.repeated:
        summary["repeated"] = list(fitted.repeated)
    return summary
