"""What ``pal llm check`` and Settings' "Test connection" try on an endpoint beyond one chat and one structured
call: each structured mode on its own, streaming, and whether ``seed`` makes sampling repeat.

Every probe is a real request with the cache off; a probe that fails is reported, never raised, so one
missing capability does not hide the others.
"""

from __future__ import annotations

import logging
import time
from typing import Literal

from pydantic import BaseModel

from backends.llm.client import LLMClient
from backends.llm.errors import LLMError
from backends.llm.negotiate import MODES
from backends.llm.types import ChatResult
from backends.prompts import Prompt

log = logging.getLogger(__name__)
SeedVerdict = Literal["honoured", "ignored", "unclear"]
SEED_PROMPT = [{"role": "user", "content": "Invent a name for a new colour and describe it in one sentence."}]


def probe_modes(client: LLMClient, role: str, messages: list[dict[str, str]], model: type[BaseModel],
                prompt: Prompt | None) -> dict[str, str]:
    """mode → ``ok``, ``refused: …`` (the endpoint said no) or ``did not parse: …`` (it answered, badly)."""
    out: dict[str, str] = {}
    for mode in MODES:
        try:
            res = client.structured(role, messages, model, prompt=prompt, use_cache=False, retries=0, mode=mode,
                                    max_tokens=96)
        except LLMError as e:
            log.info("%s: structured mode %s failed", role, mode, exc_info=True)
            out[mode] = f"refused: {client.redact(str(e)).removeprefix(client.provider(role).endpoint + ': ')[:160]}"
            continue
        out[mode] = "ok" if res.ok else f"did not parse: {res.errors[-1][:120]}"
    return out


def probe_stream(client: LLMClient, role: str, messages: list[dict[str, str]]) -> tuple[bool, float | None, str]:
    """(streams, ms to the first answer delta, note)."""
    started = time.perf_counter()
    first: float | None = None
    deltas = 0
    try:
        for chunk in client.stream(role, messages, use_cache=False, max_tokens=32):
            if isinstance(chunk, str):
                deltas += 1
                first = first if first is not None else (time.perf_counter() - started) * 1000
            elif isinstance(chunk, ChatResult) and not chunk.text:
                return False, first, "the stream ended without an answer"
    except LLMError as e:
        log.info("%s: streaming failed", role, exc_info=True)
        return False, None, client.redact(str(e))[:160]
    return deltas > 0, first, f"{deltas} deltas"


def probe_seed(client: LLMClient, role: str) -> tuple[SeedVerdict | None, str]:
    """Two answers with one seed and one with another, at temperature 1: the same seed should repeat itself."""
    try:
        a, b, c = (client.chat(role, SEED_PROMPT, use_cache=False, temperature=1.0, max_tokens=24, seed=seed).text
                   for seed in (11, 11, 12))
    except LLMError as e:
        log.info("%s: seed probe failed", role, exc_info=True)
        return None, client.redact(str(e))[:160]
    if a != b:
        return "ignored", "the same seed gave different answers"
    if a == c:
        return "unclear", "every answer was the same (the model may sample greedily)"
    return "honoured", "the same seed repeated its answer, another seed did not"
