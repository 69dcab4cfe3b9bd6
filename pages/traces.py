"""Traces: every run, build and judgment as a tree of its LLM calls."""

from ui.platform_state import base_workspace
from ui.shell import require_router
from ui.traces.view import render_traces

require_router()
render_traces(base_workspace())
