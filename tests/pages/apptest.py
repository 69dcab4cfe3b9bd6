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


class CookieJar:
    """The sign-in cookie the app under test reads (AppTest cannot send cookies): patch with :meth:`install`."""

    def __init__(self) -> None:
        self.cookie: str | None = None

    def install(self, monkeypatch) -> CookieJar:
        from ui import access, web_auth

        monkeypatch.setattr(access, "session_cookie", lambda: self.cookie)
        monkeypatch.setattr(web_auth, "_mounted", True)  # as under serve.py
        return self

    def sign_in(self, name: str | None) -> str | None:
        """Sign ``name`` in as the sign-in route would (None: signed out); returns the cookie."""
        from ui.platform_state import home_workspace

        self.cookie = home_workspace().sessions.issue(name) if name else None
        return self.cookie
