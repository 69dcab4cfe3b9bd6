import pytest

from testkit.workspace import make_workspace


@pytest.fixture
def pal_home(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    return tmp_path / "pal"


@pytest.fixture
def make_client(pal_home):
    """LLMClient over given providers (role → provider) or an endpoint URL for every role."""

    def make(providers=None, env=None):
        return make_workspace(pal_home, providers, env=env or {}).llm(session_id="s1")

    return make
