"""Presentation mode in the app: open a bundle (upload, or a file inside ``PAL_DATA_ROOTS``), the banner that
says where its records came from, what pages offer instead of controls that write, and projector options.

Pages ask :func:`writes_allowed` before offering a control that writes (Build, Judge, Start, Save, Forget,
answers…); the workspace they read is read-only anyway (:mod:`studio.presentation`), so a control that slipped
through fails with a message instead of changing a record.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import datetime
from pathlib import Path

import streamlit as st

from backends.config import mask_url
from backends.roots import OutsideRoots, inside_roots
from memory.methods import METHODS, get_method_class
from review.accounts import Account
from studio.bundle.manifest import MadeWith
from ui.platform_state import PRESENT_ERROR, PRESENT_KEY, home_workspace, presentation_workspace, presenting
from ui.text import md_escape

log = logging.getLogger(__name__)

PROJECTOR_CSS = """<style>
html, body, [data-testid="stAppViewContainer"] { font-size: 125%; }
[data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li { font-size: 1.15rem; }
</style>"""


def writes_allowed() -> bool:
    """False while presenting: controls that write are not offered."""
    return not presenting()


def read_only_note(what: str) -> None:
    """What a page shows where a control that writes would be."""
    st.caption(f":material/slideshow: Presenting (read-only): {what}.")


def projector() -> bool:
    return st.query_params.get("projector") == "1"


def apply_projector() -> None:
    """Larger text for a projector (``?projector=1``); the sidebar starts collapsed (see ``app.py``)."""
    if projector():
        st.html(PROJECTOR_CSS)


def _made_line(w: MadeWith) -> str:
    where = " · ".join(x for x in (w.provider, mask_url(w.endpoint) or "") if x)
    what = ", ".join(f"{n} {k}" for k, n in w.records.items())
    return (f"{md_escape(w.role)}: **{md_escape(w.model)}**" + (f" ({md_escape(where)})" if where else "")
            + (f" → {md_escape(what)}" if what else ""))


def provenance_lines() -> list[str]:
    """Where the presented records came from. What the records themselves show (their LLM calls, the judge and
    model each judgment names, their memory builds: :func:`studio.presentation.records_made_with`) is stated; what
    only the bundle's manifest says (export date, version, how it was made, a model no record names) is labelled as
    the bundle's claim."""
    ws = presentation_workspace()
    m = ws.presented if ws is not None else None
    if ws is None or m is None:
        return []
    shown = {(w.role, w.model) for w in ws.made_with}
    claimed = [_made_line(w) for w in m.made_with if (w.role, w.model) not in shown]
    counts: dict[str, int] = {}
    for b in ws.tables.select("memory_builds", ["method"]):
        counts[str(b["method"])] = counts.get(str(b["method"]), 0) + 1
    no_llm = [f"{md_escape(name)} ({n})" for name, n in sorted(counts.items()) if name in METHODS
              and not get_method_class(name).uses_llm]
    lines = [f"Dataset **{md_escape(m.dataset.name)}** · the bundle says: exported {md_escape(_date(m.created_at))} "
             f"by PAL Studio {md_escape(m.pal_studio_version)}" + (" · people pseudonymised" if m.selection.pseudonymised
                                                                   else "")]
    lines += [f"Made with {_made_line(w)}" for w in ws.made_with] or ["No LLM calls are recorded with these records."]
    if claimed:
        lines.append("The bundle also claims, with no record here to show it: " + "; ".join(claimed))
    if no_llm:
        lines.append("Memories built without an LLM (builds): " + ", ".join(no_llm))
    lines += [f"How (as the bundle says): {md_escape(h)}" for h in m.how[:6]]
    return lines


def _date(iso: str) -> str:
    try:
        return datetime.fromisoformat(iso).strftime("%Y-%m-%d %H:%M UTC")
    except ValueError:
        return iso


def render_banner(account: Account | None = None) -> None:
    """At the top of every page while presenting: read-only, and — not for annotators, who are blinded to methods
    and judges — where the records came from."""
    if error := st.session_state.pop(PRESENT_ERROR, None):
        st.error(md_escape(error))
    if not presenting():
        return
    lines = [] if account is not None and account.is_annotator else provenance_lines()
    with st.container(border=True):
        st.markdown(":material/slideshow: **Presentation: read-only.** Records as the bundle brought them; nothing "
                    "here calls an LLM or changes a record.  \n" + (lines[0] if lines else ""))
        if len(lines) > 1:
            with st.expander("Where these records came from"):
                st.markdown("\n".join(f"- {line}" for line in lines[1:]))


def _present(path: Path, how: str) -> None:
    from ui.access import actor_name

    st.session_state[PRESENT_KEY] = str(path)
    st.session_state.pop(PRESENT_ERROR, None)
    home_workspace().audit.record(actor_name(), "bundle.present", path.name, via=how)


def _present_path() -> None:
    raw = st.session_state.get("present_path_input", "").strip()
    if not raw:
        return
    try:
        path = inside_roots(raw)
    except OutsideRoots as e:
        st.session_state[PRESENT_ERROR] = str(e)
        return
    if not path.is_file():
        st.session_state[PRESENT_ERROR] = f"{raw} is not a file"
        return
    _present(path, "a file on the server")


def _present_upload() -> None:
    upload = st.session_state.get("present_upload")
    if upload is None:
        return
    data = upload.getvalue()
    folder = home_workspace().paths.uploads
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{hashlib.sha256(data).hexdigest()[:20]}.palbundle"
    if not path.is_file():
        path.write_bytes(data)
    _present(path, "an upload")


def _stop() -> None:
    st.session_state.pop(PRESENT_KEY, None)


def render_present_panel() -> None:
    """Sidebar: present a bundle (or stop presenting), and the projector option."""
    if presenting():
        st.button("Stop presenting", key="present_stop", icon=":material/close:", on_click=_stop,
                  disabled=PRESENT_KEY not in st.session_state)  # PAL_PRESENT: every session presents
    else:
        with st.expander("Present a workspace bundle"):
            st.file_uploader("Bundle file (.palbundle)", type=["palbundle", "zip"], key="present_upload",
                             on_change=_present_upload)
            st.text_input("…or a bundle on this server", key="present_path_input",
                          placeholder="/path/inside/PAL_DATA_ROOTS/work.palbundle")
            st.button("Present", key="present_open", on_click=_present_path)
    st.toggle("Projector: larger text", value=projector(), key="present_projector", on_change=_toggle_projector)


def _toggle_projector() -> None:
    if st.session_state.get("present_projector"):
        st.query_params["projector"] = "1"
    else:
        st.query_params.pop("projector", None)
