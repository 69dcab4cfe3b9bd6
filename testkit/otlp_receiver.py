"""An OTLP gRPC trace receiver on 127.0.0.1: the collector's side of the protocol (``TraceService/Export``), keeping
every span it was sent, so a test reads back exactly what a Langfuse or Phoenix collector would receive."""

from __future__ import annotations

import threading
from concurrent import futures
from types import TracebackType

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanPb


class _Service(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, sink: OtlpReceiver):
        self.sink = sink

    def Export(self, request, context):  # the generated gRPC method name
        with self.sink.lock:
            for resource_spans in request.resource_spans:
                service = next((a.value.string_value for a in resource_spans.resource.attributes
                                if a.key == "service.name"), "")
                for scope in resource_spans.scope_spans:
                    self.sink.spans.extend((service, s) for s in scope.spans)
        return trace_service_pb2.ExportTraceServiceResponse()


class OtlpReceiver:
    """``with OtlpReceiver() as r:`` — ``r.endpoint`` to send to, ``r.spans`` (service name, span) received."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, SpanPb]] = []
        self.lock = threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Service(self), self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> OtlpReceiver:
        self.server.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.server.stop(grace=None)


def attributes(span: SpanPb) -> dict[str, object]:
    """A received span's attributes as plain values."""
    out: dict[str, object] = {}
    for a in span.attributes:
        field = a.value.WhichOneof("value")
        out[a.key] = getattr(a.value, field) if field else None
    return out
