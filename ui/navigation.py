"""The app's pages, built per role: only allowed pages are listed, the others stay reachable by URL only
to say that they are not available (nothing of them runs)."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from review.access import PAGES, allowed_pages, landing_page, may_open


@dataclass(frozen=True)
class PageSpec:
    url_path: str
    title: str
    icon: str

    @property
    def file(self) -> str:
        return f"pages/{self.url_path}.py"


SPECS: dict[str, PageSpec] = {s.url_path: s for s in (
    PageSpec("home", "Home", ":material/home:"),
    PageSpec("users", "Users", ":material/group:"),
    PageSpec("memory", "Memory", ":material/hub:"),
    PageSpec("simulate", "Simulate", ":material/forum:"),
    PageSpec("evaluate", "Evaluate", ":material/balance:"),
    PageSpec("traces", "Traces", ":material/account_tree:"),
    PageSpec("generate", "Generate", ":material/person_add:"),
    PageSpec("review", "Review", ":material/rate_review:"),
    PageSpec("settings", "Settings", ":material/settings:"),
    PageSpec("audit", "Audit", ":material/history:"),
)}
assert tuple(SPECS) == PAGES


def visible_pages(role: str | None, presenting: bool = False) -> list[str]:
    """The url paths the navigation lists for ``role`` (none for a signed-out visitor)."""
    return list(allowed_pages(role, presenting)) if role else []


def build_pages(role: str | None, presenting: bool = False) -> dict[str, object]:
    """Every page as an ``st.Page`` by url path: the role's visible, the rest hidden. Home is the default page for
    every role (Streamlit serves the default page at ``/`` only, so any other default would make its own link —
    ``/review?batch=…`` for an annotator — "not found"); a role without Home is sent on by :func:`landing_redirect`."""
    shown = set(visible_pages(role, presenting))
    return {s.url_path: st.Page(s.file, title=s.title, icon=s.icon, url_path=s.url_path,
                                default=s.url_path == "home",
                                visibility="visible" if s.url_path in shown else "hidden") for s in SPECS.values()}


def landing_redirect(pages: dict[str, object], page_path: str, role: str, presenting: bool = False) -> None:
    """At ``/`` (or ``/home``), a role that may not open Home goes to its first page (an annotator: Review)."""
    if page_path == "home" and not may_open(role, "home", presenting):
        target = landing_page(role)
        if target != "home" and target in pages:
            st.switch_page(pages[target])


def chosen_path(pages: dict[str, object], page) -> str:
    """The url path of the page ``st.navigation`` chose (the default page reports an empty ``url_path``)."""
    return next((path for path, p in pages.items() if p is page or p == page), page.url_path)


def render_unavailable(title: str, role: str, presenting: bool = False) -> None:
    if presenting and may_open(role, next((s.url_path for s in SPECS.values() if s.title == title), "")):
        st.info(f"The {title} page is not offered while presenting a bundle (read-only).", icon=":material/slideshow:")
        return
    st.error(f"The {title} page is not available to your role ({role}).", icon=":material/block:")
