"""Token counts for prompt contexts, one counter for every method so counts compare.

The estimate of :mod:`backends.llm.counters` (the bundled MiniLM WordPiece tokenizer; CJK characters
count one token each, close to what chat-model tokenizers do for Chinese). Counts against a real
endpoint's window use that endpoint's own counter (``LLMClient.budget``); every recorded count names
its counter (:func:`counter_name`).
"""

from __future__ import annotations

from backends.llm.counters import estimate_name, estimate_tokens


def count_tokens(text: str) -> int:
    """Tokens of ``text`` by the estimate (memoised: retrieval contexts repeat from turn to turn)."""
    return estimate_tokens(text)


def counter_name() -> str:
    """The name recorded with counts made by :func:`count_tokens`."""
    return estimate_name()
