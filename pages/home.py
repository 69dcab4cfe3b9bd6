"""Home: what PAL Studio is for, and a short tour of the bundled demo users for presenters."""

from ui.home.view import render_home
from ui.shell import active_dataset, require_router

require_router()
render_home(active_dataset())
