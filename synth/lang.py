"""Language-dependent wording of the generated data: labels of log types and dialogue acts, names.

Chinese users get the release's Chinese labels (``网页搜索``, ``话题询问``); English users get the
English names of the paper's Appendix. Both spellings are read by :mod:`palset.vocab`.
"""

from __future__ import annotations

import json

from palset.vocab import ASPECTS, Act, LogType

LANGUAGE_NAMES = {"en": "English", "zh": "Simplified Chinese (简体中文)"}


def language_name(lang: str) -> str:
    return LANGUAGE_NAMES[lang]


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
