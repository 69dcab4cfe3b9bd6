"""How long a generation still needs: the seconds its finished steps took, scaled by their share of the work.

Steps differ by orders of magnitude (the profile is one short call; the logs and dialogues are most of a month),
so the time left is not "steps left × mean step". Each step's share of a whole one-month generation's seconds was
measured on the bundled model (``step_shares.json``, with where it was measured: ``bench/generation_defaults.py``
prints the per-step seconds it comes from); the time left is the finished steps' seconds ÷ their share × the
share left. The machine's speed cancels out; only the proportions between steps are assumed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from synth.store import StepRecord

log = logging.getLogger(__name__)
SHARES_FILE = Path(__file__).with_name("step_shares.json")


class StepShares(BaseModel):
    """Each step's share of a one-month generation's seconds, and where that was measured."""

    model_config = ConfigDict(extra="forbid")
    source: str
    shares: dict[str, float] = Field(min_length=1)


@lru_cache(maxsize=1)
def load_shares(path: Path = SHARES_FILE) -> StepShares | None:
    """The measured shares; None (no ETA shown, the reason logged) when the file is missing or not valid."""
    try:
        return StepShares.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, ValidationError) as e:
        log.warning("%s: no step shares, so no ETA for generations (%s)", path, e)
        return None


def seconds_left(records: Mapping[str, StepRecord], shares: StepShares | None = None) -> float | None:
    """Seconds the steps not yet stored need, estimated from those stored (edited ones say nothing of the speed);
    None before the first measured step has finished or once every step has."""
    shares = shares or load_shares()
    if shares is None:
        return None
    total = sum(shares.shares.values())
    timed = [name for name, rec in records.items() if name in shares.shares and not rec.edited and rec.seconds > 0]
    done_share = sum(shares.shares[n] for n in timed) / total
    left_share = sum(v for n, v in shares.shares.items() if n not in records) / total
    if done_share <= 0 or left_share <= 0:
        return None
    return sum(records[n].seconds for n in timed) / done_share * left_share


def eta_text(seconds: float | None) -> str:
    """"about 12 min left"; "" when unknown."""
    if seconds is None:
        return ""
    if seconds < 90:
        return f"about {max(seconds, 1):.0f} s left"
    return f"about {seconds / 60:.0f} min left" if seconds < 5400 else f"about {seconds / 3600:.1f} h left"
