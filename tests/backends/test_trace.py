"""A trace files each recorded call under the step that made it, sums what it cost, filters, and travels as
OpenTelemetry spans to a real OTLP gRPC receiver."""

from __future__ import annotations

import pytest

from backends.trace import CallSpan, Span, Step, TraceFilter, assemble, call_span, filtered, trace_kind
from backends.trace_otlp import export_trace, grpc_exporter, otlp_endpoint
from testkit.otlp_receiver import OtlpReceiver, attributes


def row(i: int, role: str, end: float, **kw) -> dict:
    base = {"id": i, "ts": end, "role": role, "provider": "fake", "model": "m", "latency_ms": 500.0,
            "tokens_in": 100, "tokens_out": 10, "tokens_cached": None, "attempts": 1, "cache_hit": 0,
            "structured_ok": None, "error": None, "prompt_name": f"p/{role}", "prompt_version": "1"}
    return base | kw


def two_turns() -> list[Step]:
    def side(side: str, role: str, end: float) -> Step:
        return Step(key=side, kind="side", name=side, end=end, roles=frozenset({role}))

    return [Step(key=f"turn{n}", kind="turn", name=f"turn {n}", end=base + 2,
                 steps=[side("user", "user_simulator", base + 1), side("assistant", "assistant", base + 2)])
            for n, base in ((1, 10.0), (2, 20.0))]


def calls(rows: list[dict], cost=None) -> list[CallSpan]:
    return [call_span(r, cost) for r in rows]


def test_each_call_goes_under_the_step_of_its_role_stored_next_and_late_calls_stay_at_the_root():
    rows = [row(1, "user_simulator", 10.9), row(2, "assistant", 11.5), row(3, "assistant", 11.9),
            row(4, "memory_builder", 11.0), row(5, "user_simulator", 20.5), row(6, "assistant", 21.9),
            row(7, "assistant", 25.0)]  # 7: after every step (a turn still running)
    root = assemble(Span(span_id="r", kind="simulation", name="run"), two_turns(), calls(rows))
    turn1, turn2 = root.children
    assert [c.call_id for c in turn1.children[0].calls] == [1]
    assert [c.call_id for c in turn1.children[1].calls] == [2, 3]
    assert [c.call_id for c in turn1.calls] == [4]  # no side of its role: the turn holding it
    assert [c.call_id for c in turn2.children[0].calls] == [5] and [c.call_id for c in turn2.children[1].calls] == [6]
    assert [c.call_id for c in root.calls] == [7]
    assert sorted(c.call_id for c in root.all_calls()) == [r["id"] for r in rows]  # nothing lost, nothing twice
    assert turn1.start == pytest.approx(10.4) and turn1.end == 12.0  # first call's start, stored time
    assert root.end == 25.0


def test_totals_price_each_call_and_say_unpriced_rather_than_zero():
    rows = [row(1, "judge", 1.0, tokens_cached=60), row(2, "judge", 2.0, model="hosted")]
    priced = calls(rows, cost=lambda model, tin, tout: 0.0 if model == "m" else None)
    root = assemble(Span(span_id="j", kind="judgment", name="j"), [], priced)
    t = root.totals
    assert (t.calls, t.tokens_in, t.tokens_out, t.tokens_cached) == (2, 200, 20, 60)
    assert t.cached_share == pytest.approx(0.6)  # only the call that said what its cache served
    assert t.cost_usd is None  # one call has no price
    cheap = assemble(Span(span_id="j", kind="judgment", name="j"), [],
                     calls(rows, cost=lambda model, tin, tout: tin * 1e-6))
    assert cheap.totals.cost_usd == pytest.approx(200e-6)


def test_a_filter_keeps_matching_calls_and_only_the_steps_holding_them():
    rows = [row(1, "user_simulator", 10.9), row(2, "assistant", 11.5, error="timeout after 60 s"),
            row(3, "assistant", 21.0, attempts=3)]
    steps = two_turns()
    steps[0].steps[0].retry_reasons = ["spoke as the assistant"]
    root = assemble(Span(span_id="r", kind="simulation", name="run"), steps, calls(rows))
    failed = filtered(root, TraceFilter(errors_only=True))
    assert [c.call_id for c in failed.all_calls()] == [2] and [s.name for s in failed.children] == ["turn 1"]
    retried = filtered(root, TraceFilter(retried_only=True))
    assert sorted(c.call_id for c in retried.all_calls()) == [1, 3]  # a step's rule, or transport attempts
    assert [c.call_id for c in filtered(root, TraceFilter(text="TIMEOUT")).all_calls()] == [2]
    assert [c.call_id for c in filtered(root, TraceFilter(text="spoke as")).all_calls()] == [1]
    assert filtered(root, TraceFilter(roles=["judge"])).all_calls() == []
    assert len(root.all_calls()) == 3  # filtering copies; the tree itself is untouched


