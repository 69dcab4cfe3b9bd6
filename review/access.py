"""Who may open what: the access mode (``PAL_AUTH``) and the pages of each role.

``local``: one person on 127.0.0.1 (what ``make run`` uses), no sign-in, that person is the admin.
``accounts``: every page behind sign-in (``make serve``). The mode is configuration, never inferred
from the address the server is bound to — behind a reverse proxy or an SSH tunnel every visitor
arrives from 127.0.0.1. Unset, it is ``accounts``: an app nobody configured asks who you are.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from review.accounts import LOCAL_ADMIN, Account

AuthMode = Literal["local", "accounts"]
MODES: tuple[str, ...] = ("local", "accounts")

# every page of the app, in navigation order (url path)
PAGES: tuple[str, ...] = ("home", "users", "memory", "simulate", "evaluate", "traces", "generate", "review",
                          "settings", "audit")
ROLE_PAGES: dict[str, tuple[str, ...]] = {
    "admin": PAGES,
    "researcher": ("home", "users", "memory", "simulate", "evaluate", "traces", "generate", "review"),
    "annotator": ("review",),
}
FIRST_ADMIN = "pal users add NAME --role admin"


class AccessConfigError(ValueError):
    """PAL_AUTH holds something else than a mode."""


def auth_mode(env: Mapping[str, str] | None = None) -> AuthMode:
    env = os.environ if env is None else env
    mode = (env.get("PAL_AUTH") or "accounts").strip().lower()
    if mode not in MODES:
        raise AccessConfigError(f"PAL_AUTH={mode!r}: use one of {', '.join(MODES)}")
    return mode  # type: ignore[return-value]  # checked against MODES just above


def local_admin() -> Account:
    return Account(name=LOCAL_ADMIN, role="admin")


# not offered while presenting a bundle: pages that only make or configure, and the home's audit log (the people
# of this server, not of the bundle)
WRITE_ONLY_PAGES: tuple[str, ...] = ("generate", "settings", "audit")


def allowed_pages(role: str, presenting: bool = False) -> tuple[str, ...]:
    """The role's pages; while presenting a bundle (read-only), without the pages that only make or configure and
    without the home's audit log."""
    pages = ROLE_PAGES.get(role, ())
    return tuple(p for p in pages if p not in WRITE_ONLY_PAGES) if presenting else pages


def may_open(role: str, page: str, presenting: bool = False) -> bool:
    return page in allowed_pages(role, presenting)


def landing_page(role: str) -> str:
    """The page a role lands on (the first it may open)."""
    pages = allowed_pages(role)
    return pages[0] if pages else "home"
