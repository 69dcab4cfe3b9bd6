"""The messages of the two dialogue roles, assembled so a server's prompt cache serves them.

Both roles put what stays the same first (system message, persona or role, a memory that does not change) and
the turn's own part last; the dialogue so far sits in between and only grows at its end. Turn n+1's messages
start with exactly the tokens of turn n's up to the words said last, so llama.cpp's ``cache_prompt`` (or vLLM's
prefix caching) only processes what is new.

* **User-LLM** (:func:`simulator_messages`): the model writes the user's next message in the user's voice
  ("ghostwriter" framing: an instruct model stays in the user's voice far better than when told it *is* the user).
  System message: the persona, an optional fragment (e.g. the ``user_style`` conditioning) and, last, what this
  phase of the dialogue lets the user know (Mem-PAL §4.3: query, hidden needs and requirement while the need is
  guessed; requirement, preferences and liked/disliked solutions while solutions are discussed), so a phase change
  re-reads only that part and what follows. No worked example (the 0.5B model copied one word for word, whether
  sent as an exchange or described). Then one user message: the chat so far as "<name>: …" / "Assistant: …" lines, growing at its end, and the cue
  last: the assistant's last words quoted and the act with its definition. (The transcript as alternating chat
  messages with the model in the user's seat was tried first: Qwen2.5-Coder-0.5B echoed the assistant's last
  message back as "its" turn; see FIDELITY.md.)
* **Assistant** (:func:`assistant_messages`): system message with the role and — for a method whose memory does
  not depend on the dialogue (``uses_query`` false: vanilla, vanilla-log, full history, PLUM) — the memory; then
  the transcript; the last user message carries the user's words, then a note with the retrieved memory (for
  query-dependent methods, which change it every turn) and the act. A retrieval method's notes stay in the
  transcript, each after the words it answered, and a note holds only what earlier notes did not show: the
  server reads each turn's new memory once, not all of it again (the retrieved memory of a turn was ≈1,700 new
  tokens, its first token 29 s on the 0.5B). The query-summary call before it shares the system message and
  transcript (:func:`assistant_messages` with the summary prompt's ``turn``).

Chinese users get the prompts' Chinese wording (``<name>.zh.md``; see FIDELITY.md for the measurement).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from backends.prompts import LANGUAGE_LABELS, Prompt, language_label, load_prompt, prompt_language
from memory.privacy import redact_text
from palset.dataset import SessionTopic
from palset.vocab import Act
from sim.acts import REQUIREMENT_PHASE, act_name, definition
from sim.persona_check import HiddenNeed
from sim.types import Utterance

LANGUAGE = LANGUAGE_LABELS["en"]


def language_name(prompt: Prompt, user_language: str) -> str:
    """The user's language as the prompt names it (in Chinese inside a Chinese-worded prompt)."""
    return language_label(prompt, user_language if user_language in LANGUAGE else "en")


def load_role_prompt(name: str, user_language: str) -> Prompt:
    """The role's prompt for a user of ``user_language`` (its Chinese wording for Chinese users)."""
    return load_prompt(name, language=user_language)


def render_messages(messages: Sequence[dict[str, str]]) -> str:
    """The messages as one text, for the utterance's stored prompt (one message: its text as it is)."""
    if len(messages) == 1:
        return messages[0]["content"]
    return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages)


def _cut_note(dropped: int, zh: bool) -> str:
    return (f"（为适应上下文窗口，省略了前面 {dropped} 条消息）" if zh
            else f"(… {dropped} earlier message(s) left out to fit the context window)")


# ---------------------------------------------------------------- the User-LLM


def simulator_system(prompt: Prompt, ctx: Any, act: Act, fragment: str | None = None) -> str:
    """The User-LLM's system message for a turn in ``act``: persona, ``fragment``, then the phase knowledge."""
    lang = prompt_language(prompt)
    return prompt.part("system", name=ctx.name(), persona=ctx.persona(zh=lang == "zh"), personality=ctx.personality(),
                       situation=ctx.situation(), language=language_name(prompt, ctx.user.language),
                       fragment=f"\n{fragment}\n" if fragment else "", knowledge=phase_knowledge(prompt, ctx, act))


def phase_knowledge(prompt: Prompt, ctx: Any, act: Act) -> str:
    """What the user knows in ``act``'s phase (never both phases at once: Mem-PAL §4.3)."""
    t = ctx.topic.topic
    none = "（无）" if prompt_language(prompt) == "zh" else "(none)"
    if act in REQUIREMENT_PHASE:
        needs = "\n".join(f"  {i + 1}. {need}" + (f" ({'; '.join(ev)})" if ev else "")
                          for i, (need, ev) in enumerate(ctx.needs_with_evidence())) or f"  {none}"
        return redact_text(prompt.part("requirement_knowledge", name=ctx.name(), query=ctx.free_query or t.user_query,
                                       needs=needs, requirement=t.requirement))
    pref = ctx.preference()
    liked, disliked = ctx.topic.liked_and_disliked()
    return redact_text(prompt.part(
        "solution_knowledge", name=ctx.name(), requirement=t.requirement, accepts=pref.preference.pos if pref else none,
        rejects=pref.preference.neg if pref else none,
        liked="; ".join(f"{s} ({r})" if r else s for s, r in liked) or none,
        disliked="; ".join(f"{s} ({r})" if r else s for s, r in disliked) or none))


