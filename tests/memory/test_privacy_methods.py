"""No raw sensitive value of the EN/ZH corpus reaches a prompt, a memory item, a vector or any file under
PAL_HOME, for every registered memory method (the corpus is in :mod:`tests.memory.privacy_corpus`)."""

from __future__ import annotations

import json

import pytest

from backends.config import ROLES
from backends.llm.fake import ScriptedLLM
from memory.methods import METHODS
from memory.store import dialogue_stage
from testkit.h2_fake import h2_reply
from testkit.workspace import make_workspace
from tests.memory.privacy_corpus import VALUES, fragments
from tests.memory.test_agentic import updater
from tests.memory.test_memorybank import bank_llm
from tests.memory.test_recursum import summariser

# one text per sensitive value: against CJK characters, or inside a URL when the value has no spaces
PLACED = [f"请记下{v}谢谢" if " " in v or "(" in v or i % 2 else f"见https://example.com/u/{v}/x。"
          for vs in VALUES.values() for i, v in enumerate(vs)]
RAW = sorted({f for vs in VALUES.values() for v in vs for f in fragments(v)}, key=len, reverse=True)


def plum_reply(req) -> str:
    """PLUM's QA writer: questions that copy the user's (redacted) sentences, so a leak would reach the adapter."""
    from testkit.requests import prompt_text, schema_name

    if schema_name(req) == "NegativeTopics":
        return json.dumps({"topics": ["holiday in Spain", "car insurance"]})
    said = [line[6:] for line in prompt_text(req).splitlines() if line.startswith("user: ")][:4] or ["nothing"]
    return json.dumps({"pairs": [{"topic": "what I said", "question": "What did I say?", "answer": s[:300]}
                                 for s in said]})


REPLIES = {"h2memory": h2_reply, "agentic": updater(), "memorybank": bank_llm(), "recursum": summariser(),
           "plum": plum_reply}


def _with_corpus(user):
    """The corpus spread over the logs and user turns of every session (query session included)."""
    texts = iter(PLACED * 2)
    for session in user.sessions:
        for j, lg in enumerate(session.logs[:4]):
            session.logs[j] = lg.model_copy(update={"content": f"The user noted: {next(texts)}"})
        for j, turn in enumerate(session.turns[:4]):
            session.turns[j] = turn.model_copy(update={"user": turn.user.model_copy(update={
                "content": f"By the way, {next(texts)}"})})
    return user


@pytest.fixture
def no_training(monkeypatch):
    """PLUM's LoRA training recorded instead of run (its QA pairs are still stored and checked)."""
    from memory.methods.plum import Plum
    from memory.plum.adapter import Checkpoint, TrainRecord

    def fake_train(self, session, pairs):
        rec = TrainRecord(sample_id=session.sample_id, session_index=session.index, position=0, pairs=len(pairs),
                          steps=1, losses=[1.0], version="v1")
        return Checkpoint(folder=self.adapters.root / session.sample_id, record=rec)

    monkeypatch.setattr(Plum, "_train", fake_train)


@pytest.mark.parametrize("method", list(METHODS))
def test_no_raw_value_in_any_prompt_item_vector_or_file_under_pal_home(pal_home, tiny_user, no_training, method):
    user = _with_corpus(tiny_user)
    fake = ScriptedLLM(REPLIES.get(method, lambda req: "{}"))
    ws = make_workspace(pal_home, env={"PAL_EMBEDDER": "hash"})
    client = ws.llm(session_id="test", providers=dict.fromkeys(ROLES, fake))
    builder = ws.open_user_builder("ds", user, method, llm=client)
    vectors = builder.vectors
    builder.run()
    trace = builder.retrieve("请记下 contact details", "solution", user.query[0])
    prompts = "\n".join(m.content for r in fake.requests for m in r.messages)
    items = "\n".join(i.text for i in builder.store.items_as_of(builder.build_id, dialogue_stage(len(user.sessions)),
                                                                 include_forgotten=True))
    stored_vectors = "\n".join(str(c.get(include=["documents"])["documents"]) for c in
                               vectors._client.list_collections())
    files = b"".join(p.read_bytes() for p in pal_home.rglob("*") if p.is_file())
    for raw in RAW:
        where = [name for name, text in (("prompt", prompts), ("item", items), ("vector", stored_vectors),
                                         ("retrieval", trace.context)) if raw in text]
        assert not where, f"{raw!r} reached {where}"
        if len(raw) >= 8:  # shorter pieces occur by chance in binary files (vectors, page headers)
            assert raw.encode() not in files, f"{raw!r} is in a file under PAL_HOME"
    if method != "vanilla":  # vanilla keeps no memory and shows no logs
        seen = prompts + items + stored_vectors + trace.context
        assert any(f"[{kind}]" in seen for kind in VALUES)  # the corpus did reach the method, redacted
