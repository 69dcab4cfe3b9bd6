"""A reasoning model's thinking, kept apart from its answer; and the vendors' switches that turn it off.

Reasoning models (DeepSeek-R1, Qwen3, QwQ, GLM-4.5…) served by vLLM, SGLang, llama.cpp or hosted APIs
return their thinking in one of three ways:

* a separate ``reasoning_content`` (or ``reasoning``) field of the message / stream delta — read by
  :mod:`backends.llm.openai_compat`;
* ``<think>…</think>`` (also ``<thinking>``, ``<reasoning>``) at the start of the content;
* only the closing ``</think>``: the chat template already wrote ``<think>`` into the prompt
  (DeepSeek-R1 and Qwen3 templates do), so the content *starts* inside the thinking.

:func:`split_reasoning` separates a whole text; :class:`ReasoningSplitter` does the same to a stream
of deltas, so a live view never shows the thinking. The answer alone is what callers parse as JSON,
show as an utterance and send back in later prompts; the thinking is recorded with the call.
A thinking block that never closes (the answer ran out of tokens while thinking) leaves an empty
answer, which callers treat like any unusable answer.

Thinking-off switches (role option ``thinking = "off"``; ``thinking_switch`` picks one, ``auto`` guesses
from the model name and endpoint) — what each sends in the request body:

=====================  ================================================  ===========================================
switch                 body                                              where it is documented to work
=====================  ================================================  ===========================================
chat_template_kwargs   ``chat_template_kwargs: {enable_thinking: false}``  Qwen3 / GLM-4.5 on vLLM, SGLang, llama.cpp
deepseek_template      ``chat_template_kwargs: {thinking: false}``         DeepSeek-V3.1+ on vLLM, SGLang
enable_thinking        ``enable_thinking: false``                          DashScope (Qwen hosted), SiliconFlow
reasoning_effort       ``reasoning_effort: "minimal"`` (o-series: "low")   OpenAI gpt-5 and o-series (cannot be off)
thinking_disabled      ``thinking: {type: "disabled"}``                    Zhipu GLM API, Volcengine Ark
none                   nothing                                           DeepSeek's own API: pick ``deepseek-chat``
=====================  ================================================  ===========================================
"""

from __future__ import annotations

import logging
import re
from typing import Any

from backends.config import mask_url

log = logging.getLogger(__name__)

_TAGS = ("think", "thinking", "reasoning")
_BLOCK = re.compile(r"<(think|thinking|reasoning)>(.*?)</\1>", re.S | re.I)
_OPEN_AT_START = re.compile(r"^\s*<(think|thinking|reasoning)>", re.I)
_CLOSE = re.compile(r"</(think|thinking|reasoning)>", re.I)
_LONGEST_TAG = max(len(f"</{t}>") for t in _TAGS)


def split_reasoning(text: str) -> tuple[str, str]:
    """``(answer, reasoning)`` of a whole reply; the answer is stripped, reasoning parts joined by a blank line."""
    if not text or "<" not in text:
        return text, ""
    thoughts: list[str] = []
    opened = _OPEN_AT_START.match(text)
    first_close = _CLOSE.search(text)
    if not opened and first_close and not _BLOCK.search(text[: first_close.end()]):
        # the template opened the block in the prompt: everything before the first closing tag is thinking
        thoughts.append(text[: first_close.start()].strip())
        text = text[first_close.end():]
    def keep(m: re.Match[str]) -> str:
        thoughts.append(m.group(2).strip())
        return ""

    answer = _BLOCK.sub(keep, text)
    unclosed = _OPEN_AT_START.match(answer)
    if unclosed:  # ran out of tokens while thinking: no answer at all
        thoughts.append(answer[unclosed.end():].strip())
        answer = ""
    return answer.strip(), "\n\n".join(t for t in thoughts if t)


class ReasoningSplitter:
    """Split streamed content deltas: :meth:`feed` returns only answer text, thinking accumulates.

    Tags may be cut anywhere between deltas; text that could still be the start of a tag is held back
    until the next delta decides. A stream that starts inside the thinking with no opening tag (the template
    opened it) can only be told apart once ``</think>`` arrives: with ``hold`` (models known to do this, see
    :func:`likely_headless`) nothing is emitted until then or the end; without it such thinking shows live
    and only the final result — always split with :func:`split_reasoning` on the whole content — is clean.
    """

    def __init__(self, hold: bool = False) -> None:
        self._buf = ""
        self._state = "start"  # start → (think → start)* → answer
        self._close = ""
        self._hold = hold
        self.reasoning: list[str] = []

    def _release_headless(self) -> bool:
        """With ``hold``: a closing tag ends the template-opened thinking; True when the stream may go on."""
        close = _CLOSE.search(self._buf)
        if close:
            self.reasoning.append(self._buf[: close.start()])
            self._buf, self._hold, self._state = self._buf[close.end():], False, "start"
            return True
        if _OPEN_AT_START.match(self._buf) or not self._buf.strip():
            self._hold = bool(not self._buf.strip())  # an opening tag: the ordinary case
            return not self._hold
        return False

    def feed(self, delta: str) -> str:
        self._buf += delta
        out: list[str] = []
        if self._hold and not self._release_headless():
            return ""
        while True:
            if self._state == "answer":
                out.append(self._buf)
                self._buf = ""
                break
            if self._state == "start":
                stripped = self._buf.lstrip()
                if not stripped:
                    break
                tag = next((t for t in _TAGS if stripped.lower().startswith(f"<{t}>")), None)
                if tag:
                    self._state, self._close = "think", f"</{tag}>"
                    self._buf = stripped[len(tag) + 2:]
                    continue
                if any(f"<{t}>".startswith(stripped.lower()) for t in _TAGS):
                    break  # maybe an opening tag still arriving
                self._state = "answer"
                self._buf = stripped
                continue
            # inside a thinking block
            end = self._buf.lower().find(self._close)
            if end < 0:
                keep = len(self._buf) - _LONGEST_TAG
                if keep > 0:
                    self.reasoning.append(self._buf[:keep])
                    self._buf = self._buf[keep:]
                break
            self.reasoning.append(self._buf[:end])
            self._buf = self._buf[end + len(self._close):]
            self._state = "start"
        return "".join(out)

    def finish(self) -> str:
        """Answer text still held back (the start of what looked like a tag but never became one)."""
        rest, self._buf = self._buf, ""
        if self._hold:
            return rest.strip()
        if self._state == "think":
            self.reasoning.append(rest)
            return ""
        return rest.lstrip() if self._state == "start" else rest

    @property
    def text(self) -> str:
        """The thinking seen so far."""
        return "".join(self.reasoning).strip()


def separate(result: Any, counter: Any = None, **fields: Any) -> Any:
    """A :class:`~backends.llm.types.ChatResult` whose ``text`` is the answer only; the thinking (content tags,
    the endpoint's reasoning field) in ``reasoning``, its tokens counted by the endpoint
    when it reports them, else by ``counter``; ``fields`` set on it too (one copy of the result, not two)."""
    answer, in_content = split_reasoning(result.text)
    parts = [p for p in (result.reasoning.strip(), in_content) if p]
    reasoning = "\n\n".join(dict.fromkeys(parts))
    update: dict[str, Any] = {**fields, "text": answer, "reasoning": reasoning}
    if reasoning and not result.reasoning_tokens and counter is not None:
        update.update(reasoning_tokens=counter.count(reasoning), reasoning_counted_by=counter.name)
    return result.model_copy(update=update)


def likely_headless(model: str) -> bool:
    """Models whose chat template opens ``<think>`` in the prompt, so their replies start inside the thinking."""
    return bool(re.search(r"deepseek-r1|r1-distill|qwq|reasoner|thinking", model, re.I))


# ---------------------------------------------------------------- thinking off

THINKING_OFF: dict[str, dict[str, Any]] = {
    "chat_template_kwargs": {"chat_template_kwargs": {"enable_thinking": False}},
    "deepseek_template": {"chat_template_kwargs": {"thinking": False}},
    "enable_thinking": {"enable_thinking": False},
    "reasoning_effort": {"reasoning_effort": "minimal"},
    "thinking_disabled": {"thinking": {"type": "disabled"}},
    "none": {},
}


def guess_switch(model: str, base_url: str | None) -> str:
    """The switch ``auto`` means for this model and endpoint (see the table in the module docstring)."""
    m, url = model.lower(), (base_url or "").lower()
    if "dashscope" in url or "siliconflow" in url:
        return "enable_thinking"
    if "bigmodel.cn" in url or "volces.com" in url:
        return "thinking_disabled"
    if re.match(r"^(gpt-5|o1|o3|o4)", m):
        return "reasoning_effort"
    if "deepseek" in m:
        return "none" if "api.deepseek.com" in url else "deepseek_template"
    if "qwen3" in m or "glm-4.5" in m or "glm-4.6" in m:
        return "chat_template_kwargs"
    return "none"


_NO_SWITCH_LOGGED: set[tuple[str, str | None]] = set()  # (model, base URL) already said to have no switch


def thinking_off_body(model: str, base_url: str | None, switch: str = "auto") -> tuple[dict[str, Any], str]:
    """(request body fields, switch name) that turn thinking off for this role."""
    name = guess_switch(model, base_url) if switch == "auto" else switch
    body = {k: (dict(v) if isinstance(v, dict) else v) for k, v in THINKING_OFF.get(name, {}).items()}
    if name == "reasoning_effort" and re.match(r"^o\d", model.lower()):
        body["reasoning_effort"] = "low"  # the o-series cannot go lower
    if name == "none" and (model, base_url) not in _NO_SWITCH_LOGGED:  # once, not on every request
        _NO_SWITCH_LOGGED.add((model, base_url))
        log.info("thinking off: no switch known for model %s at %s; its thinking is still kept apart", model,
                 mask_url(base_url))
    return body, name


def merge_body(extra: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """``extra`` with ``fields`` merged one level deep (``chat_template_kwargs`` may hold other keys)."""
    out = dict(extra)
    for k, v in fields.items():
        out[k] = {**out[k], **v} if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out
