import pytest

from backends.config import load_config
from backends.llm.client import LLMClient
from backends.store.cache import ResponseCache
from backends.store.runstore import RunStore


@pytest.fixture
def pal_home(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    return tmp_path / "pal"


@pytest.fixture
def make_client(pal_home):
    """LLMClient over given providers (role → provider) or an endpoint URL for every role."""

    def make(providers=None, env=None, **kwargs):
        cfg = load_config(secrets={}, env=env or {})
        return LLMClient(cfg, store=RunStore(pal_home / "runs.sqlite"), cache=ResponseCache(pal_home / "cache.sqlite"),
                         providers=providers, session_id="s1", **kwargs)

    return make
