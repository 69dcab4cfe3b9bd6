"""Work whose call timed out asks again once with longer deadlines (backends.llm.patience, LLMClient.patient)."""

from __future__ import annotations

import pytest

from backends.config import ROLES
from backends.llm.errors import LLMTimeout
from backends.llm.fake import ScriptedLLM
from backends.llm.patience import again_on_timeout

MSG = [{"role": "user", "content": "hi"}]


def test_a_patient_view_gives_each_call_a_longer_deadline_and_says_so(make_client):
    fake = ScriptedLLM(["a", "b"])
    client = make_client(providers=dict.fromkeys(ROLES, fake))
    client.chat("assistant", MSG, use_cache=False)
    client.patient().chat("assistant", MSG, use_cache=False)
    first, second = fake.requests
    assert second.timeout == pytest.approx(2 * first.timeout, rel=0.01)
    assert "second try" in (second.deadline_note or "") and "second try" not in (first.deadline_note or "")
    assert client.patience == 1.0  # the view is a view


def test_a_timed_out_piece_of_work_runs_once_more_patiently_then_fails_marked(make_client):
    client = make_client(providers=dict.fromkeys(ROLES, ScriptedLLM(["unused"])))
    tries: list[float] = []

    def work(llm):
        tries.append(llm.patience)
        if len(tries) == 1:
            raise LLMTimeout("no answer within 10 s")
        return "done"

    assert again_on_timeout(client, work, "a test") == "done" and tries == [1.0, 2.0]

    def always(llm):
        tries.append(llm.patience)
        raise LLMTimeout("no answer")

    tries.clear()
    with pytest.raises(LLMTimeout) as e:
        again_on_timeout(client, always, "a test")
    assert tries == [1.0, 2.0] and e.value.after_patience  # the unit around it does not ask a third time
    tries.clear()
    with pytest.raises(LLMTimeout):
        again_on_timeout(client.patient(), always, "a test")  # patient already: no further try
    assert tries == [2.0]


def test_other_errors_are_not_asked_again(make_client):
    client = make_client(providers=dict.fromkeys(ROLES, ScriptedLLM(["unused"])))
    tries = []

    def work(llm):
        tries.append(1)
        raise ValueError("a bug")

    with pytest.raises(ValueError):
        again_on_timeout(client, work, "a test")
    assert tries == [1]
