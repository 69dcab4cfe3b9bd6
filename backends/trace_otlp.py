"""A trace (:mod:`backends.trace`) sent as OpenTelemetry spans over OTLP, for labs that keep traces in Langfuse,
Phoenix or any OTLP collector.

Each span of the tree becomes one OpenTelemetry span with the times it has on record (nothing is re-timed), the run
id as the trace's root, and the call leaves as ``chat`` spans carrying the GenAI semantic-convention attributes
(``gen_ai.request.model``, ``gen_ai.usage.input_tokens`` / ``output_tokens``) beside the lab's own (``pal.*``: role,
prompt, cached tokens, cost, attempts, why a step was asked again). Optional: nothing is sent unless an endpoint is
named (``PAL_OTLP_ENDPOINT``, e.g. ``http://localhost:4317``, gRPC).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence

from opentelemetry import trace as otel
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Status, StatusCode

from backends.trace import CallSpan, Span

log = logging.getLogger(__name__)
ENDPOINT_ENV = "PAL_OTLP_ENDPOINT"
SERVICE = "pal-studio"
Attrs = dict[str, str | int | float | bool]


def otlp_endpoint(env: Mapping[str, str] | None = None) -> str | None:
    """The OTLP (gRPC) endpoint traces may be sent to, as configured; None: export is off."""
    value = (os.environ if env is None else env).get(ENDPOINT_ENV, "").strip()
    return value or None


def grpc_exporter(endpoint: str, timeout_s: float = 10.0) -> SpanExporter:
    """An OTLP gRPC exporter to ``endpoint`` (plain text for ``http://``, TLS for ``https://``)."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=endpoint, insecure=endpoint.startswith("http://"), timeout=timeout_s)


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def call_attributes(call: CallSpan) -> Attrs:
    attrs: Attrs = {"gen_ai.operation.name": "chat", "gen_ai.system": call.provider,
                    "gen_ai.request.model": call.model, "gen_ai.usage.input_tokens": call.tokens_in,
                    "gen_ai.usage.output_tokens": call.tokens_out, "pal.role": call.role,
                    "pal.latency_ms": call.latency_ms, "pal.attempts": call.attempts, "pal.cache_hit": call.cache_hit,
                    "pal.call_id": call.call_id}
    optional = {"pal.prompt": call.prompt_name, "pal.prompt_version": call.prompt_version,
                "pal.tokens_cached": call.tokens_cached, "pal.cost_usd": call.cost_usd,
                "pal.structured_ok": call.structured_ok, "pal.error": call.error}
    attrs.update({k: v for k, v in optional.items() if v is not None})
    return attrs


def span_attributes(span: Span) -> Attrs:
    attrs: Attrs = {"pal.kind": span.kind, "pal.span_id": span.span_id}
    attrs.update({f"pal.{k}": v for k, v in span.attrs.items() if v is not None})
    if span.retry_reasons:
        attrs["pal.asked_again_because"] = " | ".join(span.retry_reasons)
    return attrs


def export_trace(root: Span, exporter: SpanExporter, service: str = SERVICE) -> int:
    """Send the whole tree through ``exporter`` in one request (one OpenTelemetry trace); how many spans were sent.
    The exporter is shut down afterwards; an endpoint that refuses or cannot be reached raises ``RuntimeError``."""
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    kept = _Kept()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    try:
        _emit(provider.get_tracer("pal.trace"), root, None)
    finally:
        provider.shutdown()
    try:
        result = exporter.export(kept.spans)
    finally:
        exporter.shutdown()
    if result != SpanExportResult.SUCCESS:
        log.warning("OTLP export of %d span(s) of %s failed: %s", len(kept.spans), root.span_id, result)
        raise RuntimeError(f"the OTLP endpoint did not take the {len(kept.spans)} span(s) of {root.span_id}")
    return len(kept.spans)


def _emit(tracer: otel.Tracer, span: Span, parent: otel.Span | None) -> None:
    ctx = otel.set_span_in_context(parent) if parent is not None else None
    start = span.start or span.end
    otel_span = tracer.start_span(span.name, context=ctx, start_time=_ns(start), attributes=span_attributes(span))
    for call in span.calls:
        child = tracer.start_span(f"chat {call.model}", context=otel.set_span_in_context(otel_span),
                                  kind=otel.SpanKind.CLIENT, start_time=_ns(call.start),
                                  attributes=call_attributes(call))
        if call.error:
            child.set_status(Status(StatusCode.ERROR, call.error[:200]))
        child.end(end_time=_ns(call.end))
    for sub in span.children:
        _emit(tracer, sub, otel_span)
    otel_span.end(end_time=_ns(max(span.end, start)))


class _Kept(SpanExporter):
    """Keeps the finished spans, so the tree goes out in one request whatever its size."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS
