"""Work whose call timed out asks again once, with longer deadlines, before it fails.

A call's deadline comes from what it needs at the endpoint's measured speed (:mod:`backends.llm.deadline`); when it
is missed anyway the machine got busier than when it was measured (the rates are measured again:
:meth:`backends.llm.rates.RateBook.outdated`). A unit, a synthesis step or a memory build stage then runs once more
through a patient view of its client (:meth:`backends.llm.client.LLMClient.patient`): every call gets
:data:`~backends.llm.deadline.PATIENT_FACTOR` × its deadline. The work is resumable (finished calls of a step,
finished stages are stored), so the second run asks only what the first did not finish; a second timeout fails
the work, and the next run of the job resumes from there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol, TypeVar

from backends.llm.deadline import PATIENT_FACTOR
from backends.llm.errors import LLMTimeout

log = logging.getLogger(__name__)
T = TypeVar("T")
C = TypeVar("C", bound="Patient")


class Patient(Protocol):
    """What :func:`again_on_timeout` needs of :class:`backends.llm.client.LLMClient`."""

    patience: float

    def patient(self: C, factor: float = PATIENT_FACTOR) -> C: ...


def again_on_timeout(llm: C | None, work: Callable[[C | None], T], what: str) -> T:
    """``work(llm)``; when a call in it times out, ``work(llm.patient())`` once (unless ``llm`` is patient already
    or absent), logged with ``what`` (e.g. "generation gen-1a2b step situations"). A timeout of the second try
    is raised marked ``after_patience``, so the unit around it does not ask a third time."""
    try:
        return work(llm)
    except LLMTimeout as e:
        if llm is None or llm.patience > 1:
            raise
        log.warning("%s: a call timed out (%s); asking again once with %g× the deadline", what, e, PATIENT_FACTOR)
    try:
        return work(llm.patient())
    except LLMTimeout as e:
        e.after_patience = True  # read by the job engine (jobs.units.run_patiently): not asked a third time
        raise
