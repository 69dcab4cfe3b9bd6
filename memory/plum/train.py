"""LoRA training on one session's QA pairs with a weighted cross-entropy (PLUM stage 2).

Every pair is rendered as a chat (system, user question, assistant answer) with the model's chat
template; each token is classed ``template`` (roles, markers, the system prompt), ``question`` or
``answer`` (the answer plus the end-of-turn token that follows it, so the model learns to stop),
and the loss of predicting a token is weighted by its class — PLUM up-weights the QA tokens so the
adapter learns content rather than format. Sessions are trained one after another, each starting
from the previous session's adapter (no replay of earlier pairs), as in the paper.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memory.plum.model import SYSTEM_PROMPT
from memory.plum.model import BaseModel as LoadedModel

KINDS = ("template", "question", "answer")


class Hyper(BaseModel):
    """Training hyper-parameters; recorded with every checkpoint."""

    model_config = ConfigDict(extra="forbid")
    rank: int = Field(8, ge=1, le=256)
    alpha: int = Field(16, ge=1)
    dropout: float = Field(0.0, ge=0, lt=1)
    lr: float = Field(1e-3, gt=0)
    epochs: int = Field(5, ge=1, le=100)
    batch_size: int = Field(8, ge=1, le=256)
    max_length: int = Field(128, ge=16, le=4096)
    max_steps: int = Field(0, ge=0)  # per session; 0: no cap
    weights: dict[str, float] = Field(default_factory=lambda: {"template": 0.1, "question": 0.5, "answer": 1.0})
    seed: int = 0
    target_modules: list[str] | None = None  # None: peft's default for the architecture

    def lora_config(self) -> Any:
        from peft import LoraConfig

        return LoraConfig(r=self.rank, lora_alpha=self.alpha, lora_dropout=self.dropout, task_type="CAUSAL_LM",
                          target_modules=self.target_modules)


@dataclass
class Encoded:
    """One tokenised pair: ids, the class of every token, and its loss weight."""

    ids: list[int]
    kinds: list[str]
    weights: list[float]
    truncated: int = 0


def render(tok: Any, question: str, answer: str | None) -> str:
    """The chat text of a pair (``answer`` None: the prompt up to where the assistant starts)."""
    if getattr(tok, "chat_template", None):
        msgs = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}]
        if answer is None:
            return tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        return tok.apply_chat_template([*msgs, {"role": "assistant", "content": answer}], tokenize=False)
    text = f"{SYSTEM_PROMPT}\n\nQuestion: {question}\nAnswer:"
    return text if answer is None else f"{text} {answer}{tok.eos_token or ''}"


def encode(tok: Any, question: str, answer: str, max_length: int, weights: dict[str, float]) -> Encoded:
    """Tokenise a pair and class every token by the characters it covers; keeps the tail when too long."""
    text = render(tok, question, answer)
    q0 = text.find(question, text.find(SYSTEM_PROMPT) + len(SYSTEM_PROMPT))
    a0 = text.find(answer, q0 + len(question))
    spans = {"question": (q0, q0 + len(question)), "answer": (a0, a0 + len(answer))}
    enc = tok(text, return_offsets_mapping=True, add_special_tokens=False)
    kinds: list[str] = []
    stop_marked = False
    for s, e in enc["offset_mapping"]:
        kind = next((k for k, (lo, hi) in spans.items() if lo >= 0 and s < hi and e > lo), "template")
        if kind == "template" and not stop_marked and a0 >= 0 and s >= spans["answer"][1]:
            kind, stop_marked = "answer", True  # the end-of-turn token after the answer
        kinds.append(kind)
    ids = list(enc["input_ids"])
    cut = max(0, len(ids) - max_length)
    ids, kinds = ids[cut:], kinds[cut:]
    return Encoded(ids, kinds, [float(weights.get(k, 0.0)) for k in kinds], cut)


def weighted_loss(logits: Any, ids: Any, weights: Any) -> Any:
    """Σ wᵢ·CE(token i | tokens < i) / Σ wᵢ over a padded batch (padding has weight 0)."""
    import torch.nn.functional as F

    logits, targets, w = logits[:, :-1, :], ids[:, 1:], weights[:, 1:]
    ce = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1), reduction="none")
    return (ce * w.reshape(-1)).sum() / w.sum().clamp_min(1e-8)


def batch_tensors(items: list[Encoded], pad_id: int, device: str) -> tuple[Any, Any, Any]:
    """(ids, attention mask, weights), right-padded to the longest item."""
    import torch

    n = max(len(e.ids) for e in items)
    ids = torch.full((len(items), n), pad_id, dtype=torch.long)
    mask = torch.zeros((len(items), n), dtype=torch.long)
    w = torch.zeros((len(items), n), dtype=torch.float32)
    for i, e in enumerate(items):
        ids[i, : len(e.ids)] = torch.tensor(e.ids)
        mask[i, : len(e.ids)] = 1
        w[i, : len(e.ids)] = torch.tensor(e.weights)
    return ids.to(device), mask.to(device), w.to(device)


@dataclass
class TrainResult:
    losses: list[float]
    steps: int
    seconds: float
    tokens: dict[str, int]
    truncated: int


def train_adapter(base: LoadedModel, adapter_name: str, pairs: list[tuple[str, str]], hyper: Hyper,
                  seed: int) -> TrainResult:
    """Train the attached adapter ``adapter_name`` on ``pairs`` for ``hyper.epochs`` (caller holds the lock)."""
    import torch

    started = time.perf_counter()
    tok, model = base.tokenizer, base.model
    encoded = [encode(tok, q, a, hyper.max_length, hyper.weights) for q, a in pairs]
    tokens = {k: sum(e.kinds.count(k) for e in encoded) for k in KINDS}
    model.set_adapter(adapter_name)
    params = [p for n, p in model.named_parameters() if f".{adapter_name}." in n]
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.AdamW(params, lr=hyper.lr, weight_decay=0.0)
    rng = random.Random(seed)
    torch.manual_seed(seed)
    losses: list[float] = []
    model.train()
    try:
        for _ in range(hyper.epochs):
            order = list(range(len(encoded)))
            rng.shuffle(order)
            for b in range(0, len(order), hyper.batch_size):
                if hyper.max_steps and len(losses) >= hyper.max_steps:
                    break
                ids, mask, w = batch_tensors([encoded[i] for i in order[b: b + hyper.batch_size]],
                                             tok.pad_token_id, base.device)
                loss = weighted_loss(model(input_ids=ids, attention_mask=mask).logits, ids, w)
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                losses.append(round(float(loss.detach()), 5))
    finally:
        model.eval()
        for p in params:
            p.requires_grad_(False)
    return TrainResult(losses, len(losses), time.perf_counter() - started, tokens, sum(e.truncated for e in encoded))


def pair_loss(base: LoadedModel, pairs: list[tuple[str, str]], hyper: Hyper, adapter_name: str | None) -> float:
    """Mean weighted loss of ``pairs`` with an adapter (or the base model when None); no training."""
    import torch

    model = base.model
    encoded = [encode(base.tokenizer, q, a, hyper.max_length, hyper.weights) for q, a in pairs]
    ids, mask, w = batch_tensors(encoded, base.tokenizer.pad_token_id, base.device)
    with torch.inference_mode(), _adapter(base, adapter_name):
        return float(weighted_loss(model(input_ids=ids, attention_mask=mask).logits, ids, w))


class _adapter:
    """Context: the named adapter active, or (None) every adapter disabled."""

    def __init__(self, base: LoadedModel, name: str | None):
        self.base, self.name, self._ctx = base, name, None

    def __enter__(self):
        if self.name is not None:
            self.base.model.set_adapter(self.name)
        elif self.base.loaded:
            self._ctx = self.base.model.disable_adapter()
            self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        if self._ctx is not None:
            self._ctx.__exit__(*exc)
        return False


def using_adapter(base: LoadedModel, name: str | None) -> _adapter:
    return _adapter(base, name)


def train_session(base: LoadedModel, store: Any, *, sample_id: str, session_index: int, position: int,
                  pairs: list[tuple[str, str]], hyper: Hyper) -> Any:
    """Train one session's checkpoint from the previous session's (or a fresh adapter) and save it.

    ``store`` is a :class:`memory.plum.adapter.AdapterStore`; returns the new checkpoint. An existing
    checkpoint of this session is returned as is (a resumed build never trains a session twice).
    """
    from memory.plum.adapter import TrainRecord
    from memory.plum.model import attach, detach

    if (done := store.get(sample_id)) is not None:
        return done
    prev = store.latest_before(session_index)
    name = f"train_{position}_{time.time_ns()}"
    seed = hyper.seed + position
    with base.lock:
        import torch

        torch.manual_seed(seed)  # LoRA's A matrices are initialised at random
        attach(base, name, hyper.lora_config(), folder=prev.folder if prev else None, trainable=True)
        try:
            before = pair_loss(base, pairs, hyper, name)
            result = train_adapter(base, name, pairs, hyper, seed)
            record = TrainRecord(sample_id=sample_id, session_index=session_index, position=position,
                                 pairs=len(pairs), steps=result.steps, losses=result.losses, loss_before=round(before, 5),
                                 seconds=round(result.seconds, 3), hyper=hyper.model_dump(), tokens=result.tokens,
                                 truncated=result.truncated, base_model=base.name, device=base.device,
                                 started_from=prev.record.sample_id if prev else None, created_at=time.time())
            return store.save(base.model, name, record)
        finally:
            detach(base, name)
