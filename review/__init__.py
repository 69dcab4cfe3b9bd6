"""Annotator review sessions: accounts, batches with seeded sampling and overlap, answers, agreement, exports."""
