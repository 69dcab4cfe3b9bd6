"""Review: annotator sessions over review batches (data quality, pairwise dialogues, memory audits)."""

from ui.review.view import render_review
from ui.shell import active_dataset, require_router

require_router()
render_review(active_dataset())
