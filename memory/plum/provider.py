"""Provider ``plum``: the assistant role answered by the base model plus one user's adapter, locally.

It speaks the same :class:`~backends.llm.registry.ChatProvider` protocol as the HTTP providers, so
the :class:`~backends.llm.client.LLMClient` still caches, retries and records every call. The
adapter is resolved at call time — the newest checkpoint before the session being answered — and its
version is part of ``endpoint``, so a retrained adapter never replays a stale cached answer.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from backends.llm.types import ChatRequest, ChatResult
from memory.plum.adapter import Checkpoint
from memory.plum.generate import Generated, stream_tokens
from memory.plum.model import attach, detach

if TYPE_CHECKING:
    from palset.dataset import Session

MAX_LOADED = 4  # adapters kept attached to the shared model


class AdapterSource(Protocol):
    """What the provider needs of a PLUM memory (:class:`memory.methods.plum.Plum` is one)."""

    def checkpoint(self, current: Session | None) -> Checkpoint | None:
        """The adapter that answers during ``current`` (trained on earlier sessions only), or None."""

    def base(self) -> Any:
        """The shared base model the adapters attach to."""


class PlumProvider:
    name = "plum"

    def __init__(self, source: AdapterSource, current: Session | None, *, dataset: str, user_id: str,
                 config: Mapping[str, Any]):
        self.source, self.current = source, current
        self.dataset, self.user_id = dataset, user_id
        self.base_model = str(config.get("base_model") or "bundled")
        self.max_new_tokens = int(config.get("max_new_tokens", 160))

    @property
    def model(self) -> str:
        return f"plum/{'SmolLM2-135M-Instruct' if self.base_model == 'bundled' else self.base_model}"

    @property
    def role_overrides(self) -> dict[str, str]:
        """Role settings for the client that uses this provider: records name this model; without a grammar
        the full JSON schema goes into the prompt."""
        return {"model": self.model, "structured_mode": "prompt"}

    def checkpoint(self) -> Checkpoint | None:
        return self.source.checkpoint(self.current)

    @property
    def endpoint(self) -> str:
        ckpt = self.checkpoint()
        slug = hashlib.sha1(self.dataset.encode()).hexdigest()[:10]
        at = f"{ckpt.record.sample_id}-{ckpt.record.version}" if ckpt else "base"
        return f"plum://{slug}/{self.user_id}@{at}"

    def _adapter(self, base) -> str | None:
        ckpt = self.checkpoint()
        if ckpt is None:
            return None
        with base.lock:
            if ckpt.adapter_name not in base.loaded:
                loaded = [n for n in base.loaded if n.startswith("plum_")]
                for stale in loaded[: max(0, len(loaded) - MAX_LOADED + 1)]:
                    detach(base, stale)
                attach(base, ckpt.adapter_name, folder=ckpt.folder)
        return ckpt.adapter_name

    def stream(self, req: ChatRequest) -> Iterator[str | ChatResult]:
        started = time.perf_counter()
        base = self.source.base()
        adapter = self._adapter(base)
        msgs = [{"role": m.role, "content": m.content} for m in req.messages]
        for chunk in stream_tokens(base, msgs, adapter, max_new_tokens=min(req.max_tokens, self.max_new_tokens),
                                   temperature=req.temperature, seed=req.seed,
                                   repetition_penalty=float(req.extra.get("repeat_penalty", 1.1))):
            if isinstance(chunk, Generated):
                yield ChatResult(text=chunk.text, model=self.model, tokens_in=chunk.tokens_in,
                                 tokens_out=chunk.tokens_out, latency_ms=(time.perf_counter() - started) * 1000,
                                 finish_reason=chunk.finish_reason)
            else:
                yield chunk

    def complete(self, req: ChatRequest) -> ChatResult:
        result = None
        for chunk in self.stream(req):
            if isinstance(chunk, ChatResult):
                result = chunk
        assert result is not None
        return result


def probe(method: AdapterSource, question: str, checkpoint: Checkpoint | None, max_new_tokens: int = 80) -> dict[str, str]:
    """Greedy answers to ``question`` by the adapted model (``checkpoint``) and by the base model alone."""
    from memory.plum.generate import generate

    base = method.base()
    msgs = [{"role": "user", "content": question}]
    out = {"base": generate(base, msgs, None, max_new_tokens=max_new_tokens).text}
    if checkpoint is not None:
        with base.lock:
            attach(base, checkpoint.adapter_name, folder=checkpoint.folder)
        out["adapted"] = generate(base, msgs, checkpoint.adapter_name, max_new_tokens=max_new_tokens).text
    return out
