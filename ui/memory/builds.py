"""Which stored build of a method the Memory page shows: every build with records is offered (one made with
another memory builder, or brought by a bundle), the one made by the configured memory builder first, and each
is labelled with the models that made it (from its LLM calls)."""

from __future__ import annotations

import streamlit as st

from backends.config import ConfigError
from backends.store.runstore import Totals
from memory.methods import get_method_class
from memory.store import BuildInfo
from ui.platform_state import base_workspace, platform_config
from ui.text import md_escape
from ui.url_state import UrlState

KEY = "mem_build_id"
_URL = UrlState({"build": KEY}, "mem")


Models = dict[str, list[tuple[str, str, str, int]]]  # build id → (role, provider, model, calls)


def made_by(build_id: str, method: str, models_by_run: Models | None = None) -> str:
    """"SmolLM2-135M-Instruct (memory_builder, 12 calls)", or "no LLM" for a method that builds without one.
    ``models_by_run``: the builds' models already read (else they are read for this build)."""
    runs = base_workspace().runs.models_by_run([build_id]) if models_by_run is None else models_by_run
    models = runs.get(build_id, [])
    if not models:
        return "no LLM" if not get_method_class(method).uses_llm else "no LLM calls recorded"
    return ", ".join(f"{model} ({role}, {n} calls)" for role, _provider, model, n in models)


def _configured_builder() -> str | None:
    try:
        return platform_config().role("memory_builder").model
    except ConfigError:
        return None


def ordered_builds(builds: list[BuildInfo], configured: str | None, runs: Models) -> list[BuildInfo]:
    """The build made by the configured memory-builder model first, then newest first (the stored order)."""
    mine = [b for b in builds if any(model == configured for _r, _p, model, _n in runs.get(b.build_id, []))]
    return mine + [b for b in builds if b not in mine]


def pick_build(dkey: str, uid: str, method: str) -> str | None:
    """The build id to open when this method has several stored builds for the user (None: the default policy)."""
    builds = base_workspace().memory.builds_of(dkey, uid, method)
    if len(builds) < 2:
        return None
    runs = base_workspace().runs.models_by_run([b.build_id for b in builds])  # one read for every label
    builds = ordered_builds(builds, _configured_builder(), runs)
    ids = [b.build_id for b in builds]
    by_id = {b.build_id: b for b in builds}
    _URL.sync("build", ids, ids[0])
    chosen = st.selectbox("Build", ids, key=KEY, help="Stored builds of this method for this user; the one made by "
                          "the configured memory builder comes first.",
                          format_func=lambda i: f"{i} · {by_id[i].stages_done} stages · embedder "
                                                f"{by_id[i].config.get('embedder', '?')} · {made_by(i, method, runs)}")
    _URL.write("build")
    return chosen


def render_made_by(build_id: str, method: str) -> None:
    st.caption(f"Made by: {md_escape(made_by(build_id, method))}")


def cached_line(totals: Totals) -> str | None:
    """"Prompt tokens served from the server's cache: 41% of 12,345 (as the endpoint reported them)", or None when
    no call of the build reached an endpoint that says."""
    share = totals.cached_share
    if share is None:
        return None
    return (f"Prompt tokens served from the server's cache: {share:.0%} of {totals.tokens_reported:,} "
            f"(as the endpoint reported them; {totals.tokens_reported - totals.tokens_cached:,} computed)")
