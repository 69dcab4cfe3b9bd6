"""Language-dependent wording of the generated data: labels of log types and dialogue acts, names.

Chinese users get the release's Chinese labels (``网页搜索``, ``话题询问``); English users get the
English names of the paper's Appendix. Both spellings are read by :mod:`palset.vocab`.
"""

from __future__ import annotations

import json
import math

from pydantic import BaseModel

from palset.vocab import ASPECTS, Act, LogType

LANGUAGE_NAMES = {"en": "English", "zh": "Simplified Chinese (简体中文)"}
# Characters of prose per token of the bundled models' tokenizer (Qwen2.5), measured on the demo users' timelines
# (data/demo/timeline): English 4.3–4.8, Chinese 1.31–1.43; the lower end of each, so a budget sized from them holds
# the longest answer a schema allows (tests/synth/test_real_local_generation.py checks them on the served model).
CHARS_PER_TOKEN = {"en": 4.2, "zh": 1.3}
JSON_OVERHEAD_TOKENS = 40  # braces, keys and quotes of a one-field reply


def language_name(lang: str) -> str:
    return LANGUAGE_NAMES[lang]


def answer_budget(reply: type[BaseModel], lang: str, floor: int) -> int:
    """Tokens a reply may need in ``lang``: its string fields at their ``max_length`` (characters) at the language's
    characters per token, plus the JSON around them — at least ``floor``. A Chinese answer of the same length in
    characters costs about three times the tokens of an English one, so a budget sized for English cut it."""
    chars = sum(next((m.max_length for m in f.metadata if getattr(m, "max_length", None)), 0)
                for f in reply.model_fields.values() if f.annotation is str)
    return max(floor, math.ceil(chars / CHARS_PER_TOKEN[lang]) + JSON_OVERHEAD_TOKENS)


def log_type_labels(lang: str) -> list[str]:
    """The 8 log types, in the Appendix's order, as written in this language."""
    return [t.zh if lang == "zh" else t.value for t in LogType]


def act_label(act: Act, lang: str) -> str:
    return act.zh if lang == "zh" else act.value


def dumps(value: object) -> str:
    """Compact JSON for prompts (keeps non-ASCII text readable)."""
    return json.dumps(value, ensure_ascii=False, indent=1)


def profile_text(profile: dict, with_personality: bool = False) -> str:
    """A profile for a prompt; most steps must not see the personality (spec §2.2–§2.6)."""
    shown = {k: v for k, v in profile.items() if k != "id" and (with_personality or k != "personality")}
    return dumps(shown)


def all_requirement_types(types: dict[str, dict[str, str]]) -> dict[str, str]:
    """Requirement id → phrase, aspects in the fixed order."""
    return {rid: phrase for aspect in ASPECTS for rid, phrase in types.get(aspect, {}).items()}
