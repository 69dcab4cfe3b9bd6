"""The capability probes of the connection check, with scripted endpoints."""

import json

from backends.llm.check import check_role
from backends.llm.fake import ScriptedLLM
from backends.llm.probes import probe_seed


def seeded(vary_with_seed: bool, honour: bool):
    calls = iter(range(1000))

    def reply(req):
        if "Invent a name" in req.messages[-1].content:
            return f"colour {req.seed if honour else next(calls)}" if vary_with_seed else "always the same"
        if req.response_format or "JSON" in req.messages[0].content:
            return json.dumps({"city": "Paris", "country": "France", "continent": "Europe"})
        return "hello there"

    return reply


def test_seed_verdicts(make_client):
    assert probe_seed(make_client({"judge": ScriptedLLM(seeded(True, True))}), "judge")[0] == "honoured"
    assert probe_seed(make_client({"judge": ScriptedLLM(seeded(True, False))}), "judge")[0] == "ignored"
    assert probe_seed(make_client({"judge": ScriptedLLM(seeded(False, True))}), "judge")[0] == "unclear"


def test_a_full_check_reports_and_remembers_every_capability(make_client):
    client = make_client({"judge": ScriptedLLM(seeded(True, True), window=8192)})
    report = check_role(client, "judge")
    assert report.ok and report.structured_mode == "json_schema"
    assert report.modes == dict.fromkeys(("json_schema", "json_schema_strict", "json_object", "prompt"), "ok")
    assert report.streaming and report.seed == "honoured" and report.context_window == 8192
    text = "\n".join(report.lines())
    assert "context window: 8,192 tokens (scripted)" in text and "seed: honoured" in text
    caps = client.store.capabilities.get("fake://scripted", client.config.role("judge").model)
    assert caps.seed_honoured is True and caps.streaming is True and caps.structured_mode == "json_schema"
    assert caps.modes["json_object"] == "ok" and caps.checked_at