def transcript_lines(prompt: Prompt, name: str, history: Sequence[Utterance], dropped: int = 0) -> str:
    """The chat so far as the User-LLM reads it: "<name>: …" / "Assistant: …" lines (in the prompt's language)."""
    you, other = prompt.part("you", name=name), prompt.part("other")
    lines = [_cut_note(dropped, prompt_language(prompt) == "zh")] if dropped else []
    lines += [f"{you if u.side == 'user' else other} {redact_text(u.content)}" for u in history]
    return "\n".join(lines)


def last_assistant_words(history: Sequence[Utterance]) -> str:
    """What the assistant said last ("" before it has spoken): the line a user turn answers."""
    return next((u.content for u in reversed(history) if u.side == "assistant"), "")


def simulator_messages(prompt: Prompt, ctx: Any, act: Act, history: Sequence[Utterance], *,
                       free_mode: bool = False, fragment: str | None = None, dropped: int = 0) -> list[dict[str, str]]:
    """The User-LLM's messages for its turn in ``act`` after ``history`` (the kept utterances; ``dropped`` older
    ones were left out to fit the window). The one place the simulator's prompt is assembled: ``fragment`` (e.g.
    ``prompts/sim/user_style.md`` filled) goes into the system message before the phase knowledge.

    Messages: system, then one user message: the chat so far,
    then the turn's cue (the assistant's last words quoted, the act). The next turn's message starts with the same
    text up to the end of this turn's transcript (only the short cue differs), so a prompt cache keeps it."""
    lang = prompt_language(prompt)
    values = {"act": act_name(act, lang), "definition": definition("user", act, lang), "name": ctx.name(),
              "language": language_name(prompt, ctx.user.language)}
    if history or dropped:
        text = prompt.part("chat", transcript=transcript_lines(prompt, ctx.name(), history, dropped),
                           reply=redact_text(last_assistant_words(history)), **values)
    else:
        text = prompt.part("opening", query=redact_text(ctx.free_query or ctx.topic.topic.user_query), **values)
    if free_mode and prompt.has_part("free_ending"):
        text = f"{text}\n{prompt.part('free_ending', name=ctx.name())}"
    return [{"role": "system", "content": simulator_system(prompt, ctx, act, fragment)},
            {"role": "user", "content": text}]


def with_retry_notes(prompt: Prompt, ctx: Any, messages: list[dict[str, str]],
                     rejected: Sequence[tuple[str, Sequence[str]]]) -> list[dict[str, str]]:
    """``messages`` with a note per rejected draft (why it was not usable) at the end of the last message: the next
    try is told what was wrong; everything before stays as it was (the prompt cache keeps it). The draft itself is
    not quoted: the 0.5B model copied a quoted draft, note and all, back as its next try."""
    if not rejected:
        return messages
    notes = [prompt.part("retry", reasons="; ".join(reasons), name=ctx.name(),
                         language=language_name(prompt, ctx.user.language)) for _draft, reasons in rejected]
    return [*messages[:-1], {"role": messages[-1]["role"], "content": "\n".join([messages[-1]["content"], *notes])}]


ABOUT_THE_ASSISTANT = ("助手", "The assistant")  # how a line about the assistant begins (the cue's own words among them)


def cut_at_speaker(text: str, name: str) -> str:
    """``text`` up to a line where the model went on to write the next speaker's line ("Assistant: …", "助手：",
    "<name>: …"), to tell what the assistant said ("The assistant replied: …", the 1.5B in five recorded demo turns;
    the prompt's own cue "The assistant just wrote" / "助手刚才说" among them) or to write the prompt's cue; a first
    line about the assistant (a copy of the cue's quote) is dropped when the user's words follow it."""
    labels = ("Assistant:", "Assistant：", *ABOUT_THE_ASSISTANT, f"{name}:", f"{name}：", "Write ", "写出")
    lines = text.splitlines()
    while len(lines) > 1 and lines[0].strip().startswith(ABOUT_THE_ASSISTANT):  # the model first copied the cue's quote
        lines = lines[1:]
    for i, line in enumerate(lines[1:], start=1):
        if line.strip().startswith(labels):
            return "\n".join(lines[:i]).strip()
    return "\n".join(lines).strip()


