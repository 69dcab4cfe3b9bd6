"""Helpers to run the real app (app.py with its navigation) under Streamlit's AppTest."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT


def open_page(page: str, timeout: float = 60, **params: str) -> AppTest:
    """Run ``app.py`` on ``pages/<page>.py`` with the given query parameters."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout)
    at.switch_page(f"pages/{page}.py")
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def all_markdown(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown) + "\n".join(c.value for c in at.caption)


def app_workspace():
    """The workspace the app under test uses (same process, same ``st.cache_resource`` entry, same PAL_HOME)."""
    from ui.platform_state import base_workspace

    return base_workspace()
