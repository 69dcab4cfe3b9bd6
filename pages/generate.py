"""Generate: grow synthetic users with the PAL-Set pipeline and add them to a dataset folder."""

from ui.generate.view import render_generate
from ui.shell import active_dataset, require_router

require_router()
render_generate(active_dataset())
