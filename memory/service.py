"""Open a memory builder for (dataset, user, method) with the platform's real parts: the configured
embedder, ChromaDB and the run store under PAL_HOME, and the LLM client when the method needs one."""

from __future__ import annotations

from pathlib import Path

from backends.config import PlatformConfig, load_config
from backends.embeddings import get_embedder
from backends.llm.client import LLMClient
from backends.vectorstore import ChromaStore
from memory.build import MemoryBuilder
from memory.methods import get_method_class
from memory.store import MemoryStore
from palset.dataset import Dataset

_STORES: dict[tuple[str, str], ChromaStore] = {}


def chroma_for(embedder_name: str, embedder) -> ChromaStore:
    """One Chroma client per embedder per process (collections differ per embedder anyway)."""
    from backends.paths import state_path

    key = (embedder_name, str(state_path("chroma", "db")))
    if key not in _STORES:
        _STORES[key] = ChromaStore(embedder)
    return _STORES[key]


def open_builder(dataset: Dataset, user_id: str, method: str, *, config: PlatformConfig | None = None,
                 llm: LLMClient | None = None, embedder_name: str | None = None,
                 method_config: dict | None = None) -> MemoryBuilder:
    if user_id not in dataset.users:
        raise KeyError(f"no user {user_id!r} in {dataset.root} (users: {', '.join(list(dataset.users)[:10])}…)")
    user = dataset.users[user_id]
    cfg = config or load_config()
    cls = get_method_class(method)
    embedder = get_embedder(embedder_name or cfg.embedder.name, user.language, cfg.embedder.batch_size)
    if cls.uses_llm and llm is None:
        llm = LLMClient(cfg)
    return MemoryBuilder(dataset_key(dataset.root), user, method, MemoryStore(), chroma_for(embedder.name, embedder),
                         embedder, llm=llm, config=method_config or {})


def dataset_key(root: Path) -> str:
    """A stable name for a dataset folder in build ids and collection names."""
    return str(Path(root).resolve())
