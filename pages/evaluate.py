"""Evaluate: FairEval pairwise judging of simulated runs, the single-turn leaderboard and drill-downs."""

from ui.evaluate.view import render_evaluate
from ui.shell import active_dataset, require_router

require_router()
render_evaluate(active_dataset())
