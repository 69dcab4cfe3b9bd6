"""What a generation run is asked to make: language, months, seed user or description, random seed.

The counts default to the spec's (§2): 7–12 months are allowed by the paper, 1 month is accepted for
small and test runs; 4–6 situations per month; at least 15 logs per situation; 10 validation retries.
A run records its config, so a resumed or re-run step sees exactly the same choices.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

LAST_MONTH = (2024, 12)  # the timeline always ends 2024-12 ("today" is 2025-01-01)


class SynthConfig(BaseModel):
    """The inputs of one user's generation."""

    model_config = ConfigDict(extra="forbid")

    lang: Literal["en", "zh"] = "en"
    months: int = Field(7, ge=1, le=12)
    seed: int = 0
    seed_profile: dict | None = None  # a seed_users.json-like profile, shown as the format example
    description: str | None = Field(None, max_length=2000)  # free text: who the user should be
    situations_min: int = Field(4, ge=1, le=8)
    situations_max: int = Field(6, ge=1, le=8)
    max_topics: int = Field(3, ge=1, le=3)  # requirement ids (= dialogue topics) per situation; spec 1–3
    min_logs: int = Field(15, ge=1, le=40)
    max_logs: int = Field(25, ge=1, le=60)
    retries: int = Field(10, ge=0, le=20)  # validation retries per LLM call (spec §2.0)
    tolerable_retries: int = Field(2, ge=0, le=20)  # re-asks before a tolerable error (log times, repeated candidates) is accepted
    drop_probability: float = Field(0.4, ge=0, le=0.9)  # §2.7
    max_drops_in_a_row: int = Field(3, ge=0, le=10)

    @model_validator(mode="after")
    def _ranges(self) -> SynthConfig:
        if self.situations_min > self.situations_max:
            raise ValueError("situations_min must not exceed situations_max")
        if self.min_logs > self.max_logs:
            raise ValueError("min_logs must not exceed max_logs")
        return self

    def month_list(self) -> list[tuple[int, int]]:
        """The timeline's months, oldest first, ending 2024-12."""
        year, month = LAST_MONTH
        out = []
        for _ in range(self.months):
            out.append((year, month))
            year, month = (year, month - 1) if month > 1 else (year - 1, 12)
        return out[::-1]

    def month_key(self, year: int, month: int) -> str:
        """Timeline key: ``2024年9月`` (Chinese release) or ``2024-09``."""
        return f"{year}年{month}月" if self.lang == "zh" else f"{year}-{month:02d}"
