"""Memory: build a user's memory with a method, scrub it session by session, inspect and compare retrieval."""

from ui.memory.view import render_memory
from ui.shell import active_dataset, require_router

require_router()
render_memory(active_dataset())
