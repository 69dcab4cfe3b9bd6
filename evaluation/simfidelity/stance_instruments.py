"""The text-reading stance instruments, registered once: what reads a user turn's stance where nobody structured it
(the dataset's own turns, reference or external simulators, a simulator's words beside its decision).

- ``rule``: the stance rules (:mod:`sim.stance`), which also guard the simulator while it generates;
- ``learned``: a logistic regression over sentence embeddings fitted on the stance corpus's dev split
  (:mod:`.learned`);
- ``cascade``: the rules' verdict where they find one, the learned model's where they find none;
- ``judge``: the judge role's model (:func:`.judges.judge_stance`), one call per turn.

``SimFidelityConfig.classifier``, ``pal simulate fidelity --classifier``, ``pal simulate corpus --classifier`` and the
Evaluate page take their choices from here. Which one to trust is measured on the corpus's held-out split
(``bench/stance_corpus.py``, FIDELITY.md), never assumed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StanceInstrument:
    name: str
    label: str
    description: str  # one sentence: CLI help, the page's caption
    needs_judge: bool = False  # an LLM call per turn (the judge role)
    needs_embedder: bool = False  # the workspace's mixed-language embedder, and a fit on the corpus's dev split


STANCE_INSTRUMENTS: tuple[StanceInstrument, ...] = (
    StanceInstrument("rule", "rules", "the stance rules of sim/rules/stance.<language>.toml (the simulator's guard)"),
    StanceInstrument("learned", "learned", "logistic regression over sentence embeddings, fitted on the stance "
                     "corpus's dev split only", needs_embedder=True),
    StanceInstrument("cascade", "rules, then learned", "the rules' verdict where they find one, the learned "
                     "instrument's where they find none", needs_embedder=True),
    StanceInstrument("judge", "judge", "the judge role's model, one call per turn", needs_judge=True),
)
INSTRUMENTS: dict[str, StanceInstrument] = {i.name: i for i in STANCE_INSTRUMENTS}
INSTRUMENT_NAMES: tuple[str, ...] = tuple(INSTRUMENTS)