def hidden_need(topic: SessionTopic, free_query: str | None = None) -> HiddenNeed:
    """What no user turn may copy: the topic's requirement and implicit needs — what the assistant is to find out —
    and the solutions the user likes and dislikes (what it is to propose), unless the turn copies the user query
    (``free_query`` when one was typed) as much. Why: the 1.5B as user 1006 opened a recorded run with the
    requirement word for word ("我需要在强制分布的要求下给刘梅一个有数据支撑的评级…"), and as user 1007 denied a guess
    with it ("不对，我需要拿下茶屿这份能补上固定收入缺口的一年包月合作…"), leaving the assistant nothing to infer; as
    user 1006 it wrote a liked solution out in full before the assistant proposed anything like it ("…三亚行8天，1月21日
    出发，出发前三天报备航班和酒店…"). None of the demo data's 862 user turns, nor its 153 user queries, copies its
    session's requirements, needs or solutions. (The reasons the dataset gives for liking or disliking a solution
    are not here: 71 of the data's user turns say them — they are the user's own words.) An opening that still
    does on its last try falls back to the user query; a judging turn is composed from the model's decision
    (:mod:`sim.decision`)."""
    liked, disliked = topic.liked_and_disliked()
    needs = (topic.topic.requirement, *topic.topic.implicit_needs, *(s for s, _reason in (*liked, *disliked)))
    return HiddenNeed(tuple(redact_text(t) for t in needs if t), redact_text(free_query or topic.topic.user_query))


def echo_sources(messages: Sequence[dict[str, str]], history: Sequence[Utterance]) -> list[str]:
    """What a user turn must not copy: whatever the assistant said and the turn's message (the chat so far without
    the user's own words, and the cue; not for the opening, whose cue names the user's own question)."""
    said = [u.content for u in history if u.side == "assistant"]
    turn = messages[-1]["content"] if messages and history else ""  # the opening asks for the user's own question
    for u in history:  # the user may say again what the user said before ("No, that's not it."): not a copy
        if u.side == "user":
            turn = turn.replace(redact_text(u.content), "")
    return [t for t in (*said, turn) if t]


# ---------------------------------------------------------------- the assistant


def assistant_messages(prompt: Prompt, ctx: Any, history: Sequence[Utterance], tail: str, *,
                       static_memory: str | None = None, dropped: int = 0) -> list[dict[str, str]]:
    """The assistant's messages: system (role, and ``static_memory`` when the method's memory does not depend on
    the dialogue), the transcript (the user's words as user messages, each followed by the note its assistant turn
    was sent with, when one was kept: :attr:`Utterance.note`; the assistant's words as its own), and the last user
    message: the user's latest words, then ``tail`` (a note with the act, or the query-summary request)."""
    zh = prompt_language(prompt) == "zh"
    language = language_name(prompt, ctx.user.language)
    memory = prompt.part("static_memory", memory=static_memory) if static_memory is not None else ""
    msgs = [{"role": "system", "content": prompt.part("system", language=language, static_memory=memory).rstrip()}]
    pending: list[str] = [_cut_note(dropped, zh)] if dropped else []
    for u in history:
        if u.side == "user":
            pending.append(redact_text(u.content))
            continue
        if pending or u.note:
            msgs.append({"role": "user", "content": _with_note("\n".join(pending), u.note)})
            pending = []
        msgs.append({"role": "assistant", "content": redact_text(u.content)})
    msgs.append({"role": "user", "content": _with_note("\n".join(pending), tail)})
    return msgs


def _with_note(words: str, note: str | None) -> str:
    """The user's words, then the note for the assistant: the last message of a turn as it was sent, and so as
    later turns send it again (the same text, so a prompt cache serves it)."""
    return f"{words}\n\n{note}" if words and note else (words or note or "")


def assistant_note(prompt: Prompt, ctx: Any, act: Act, memory: str | None) -> str:
    """The note after the user's words: the retrieved ``memory`` (None: it is in the system message) and the act.
    It begins with :func:`kept_note` of the same memory, which is what later turns keep of it."""
    lang = prompt_language(prompt)
    reply = prompt.part("reply", act=act_name(act, lang), definition=definition("assistant", act, lang),
                        language=language_name(prompt, ctx.user.language))
    return _note(prompt, memory, reply.strip())


def kept_note(prompt: Prompt, memory: str) -> str:
    """A retrieval method's note as the transcript of later turns keeps it: its memory, without the line asking for
    that turn's act (an act gone by would only mislead). The start of the note the turn was sent, so a prompt
    cache keeps serving the transcript up to the end of that memory."""
    return _note(prompt, memory, "")


def _note(prompt: Prompt, memory: str | None, reply: str) -> str:
    memory_text = prompt.part("turn_memory", memory=memory) if memory is not None else ""
    return prompt.part("turn", memory=memory_text, reply=reply).strip()


def summary_note(prompt: Prompt, ctx: Any) -> str:
    """The query-summary request after the user's words (``prompts/sim/query_summary.md``)."""
    return prompt.part("turn", language=language_name(prompt, ctx.user.language)).strip()
