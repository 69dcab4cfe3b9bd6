"""The judge instruments on the corpora with a scripted judge: the stance judge's and the voice judge's answers become
labels the corpus figures count, what the user answers is described to the stance judge, and a failed call costs its
item, not the measurement."""

import json

from backends.config import ROLES
from backends.llm.errors import LLMTimeout
from backends.llm.fake import ScriptedLLM
from evaluation.simfidelity.corpus import (
    judge_stance_of,
    judge_voice_of,
    load_corpus,
    measure_persona_judge,
    measure_stance,
)
from testkit.workspace import make_workspace


def test_a_scripted_stance_judge_is_measured_like_the_rules(tmp_path):
    ws = make_workspace(tmp_path / "pal")
    fake = ScriptedLLM(lambda req: json.dumps({"reason": "r", "stance": "reject"}))
    items = [i for i in load_corpus("stance") if i.split == "dev"][:6]
    scores = measure_stance(items, judge_stance_of(ws.llm(providers=dict.fromkeys(ROLES, fake))), "judge", ("dev",))
    assert sum(s.n for s in scores) == 6
    for s in scores:  # always "reject": its recall of rejections is 1 where there are any, its accuracy their share
        assert s.accuracy == sum(i.label == "reject" for i in items if i.language == s.language) / s.n
    asked = [r.messages[-1].content for r in fake.requests]
    assert any("proposed a solution" in a or "guessed" in a for a in asked)


def test_the_voice_judge_labels_in_and_out_and_a_failed_call_is_a_miss(tmp_path):
    ws = make_workspace(tmp_path / "pal")
    items = [i for i in load_corpus("persona") if i.split == "test" and i.language == "en"]

    def reply(req):
        if items[0].text in req.messages[-1].content:
            raise LLMTimeout("slow")  # every try of the first item
        return json.dumps({"reason": "r", "speaker": "assistant"})

    llm = ws.llm(providers=dict.fromkeys(ROLES, ScriptedLLM(reply)))
    (s,) = measure_persona_judge(items, judge_voice_of(llm), "judge", ("test",))
    assert s.n == len(items) and s.confusion[items[0].label].get("invalid") == 1
    said_out = sum(row.get("out", 0) for row in s.confusion.values())
    assert said_out == len(items) - 1  # "assistant" is "out" for every other item
