"""Per-browser-session access to the platform: the process's workspace, this session's config and client.

The app has one :class:`studio.workspace.Workspace` per ``PAL_HOME`` (kept by ``st.cache_resource``);
each browser session sees it under its own configuration (Settings overrides) through
:func:`workspace`, and gets one LLM client through :func:`llm_client`.

A session that presents a bundle (opened in the sidebar, or every session when ``PAL_PRESENT`` names one)
reads every record from that bundle's read-only workspace (:mod:`studio.presentation`): :func:`base_workspace`
and :func:`workspace` return it, and it makes no LLM call and no write. Accounts, sign-in and the audit log
stay with the home (:func:`home_workspace`).
"""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path
from typing import Any

import streamlit as st

from backends.config import ConfigError, CostEstimate, PlatformConfig, config_fingerprint, load_config
from backends.llm.client import LLMClient
from backends.paths import default_home
from backends.store.runstore import RunStore
from studio.workspace import Workspace

log = logging.getLogger(__name__)

OVERRIDES_KEY = "llm_overrides"
JOB_WORKERS = int(os.environ.get("PAL_JOB_WORKERS", "4"))
PRESENT_KEY = "pal_present_bundle"  # the bundle file this browser session presents
PRESENT_ERROR = "pal_present_error"


def _release(ws: Workspace) -> None:
    ws.jobs.stop(timeout=2)


@st.cache_resource(max_entries=4, show_spinner=False, on_release=_release)
def _process_workspace(home: str) -> Workspace:
    """One workspace per home for the whole process (every browser session shares its stores).

    A broken configuration does not stop the records from opening: the sidebar shows the error, and
    :func:`workspace` (what LLM work uses) raises it. ``PAL_DEMO_WORKSPACE`` (set by ``make run``) names a bundle
    imported into the home on first start (:func:`studio.presentation.import_once`)."""
    try:
        config = load_config()
    except ConfigError as e:
        log.warning("configuration error (records still open with the defaults): %s", e)
        config = load_config(secrets={}, env={})
    ws = Workspace(home=Path(home), config=config)
    _clean_presentations(ws)
    ws.jobs.start(JOB_WORKERS)  # units of app jobs run in this process whether or not a page is open
    if bundle := os.environ.get("PAL_DEMO_WORKSPACE"):  # make run: the demo's records, once per bundle file
        from palset.names import PROJECT_ROOT, configured_datasets
        from studio.presentation import import_once

        path = Path(bundle) if Path(bundle).is_absolute() else PROJECT_ROOT / bundle
        import_once(ws, path, known=configured_datasets())
    return ws


def _clean_presentations(ws: Workspace) -> None:
    """Presentations and uploads unused for a week go (``PAL_PRESENT``'s bundle stays)."""
    from studio.presentation import bundle_sha256, clean_presentations

    keep = []
    if (present := os.environ.get("PAL_PRESENT")) and Path(present).is_file():
        keep.append(bundle_sha256(Path(present)))
    clean_presentations(ws.home, keep)


def session_id() -> str:
    return st.session_state.setdefault("pal_session_id", uuid.uuid4().hex[:12])


def overrides() -> dict[str, dict[str, Any]]:
    return st.session_state.setdefault(OVERRIDES_KEY, {})


def platform_config() -> PlatformConfig:
    """Secrets + environment + this session's overrides; raises :class:`ConfigError` with a clear message."""
    return load_config(overrides=overrides())


@st.cache_resource(max_entries=4, show_spinner="Opening the bundle for presenting…")
def _presentation(home: str, bundle: str, stamp: tuple[int, int], datasets: tuple[tuple[str, str], ...]) -> Workspace:
    """The read-only workspace of a bundle (imported once per file content; ``stamp``: size and mtime)."""
    from studio.presentation import open_presentation

    return open_presentation(_process_workspace(home), Path(bundle), known={n: Path(p) for n, p in datasets})


def presented_bundle() -> str | None:
    """The bundle this session presents: one opened in the sidebar, else ``PAL_PRESENT``."""
    return st.session_state.get(PRESENT_KEY) or os.environ.get("PAL_PRESENT") or None


