"""The two model calls of simulator fidelity, each with a bounded JSON schema and every raw answer kept as evidence:

- :func:`judge_stance` — the judge-based stance classifier (``accept``/``reject``/``partial``/``none``, the labels
  of the rule classifier :mod:`sim.stance`), for confirmations and verdicts when ``classifier = "judge"``;
- :func:`judge_persona` — whether a turn contradicts the user's profile, asked only where the turn states facts
  about the user (``persona_judge``): the one part of "in persona" no rule can decide;
- :func:`judge_voice` — whether a turn speaks as the user or as the assistant: the judge instrument of "in
  persona", measured beside the rules on the labelled persona corpus (:mod:`.corpus`).

Both use the ``judge`` role; a call that yields no valid answer is an ``invalid`` outcome, logged, never a guess.
"""

from __future__ import annotations

import logging
from typing import Literal

from pydantic import BaseModel, Field

from backends.llm.client import LLMClient
from backends.prompts import load_prompt

log = logging.getLogger(__name__)
STANCE_PROMPT = "eval/sim_stance"
PERSONA_PROMPT = "eval/sim_persona"
VOICE_PROMPT = "eval/sim_voice"


class StanceOut(BaseModel):
    reason: str = Field(max_length=300)
    stance: Literal["accept", "reject", "partial", "none"]


class VoiceOut(BaseModel):
    reason: str = Field(max_length=300)
    speaker: Literal["user", "assistant"]


class PersonaOut(BaseModel):
    reason: str = Field(max_length=300)
    contradicts: bool


def judge_stance(llm: LLMClient, assistant: str, user: str, salt: str) -> dict:
    """``{"label", "reason", "raw", "prompt_version"}``; label ``invalid`` when the judge gave no valid answer."""
    prompt = load_prompt(STANCE_PROMPT)
    text = prompt.render(assistant=assistant or "(nothing yet: this is the user's first turn)", user=user)
    out = llm.structured("judge", [{"role": "user", "content": text}], StanceOut, prompt=prompt,
                         cache_salt=f"sim-stance/{salt}")
    if not out.ok:
        log.warning("stance judge gave no valid answer for %s: %s", salt, out.errors[-1][:200] if out.errors else "")
        return {"label": "invalid", "reason": "", "raw": out.last_raw, "prompt_version": prompt.version}
    return {"label": out.value.stance, "reason": out.value.reason, "raw": out.raw, "prompt_version": prompt.version}


def judge_persona(llm: LLMClient, profile: str, turn: str, salt: str) -> dict:
    """``{"contradicts": bool | None, "reason", "raw", "prompt_version"}`` (None: no valid answer)."""
    prompt = load_prompt(PERSONA_PROMPT)
    out = llm.structured("judge", [{"role": "user", "content": prompt.render(profile=profile, turn=turn)}],
                         PersonaOut, prompt=prompt, cache_salt=f"sim-persona/{salt}")
    if not out.ok:
        log.warning("persona judge gave no valid answer for %s: %s", salt, out.errors[-1][:200] if out.errors else "")
        return {"contradicts": None, "reason": "", "raw": out.last_raw, "prompt_version": prompt.version}
    return {"contradicts": out.value.contradicts, "reason": out.value.reason, "raw": out.raw,
            "prompt_version": prompt.version}


def judge_voice(llm: LLMClient, turn: str, salt: str) -> dict:
    """``{"speaker": "user" | "assistant" | "invalid", "reason", "raw", "prompt_version"}``."""
    prompt = load_prompt(VOICE_PROMPT)
    out = llm.structured("judge", [{"role": "user", "content": prompt.render(turn=turn)}], VoiceOut, prompt=prompt,
                         cache_salt=f"sim-voice/{salt}")
    if not out.ok:
        log.warning("voice judge gave no valid answer for %s: %s", salt, out.errors[-1][:200] if out.errors else "")
        return {"speaker": "invalid", "reason": "", "raw": out.last_raw, "prompt_version": prompt.version}
    return {"speaker": out.value.speaker, "reason": out.value.reason, "raw": out.raw, "prompt_version": prompt.version}