def test_a_steps_without_time_claims_no_call_and_shows_unless_a_filter_asks_for_calls():
    steps = [Step(key="order1", kind="order", name="order 1", end=5.0, claims=False)]
    root = assemble(Span(span_id="j", kind="judgment", name="j"), steps, calls([row(1, "judge", 4.0)]))
    assert [c.call_id for c in root.calls] == [1] and root.children[0].calls == []
    assert [s.name for s in filtered(root, TraceFilter()).children] == ["order 1"]
    assert filtered(root, TraceFilter(roles=["judge"])).children == []


def test_the_kind_of_a_run_follows_its_calls_roles():
    assert trace_kind("jdg-1", []) == "judgment"
    assert trace_kind("h2memory-1", ["memory_builder"]) == "build"
    assert trace_kind("run-1", ["assistant", "user_simulator"]) == "simulation"
    assert trace_kind("synth-1", ["synthesizer"]) == "run"


def test_otlp_export_delivers_every_span_with_its_parent_times_and_genai_attributes():
    rows = [row(1, "user_simulator", 10.9, tokens_cached=40), row(2, "assistant", 11.5, error="boom"),
            row(3, "assistant", 30.0)]
    steps = two_turns()
    steps[0].steps[0].retry_reasons = ["spoke as the assistant"]
    root = assemble(Span(span_id="run-x", kind="simulation", name="simulation", attrs={"run_id": "run-x"}),
                    steps, calls(rows, cost=lambda *_: 0.0))
    with OtlpReceiver() as receiver:
        sent = export_trace(root, grpc_exporter(receiver.endpoint))
    spans = [s for _, s in receiver.spans]
    n_steps = sum(1 for _ in root.walk())
    assert sent == len(spans) == n_steps + len(rows)
    assert {service for service, _ in receiver.spans} == {"pal-studio"}
    assert len({s.trace_id for s in spans}) == 1  # one trace per run
    by_id = {s.span_id: s for s in spans}
    roots = [s for s in spans if not s.parent_span_id]
    assert [s.name for s in roots] == ["simulation"]
    chat = [s for s in spans if s.name.startswith("chat ")]
    assert len(chat) == 3
    first = next(s for s in chat if attributes(s)["pal.call_id"] == 1)
    a = attributes(first)
    assert (a["gen_ai.request.model"], a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"],
            a["pal.tokens_cached"], a["pal.role"]) == ("m", 100, 10, 40, "user_simulator")
    assert (first.start_time_unix_nano, first.end_time_unix_nano) == (int(10.4 * 1e9), int(10.9 * 1e9))
    assert by_id[first.parent_span_id].name == "user"
    assert attributes(by_id[first.parent_span_id])["pal.asked_again_because"] == "spoke as the assistant"
    failed = next(s for s in chat if attributes(s)["pal.call_id"] == 2)
    assert failed.status.code == 2 and failed.status.message == "boom"  # STATUS_CODE_ERROR
    late = next(s for s in chat if attributes(s)["pal.call_id"] == 3)
    assert by_id[late.parent_span_id].name == "simulation"


def test_export_is_off_unless_an_endpoint_is_configured():
    assert otlp_endpoint({}) is None and otlp_endpoint({"PAL_OTLP_ENDPOINT": "  "}) is None
    assert otlp_endpoint({"PAL_OTLP_ENDPOINT": "http://collector:4317"}) == "http://collector:4317"


def test_an_unreachable_collector_is_an_error_naming_the_run_not_a_silent_drop():
    root = Span(span_id="run-y", kind="run", name="y", start=1.0, end=2.0)
    with OtlpReceiver() as receiver:
        endpoint = receiver.endpoint
    with pytest.raises(RuntimeError, match="run-y"):
        export_trace(root, grpc_exporter(endpoint, timeout_s=1))
