"""A memory build stage whose call timed out runs once more with longer deadlines before the build fails."""

from __future__ import annotations

import pytest

from backends.llm.errors import LLMTimeout
from tests.memory.test_memorybank import bank_llm


def timing_out(times: int, at: int):
    """The MemoryBank fake, whose ``at``-th request (1-based) times out ``times`` times in a row."""
    good, count = bank_llm(), {"n": 0, "left": times}

    def reply(req) -> str:
        count["n"] += 1
        if count["n"] >= at and count["left"] > 0:
            count["left"] -= 1
            raise LLMTimeout("fake: no answer within 12 s")
        return good(req)

    return reply


def test_a_stage_that_timed_out_runs_again_patiently(build_memory, tiny_user):
    # the client retries a timeout itself (max_retries, 4 by default); five in a row reach the stage, which asks
    # again with 2× deadlines
    builder, fake = build_memory("memorybank", tiny_user, timing_out(times=5, at=2))
    info = builder.run(until_session=1)
    assert info.stages_done == 4
    patient = [r for r in fake.requests if "second try" in (r.deadline_note or "")]
    assert patient and all(r.timeout > fake.requests[0].timeout for r in patient)
    assert builder.impl.ctx.llm is builder.llm  # the patient view was for that stage only
    assert not [r for r in fake.requests[len(fake.requests) - 2:] if "second try" in (r.deadline_note or "")]


def test_a_stage_that_keeps_timing_out_fails_and_resumes_there(build_memory, tiny_user):
    builder, _ = build_memory("memorybank", tiny_user, timing_out(times=10, at=2))
    with pytest.raises(LLMTimeout) as e:
        builder.run(until_session=1)
    assert e.value.after_patience
    done = builder.store.done_stages(builder.build_id)
    assert len(done) == 0 or max(done) < 3
    assert builder.run(until_session=1).stages_done == 4  # the next run goes on from the stage that failed
