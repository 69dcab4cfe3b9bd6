"""Text generation with the base model, with or without a user's adapter: a token loop over the KV
cache, so answers can stream without a background thread (the model's lock is held throughout)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from memory.plum.model import SYSTEM_PROMPT
from memory.plum.model import BaseModel as LoadedModel
from memory.plum.train import using_adapter


@dataclass
class Generated:
    text: str
    tokens_in: int
    tokens_out: int
    finish_reason: str


def prompt_ids(base: LoadedModel, messages: list[dict[str, str]]) -> list[int]:
    """Chat-template ids with a generation prompt; PLUM's training system prompt is used when none is given."""
    tok = base.tokenizer
    if messages and messages[0]["role"] != "system":
        messages = [{"role": "system", "content": SYSTEM_PROMPT}, *messages]
    if getattr(tok, "chat_template", None):
        out = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        ids = out["input_ids"] if hasattr(out, "keys") else out
        return list(ids[0] if ids and isinstance(ids[0], list) else ids)
    text = "\n\n".join(m["content"] for m in messages if m["role"] != "assistant") + "\nAnswer:"
    return tok(text, add_special_tokens=False)["input_ids"]


def stream_tokens(base: LoadedModel, messages: list[dict[str, str]], adapter: str | None, *,
                  max_new_tokens: int = 128, temperature: float = 0.0, seed: int | None = None,
                  repetition_penalty: float = 1.1, max_context: int = 2048) -> Iterator[str | Generated]:
    """Yield text deltas, then a :class:`Generated`; greedy when ``temperature`` is 0."""
    import torch

    tok = base.tokenizer
    ids = prompt_ids(base, messages)[-max_context:]
    stops = {t for t in (tok.eos_token_id, tok.convert_tokens_to_ids("<|im_end|>")) if isinstance(t, int) and t >= 0}
    gen = torch.Generator(device="cpu").manual_seed(seed if seed is not None else 0)
    out_ids: list[int] = []
    text, reason = "", "length"
    cache_arg = _cache_arg(base)
    with base.lock, torch.inference_mode(), using_adapter(base, adapter):
        past: Any = None
        step_ids = torch.tensor([ids], device=base.device)
        for _ in range(max_new_tokens):
            res = base.model(input_ids=step_ids, use_cache=True, **{cache_arg: past})
            past = getattr(res, cache_arg, None)
            logits = res.logits[0, -1].float().cpu()
            nxt = _pick(logits, ids + out_ids, temperature, repetition_penalty, gen)
            if nxt in stops:
                reason = "stop"
                break
            out_ids.append(nxt)
            new = tok.decode(out_ids, skip_special_tokens=True)
            if len(new) > len(text) and not new.endswith("\ufffd"):
                yield new[len(text):]
                text = new
            step_ids = torch.tensor([[nxt]], device=base.device)
    final = tok.decode(out_ids, skip_special_tokens=True)
    if len(final) > len(text):
        yield final[len(text):]
    yield Generated(final.strip(), len(ids), len(out_ids), reason)


def _cache_arg(base: LoadedModel) -> str:
    """The KV-cache argument of the model's forward (``cache`` in recent transformers, else ``past_key_values``)."""
    import inspect

    model = base.model.get_base_model() if hasattr(base.model, "get_base_model") else base.model
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _pick(logits: Any, seen: list[int], temperature: float, penalty: float, gen: Any) -> int:
    import torch

    if penalty != 1.0 and seen:
        idx = torch.tensor(sorted(set(seen)))
        vals = logits[idx]
        logits[idx] = torch.where(vals > 0, vals / penalty, vals * penalty)
    if temperature <= 0:
        return int(torch.argmax(logits))
    probs = torch.softmax(logits / temperature, dim=-1)
    return int(torch.multinomial(probs, 1, generator=gen))


def generate(base: LoadedModel, messages: list[dict[str, str]], adapter: str | None, **kw: Any) -> Generated:
    """The whole answer at once (see :func:`stream_tokens`)."""
    result = None
    for chunk in stream_tokens(base, messages, adapter, **kw):
        if isinstance(chunk, Generated):
            result = chunk
    assert result is not None
    return result
