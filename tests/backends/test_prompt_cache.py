"""What an endpoint's prompt cache served, kept with every call (run store, totals, a live meter), over real HTTP to
a fake N-slot server that reports it as llama.cpp and vLLM do; the bundled provider asks llama.cpp to keep prompts."""

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from backends.config import LocalServerConfig
from backends.llm.local import LocalProvider
from backends.llm.local_server import LocalServers
from backends.llm.meter import CallMeter, MeterReading
from testkit.fault_server import FaultServer, completion, serving
from testkit.slot_server import SlotServer
from testkit.workspace import make_workspace

STORY = "The user works night shifts at the hospital and sleeps badly in the mornings. " * 20


@pytest.fixture
def slot_server():
    server = SlotServer(latency=0.2, slots=2)
    with serving(server.httpd):
        yield server


def workspace(tmp_path, server, **secrets):
    return make_workspace(tmp_path / "pal", secrets=secrets, env={
        "PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_BASE_URL": server.base_url, "PAL_DEFAULT_MODEL": "slot-model"})


def ask(llm, tail: str, **kw):
    return llm.chat("assistant", [{"role": "user", "content": f"{STORY}\nQuestion: {tail}"}], **kw)


def test_each_call_record_keeps_cached_and_processed_prompt_tokens(tmp_path, slot_server):
    ws = workspace(tmp_path, slot_server)
    llm = ws.llm(session_id="s")
    first, second = ask(llm, "what helps?"), ask(llm, "what else could help?")
    ask(llm, "what helps?")  # the same request again: answered from the response cache, nothing sent
    assert first.tokens_cached == 0 and second.tokens_cached > 0.8 * second.tokens_in
    rows = list(reversed(ws.runs.calls("s")))
    assert [(r["tokens_cached"], r["tokens_processed"]) for r in rows] == [
        (0, first.tokens_in), (second.tokens_cached, second.tokens_in - second.tokens_cached), (None, None)]
    totals = ws.runs.totals("s")
    assert totals.tokens_reported == first.tokens_in + second.tokens_in  # the response-cache hit sent nothing
    assert totals.cached_share == pytest.approx(second.tokens_cached / (first.tokens_in + second.tokens_in))


def test_a_metered_view_shows_calls_in_flight_and_the_cached_share(tmp_path, slot_server):
    ws = workspace(tmp_path, slot_server, limits={slot_server.base_url: {"concurrency": 2}})
    meter, seen = CallMeter(), []
    meter.watch(seen.append)
    llm = ws.llm().metered(meter)
    llm.fan_out("assistant", lambda i: ask(llm, f"idea {i}?"), range(4))
    ask(llm, "idea 0?")  # a response-cache hit
    reading = meter.reading()
    assert (reading.in_flight, reading.sent, reading.hits) == (0, 4, 1)
    assert max(r.in_flight for r in seen) == 2  # two slots: two calls in flight together
    assert 0 < reading.cached_share < 1 and reading.tokens_reported == reading.tokens_in
    assert "0 calls in flight · 4 sent · 1 from the response cache" in reading.line()
    assert "prompt tokens from the server's cache" in reading.line()
    assert MeterReading().line() == "0 calls in flight · 0 sent"  # nothing reported: no share claimed


def answer(body: dict, text: str) -> tuple[int, dict, bytes]:
    """``text`` as a completion, streamed when asked (the bundled provider reads every answer as a stream)."""
    if not body.get("stream"):
        return 200, {"content-type": "application/json"}, json.dumps(completion(text)).encode()
    chunks = [{"choices": [{"index": 0, "delta": {"content": text}}]},
              {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
              {"choices": [], "usage": completion(text)["usage"]}]
    events = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return 200, {"content-type": "text/event-stream"}, events.encode()


def calibrating(body: dict) -> bool:
    """A request measuring the server's speed (backends.llm.rates), not one of the test's calls."""
    return body.get("max_tokens") == 1 or bool(body.get("ignore_eos"))


def test_the_bundled_provider_asks_llama_cpp_to_keep_its_prompt(tmp_path):
    bodies: list[dict] = []

    def respond(body):
        if "messages" in body and not calibrating(body):  # not the tokenizer's /tokenize
            bodies.append(body)
        return answer(body, "fine")

    with FaultServer(default=respond).running() as fake:
        provider = LocalProvider(LocalServerConfig(parallel=3), LocalServers(tmp_path / "ls"))
        provider.server.ensure = lambda: fake.base_url  # the HTTP path only; no model is started
        ws = make_workspace(tmp_path / "pal", providers={"assistant": provider})
        llm = ws.llm()
        llm.chat("assistant", [{"role": "user", "content": "hello"}])
        assert llm.chat("assistant", [{"role": "user", "content": "hello"}]).cache_hit  # response cache key unchanged
        assert llm.width("assistant") == 3
    assert len(bodies) == 1 and bodies[0]["cache_prompt"] is True and bodies[0]["model"] == provider.server.alias


def test_calls_in_flight_never_exceed_the_bundled_servers_slots(tmp_path):
    """Requests beyond the bundled server's ``parallel`` wait in the limiter, not in the server's queue."""
    lock, now, most = threading.Lock(), [0], [0]

    def respond(body):
        if "messages" not in body:  # the tokenizer's /tokenize
            return 200, {"content-type": "application/json"}, b'{"tokens": [1, 2]}'
        if calibrating(body):  # measuring the server's speed, once, before the calls
            return answer(body, "fine")
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        threading.Event().wait(0.05)
        with lock:
            now[0] -= 1
        return answer(body, "fine")

    with FaultServer(default=respond).running() as fake:
        provider = LocalProvider(LocalServerConfig(parallel=2), LocalServers(tmp_path / "ls"))
        provider.server.ensure = lambda: fake.base_url
        llm = make_workspace(tmp_path / "pal", providers={"assistant": provider}).llm()
        with ThreadPoolExecutor(6) as pool:
            list(pool.map(lambda i: llm.chat("assistant", [{"role": "user", "content": f"q{i}"}]), range(6)))
    assert most[0] == 2