def known_dataset_paths() -> dict[str, Path]:
    """The datasets this session can open by name: the configured ones and folders added in the sidebar."""
    from palset.names import configured_datasets

    return {**configured_datasets(), **st.session_state.get("added_datasets", {})}


_REFUSED: dict[tuple[str, int, int], str] = {}  # bundle file (path, size, mtime) → why it was refused


def presentation_workspace() -> Workspace | None:
    """The presented bundle's workspace, or None (a bundle that cannot be opened is reported once and dropped; a
    refused upload is deleted; a refused file is not read again until it changes)."""
    bundle = presented_bundle()
    if not bundle:
        return None
    from studio.bundle.importer import BundleError

    path = Path(bundle)
    try:
        stat = path.stat()
        stamp = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
        if stamp in _REFUSED:
            raise BundleError(path, _REFUSED[stamp])
        datasets = tuple(sorted((n, str(p)) for n, p in known_dataset_paths().items()))
        try:
            return _presentation(str(default_home()), stamp[0], stamp[1:], datasets)
        except BundleError as e:
            _REFUSED[stamp] = e.reason
            raise
    except (BundleError, OSError) as e:
        log.warning("cannot present %s: %s", bundle, e)
        reason = e.reason if isinstance(e, BundleError) else "the file cannot be read"
        st.session_state[PRESENT_ERROR] = f"Cannot present {path.name}: refused: {reason}"
        st.session_state.pop(PRESENT_KEY, None)
        _drop_upload(path)
        return None


def _drop_upload(path: Path) -> None:
    """A refused bundle that was uploaded is deleted at once (nothing of it stays on the server)."""
    uploads = home_workspace().paths.uploads.resolve()
    try:
        if path.resolve().parent == uploads:
            path.unlink(missing_ok=True)
            log.info("deleted the refused upload %s", path.name)
    except OSError:
        log.warning("cannot delete the refused upload %s", path, exc_info=True)


def present_refusal() -> str | None:
    """Why ``PAL_PRESENT``'s bundle cannot be presented (None: it can, or none is set): every session would
    otherwise show this home's records instead of the bundle's."""
    bundle = os.environ.get("PAL_PRESENT")
    if not bundle or PRESENT_KEY in st.session_state or presentation_workspace() is not None:
        return None
    st.session_state.pop(PRESENT_ERROR, None)
    stamp = None
    try:
        stat = Path(bundle).stat()
        stamp = (str(Path(bundle).resolve()), stat.st_size, stat.st_mtime_ns)
    except OSError:
        return f"{Path(bundle).name}: refused: no such file"
    return f"{Path(bundle).name}: refused: {_REFUSED.get(stamp, 'it cannot be opened')}"


def presenting() -> bool:
    """Whether this session shows a bundle read-only (no LLM calls, no writes)."""
    return presentation_workspace() is not None


def home_workspace() -> Workspace:
    """The process's own workspace (its home): accounts, sign-in throttle, audit log, local servers."""
    return _process_workspace(str(default_home()))


def workspace() -> Workspace:
    """The records' workspace under this session's configuration (raises :class:`ConfigError`); a presented
    bundle's is read-only and has no LLM client."""
    return (presentation_workspace() or home_workspace()).with_config(platform_config())


def base_workspace() -> Workspace:
    """The workspace records are read from (and, unless presenting, written to); needs no valid LLM configuration."""
    return presentation_workspace() or home_workspace()


def llm_client() -> LLMClient:
    """One client per browser session, rebuilt when the session's overrides change (a changed key included)."""
    ws = workspace()
    fingerprint = config_fingerprint(ws.config) + str(ws.home)
    cached = st.session_state.get("_llm_client")
    if cached is None or st.session_state.get("_llm_client_fp") != fingerprint:
        cached = ws.llm(session_id=session_id())
        st.session_state["_llm_client"] = cached
        st.session_state["_llm_client_fp"] = fingerprint
    return cached


def session_cost(cfg: PlatformConfig, store: RunStore, sid: str | None) -> tuple[int, int, int, CostEstimate]:
    """(calls, tokens in, tokens out, estimated cost) for a session, or for all time when ``sid`` is None."""
    totals = store.totals(sid)
    return totals.calls, totals.tokens_in, totals.tokens_out, cfg.estimate(totals.by_model)
