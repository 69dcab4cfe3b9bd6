"""Simulate: a simulated user talks to a memory-equipped assistant (one method, or two side by side)."""

from ui.shell import active_dataset, require_router
from ui.simulate.view import render_simulate

require_router()
render_simulate(active_dataset())
