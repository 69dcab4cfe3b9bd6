"""Sensitive data never reaches memory or a prompt; "please forget" is honoured by every method."""

import pytest

from memory.methods import METHODS
from memory.privacy import find_forget_requests, mentions, redact
from memory.store import dialogue_stage
from testkit.h2_fake import h2_reply
from tests.memory.privacy_corpus import cases, fragments

SECRETS = ["+44 7700 900123", "megan.ash@gmail.com", "4111 1111 1111 1111", "sk-proj-abcdefghijklmnop1234"]


@pytest.mark.parametrize(("text", "kinds"), [
    ("Call +44 7700 900123 or mail megan.ash@gmail.com", {"PHONE", "EMAIL"}),
    ("card 4111 1111 1111 1111, key sk-proj-abcdefghijklmnop1234", {"CARD_NUMBER", "API_KEY"}),
    ("Passport number X12345678, SSN 123-45-6789", {"ID_NUMBER"}),
    ("I live at 221 Baker Street, Apt 4B", {"ADDRESS"}),
    ("我的手机号是13812345678，身份证号110101199003071234", {"PHONE", "ID_NUMBER"}),
    ("IBAN GB29 NWBK 6016 1331 9268 19", {"ACCOUNT_NUMBER"}),
])
def test_redaction_uses_typed_placeholders(text, kinds):
    out, found = redact(text)
    assert {f.kind for f in found} == kinds
    assert all(f"[{k}]" in out for k in kinds)


def test_ordinary_numbers_dates_and_prices_survive():
    text = "Bought 3 lb turkey for $12.99 on 2024-10-05 at 12:30, 10234 steps, order 2 of 4"
    assert redact(text)[0] == text


def test_the_demo_data_is_barely_touched(demo_dataset):
    logs = [lg.content for u in demo_dataset.users.values() for s in u.sessions for lg in s.logs]
    changed = [t for t in logs if redact(t)[1]]
    assert len(changed) / len(logs) < 0.05, changed[:10]


def _with_pii_and_forget(user):
    s0, s1 = user.sessions[0], user.sessions[1]
    s0.logs[0] = s0.logs[0].model_copy(update={"content": f"The user sent Ann a message: 'call me on {SECRETS[0]} or {SECRETS[1]}'"})
    turn = s1.turns[1]
    s1.turns[1] = turn.model_copy(update={"user": turn.user.model_copy(update={"content": f"My card is {SECRETS[2]} and my key {SECRETS[3]}"})})
    s1.turns[2] = s1.turns[2].model_copy(update={"user": s1.turns[2].user.model_copy(update={
        "content": "Please forget that I have a peanut allergy."})})
    s0.turns[0] = s0.turns[0].model_copy(update={"user": s0.turns[0].user.model_copy(update={
        "content": "I have a peanut allergy, so any snack ideas?"})})
    return user


@pytest.mark.parametrize("method", ["h2memory", "full-history", "rag-turn", "rag-session"])
def test_no_secret_reaches_memory_or_prompt_and_forget_is_honoured(build_memory, tiny_user, method):
    user = _with_pii_and_forget(tiny_user)
    reply = h2_reply if method == "h2memory" else (lambda req: "{}")
    builder, fake = build_memory(method, user, reply)
    builder.run()
    prompts = "\n".join(m.content for r in fake.requests for m in r.messages)
    items = builder.store.items_as_of(builder.build_id, dialogue_stage(3), include_forgotten=True)
    stored = "\n".join(i.text for i in items)
    for secret in SECRETS:
        assert secret not in prompts and secret not in stored
    final = builder.store.items_as_of(builder.build_id, dialogue_stage(3))
    assert not [i.id for i in final if "peanut" in i.text.lower()]
    trace = builder.retrieve("snack ideas for someone with allergies", "solution", user.query[0])
    assert "peanut" not in trace.context.lower()
    notes = [n for ns in builder.store.notes(builder.build_id).values() for n in ns]
    assert any(n.startswith("forget request (turn 3)") for n in notes)


def test_forget_requests_in_english_and_chinese():
    reqs = find_forget_requests("s", [(1, "Please forget that I am lactose intolerant."), (2, "请忘掉我离婚的事。"),
                                      (3, "I forgot my keys")])
    assert [(r.turn, r.target) for r in reqs] == [(1, "I am lactose intolerant"), (2, "离婚的事")]
    assert mentions("The user is lactose intolerant.", reqs[0]) and not mentions("Likes cheese.", reqs[0])


def test_every_registered_method_imports():
    from memory.methods import get_method_class

    for name in METHODS:
        assert get_method_class(name).name == name


# ------------------------------------------------------------------ the EN/ZH corpus

CORPUS = cases()


@pytest.mark.parametrize(("kind", "value", "text"), CORPUS, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(CORPUS)])
def test_every_placeholder_type_is_redacted_in_english_and_chinese_contexts(kind, value, text):
    out, found = redact(text)
    assert f"[{kind}]" in out, out
    for piece in fragments(value):
        assert piece not in out, (piece, out)
    context = text.replace(value, "")
    assert redact(context)[0] == context, "the context alone must not look sensitive"


@pytest.mark.parametrize("text", [
    "今天走了10234步，2024-10-05 12:30吃饭，花了¥12.99",
    "第2次，共4次；温度36.5度，血压120/80",
    "I paid 20240105 yuan? No: order 2 of 4 on 2024-10-05.",
    "会议在3楼，下午3:30开始，房间301",
])
def test_ordinary_numbers_in_chinese_and_english_survive(text):
    assert redact(text)[0] == text
