"""A synthesis step whose call timed out asks again once, patiently, keeping the calls it finished."""

from __future__ import annotations

from backends.llm.errors import LLMTimeout
from tests.synth.fakes import SchemaLLM


class TimesOut(SchemaLLM):
    """A valid answer to every request but the n-th of one reply model, which times out ``times`` times."""

    def __init__(self, model: str, n: int, times: int):
        super().__init__()
        self.model, self.n, self.times = model, n, times

    def _reply(self, req) -> str:
        name = req.response_format["json_schema"]["name"]
        if name == self.model and self.seen.get(name, 0) + 1 == self.n and self.times > 0:
            self.times -= 1
            self.seen[name] = self.seen.get(name, 0)  # not counted: the same call is asked again
            raise LLMTimeout("fake: no answer within 12 s")
        return super()._reply(req)


def test_a_step_that_timed_out_once_is_asked_again_with_a_longer_deadline(make_pipeline):
    fake = TimesOut("SituationLogsReply", n=2, times=1)
    pipe = make_pipeline(llm_fake=fake)
    info = pipe.run()
    assert info.status == "finished", info.error
    logs = [r for r in fake.requests if r.response_format["json_schema"]["name"] == "SituationLogsReply"]
    timed_out = logs[1]
    assert logs[2].timeout > timed_out.timeout  # the retry's deadline is longer…
    assert "second try" in (logs[2].deadline_note or "")
    assert len(logs) == len(pipe.output("situations").situations) + 1  # …and the first finished call was kept


def test_a_step_that_times_out_twice_fails_and_the_next_run_resumes(make_pipeline):
    fake = TimesOut("SituationLogsReply", n=2, times=2)
    info = make_pipeline(llm_fake=fake).run()
    assert info.status == "failed" and "no answer within" in (info.error or "")
    info = make_pipeline(llm_fake=fake).run()
    assert info.status == "finished"
