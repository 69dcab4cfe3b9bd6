"""Settings: LLM roles, the local model server, the embedder and usage."""

from ui.settings.view import render_settings
from ui.shell import active_dataset, require_router

require_router()
render_settings(active_dataset().language)
