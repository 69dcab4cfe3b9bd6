"""A GGUF model file's header and what a llama.cpp server of it needs in memory.

:func:`read_gguf_header` reads only the header (metadata and tensor table, never the weights): it refuses a file
that is not GGUF, of an unknown version or cut short, and returns the facts the memory estimate needs
(:class:`GGUFInfo`). :func:`estimate_memory` and :func:`check_memory` refuse a server that would not fit in the
memory available now. Every refusal is a :class:`ModelUnavailable` naming the file and what to do.
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, ConfigDict

from backends.llm.errors import EndpointUnavailable

log = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"


class ModelUnavailable(EndpointUnavailable):
    """A local model cannot be served: missing or damaged part, wrong sha256, not GGUF, too big for memory."""

    retryable = False


# ---------------------------------------------------------------------------------------------------- GGUF header

_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
REPACKED_TYPES = {2, 12, 20}  # GGML Q4_0, Q4_K, IQ4_NL: repacked into anonymous memory on x86 CPUs
# what the server's size estimate needs from the metadata ({arch} is general.architecture)
_WANTED = ("block_count", "embedding_length", "attention.head_count", "attention.head_count_kv",
           "attention.key_length", "attention.value_length", "context_length", "vocab_size")


class GGUFInfo(BaseModel):
    """What a GGUF header says, enough to check the file is whole and to estimate the server's memory."""

    model_config = ConfigDict(extra="forbid")

    version: int
    architecture: str | None = None
    name: str | None = None
    tensors: int
    params: int  # elements of every tensor
    data_end: int  # bytes the file must have at least: the data section's end as its tensors place it
    n_layer: int | None = None
    n_embd: int | None = None
    n_head: int | None = None
    n_head_kv: int | None = None
    key_length: int | None = None
    value_length: int | None = None
    context_length: int | None = None
    n_vocab: int | None = None
    repacked: int = 0  # bytes of tensors llama.cpp's CPU backend copies into its own layout (Q4_0, Q4_K, IQ4_NL)

    def kv_bytes_per_token(self) -> int | None:
        """f16 keys and values of every layer for one token (llama.cpp's default cache type)."""
        if not (self.n_layer and self.n_embd and self.n_head):
            return None
        head_kv = self.n_head_kv or self.n_head
        k = self.key_length or self.n_embd // self.n_head
        v = self.value_length or self.n_embd // self.n_head
        return self.n_layer * head_kv * (k + v) * 2


class _Reader:
    def __init__(self, f: IO[bytes], path: Path):
        self.f, self.path = f, path

    def read(self, n: int) -> bytes:
        data = self.f.read(n)
        if len(data) != n:
            raise ModelUnavailable(f"{self.path} is truncated: its GGUF header ends early (at byte {self.f.tell():,})")
        return data

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.read(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        return self.read(self.unpack("<Q")).decode("utf-8", errors="replace")

    def value(self, kind: int) -> Any:
        if kind in _SCALAR:
            return self.unpack(_SCALAR[kind])
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item, count = self.unpack("<I"), self.unpack("<Q")
            if item in _SCALAR:
                self.read(struct.calcsize(_SCALAR[item]) * count)
            else:
                for _ in range(count):
                    self.value(item)
            return count  # only an array's length is wanted (the vocabulary's size)
        raise ModelUnavailable(f"{self.path}: unknown GGUF value type {kind} (a damaged or newer file)")


def _tensor_bytes(kind: int, elements: int) -> int | None:
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    try:
        block, size = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
    except (ValueError, KeyError):
        return None  # a type this gguf package does not know: the file's end is not checked for this tensor
    return elements // block * size


def read_gguf_header(path: Path) -> GGUFInfo:
    """Parse ``path``'s GGUF header; :class:`ModelUnavailable` when it is not GGUF or is cut short."""
    try:
        size = path.stat().st_size
        f = path.open("rb")
    except OSError as e:
        raise ModelUnavailable(f"model file {path} cannot be read: {e.strerror or e}") from None
    with f:
        magic = f.read(4)
        if magic != GGUF_MAGIC:
            raise ModelUnavailable(f"{path} is not a GGUF model file (it starts with {magic!r}, not {GGUF_MAGIC!r}); "
                                   f"llama.cpp serves GGUF files only")
        r = _Reader(f, path)
        version = r.unpack("<I")
        if version not in (2, 3):
            raise ModelUnavailable(f"{path}: GGUF version {version} is not supported (2 or 3)")
        n_tensors, n_kv = r.unpack("<Q"), r.unpack("<Q")
        meta: dict[str, Any] = {}
        for _ in range(n_kv):
            key = r.string()
            meta[key] = r.value(r.unpack("<I"))
        tensors: list[tuple[int, int, int]] = []
        for _ in range(n_tensors):
            r.string()
            dims = [r.unpack("<Q") for _ in range(r.unpack("<I"))]
            kind, offset = r.unpack("<I"), r.unpack("<Q")
            elements = 1
            for d in dims:
                elements *= d
            tensors.append((kind, offset, elements))
        alignment = int(meta.get("general.alignment", 32)) or 32
        start = -(-f.tell() // alignment) * alignment
    sizes = [(kind, offset, _tensor_bytes(kind, elements)) for kind, offset, elements in tensors]
    ends = [offset + nbytes for _, offset, nbytes in sizes if nbytes is not None]
    arch = meta.get("general.architecture")
    facts = {name: meta.get(f"{arch}.{name}") for name in _WANTED}
    info = GGUFInfo(version=version, architecture=arch, name=meta.get("general.name"), tensors=n_tensors,
                    params=sum(e for _, _, e in tensors), data_end=start + max(ends, default=0),
                    n_layer=facts["block_count"], n_embd=facts["embedding_length"],
                    n_head=facts["attention.head_count"], n_head_kv=facts["attention.head_count_kv"],
                    key_length=facts["attention.key_length"], value_length=facts["attention.value_length"],
                    context_length=facts["context_length"],
                    n_vocab=facts["vocab_size"] or meta.get("tokenizer.ggml.tokens"),
                    repacked=sum(n for kind, _, n in sizes if n is not None and kind in REPACKED_TYPES))
    if size < info.data_end:
        raise ModelUnavailable(f"{path} is truncated: {size:,} bytes, but its header places tensor data up to byte "
                               f"{info.data_end:,} (a partial download or copy)")
    return info


def header_is_current(facts: dict[str, Any] | None) -> bool:
    """Whether remembered header facts have every field this version reads (else the header is read again)."""
    return facts is not None and set(facts) == set(GGUFInfo.model_fields)


# ---------------------------------------------------------------------------------------------------------- memory

# Beyond weights, repacked copies and KV cache: llama.cpp's compute buffers (which grow with the vocabulary and the
# slots) and the process itself. Calibrated on measured RSS (bench/local_threads.py): the estimate is 9-20 % above
# it for Qwen2.5-Coder-0.5B (689 MiB at ctx 4096 × 1 slot, 853 MiB at 8192 × 2), Qwen2.5-Coder-1.5B (1,965 MiB at
# 4096 × 1: 722 MiB of Q4_K weights are repacked) and SmolLM2-135M (274 MiB at 4096 × 1).
WORK_BUFFER = 96 * 2**20
COMPUTE_PER_VOCAB_SLOT = 1024  # bytes per vocabulary entry and slot
MiB = 2**20


class MemoryEstimate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    weights: int
    repacked: int
    kv_cache: int
    compute: int
    work: int

    @property
    def total(self) -> int:
        return self.weights + self.repacked + self.kv_cache + self.compute + self.work

    def text(self, ctx: int) -> str:
        repacked = f" + repacked weights {self.repacked / MiB:,.0f} MiB" if self.repacked else ""
        return (f"about {self.total / MiB:,.0f} MiB (weights {self.weights / MiB:,.0f} MiB{repacked} + KV cache "
                f"{self.kv_cache / MiB:,.0f} MiB for {ctx:,} tokens + compute buffers {self.compute / MiB:,.0f} MiB + "
                f"process {self.work / MiB:,.0f} MiB)")


def estimate_memory(size: int, info: GGUFInfo, ctx: int, parallel: int = 1) -> MemoryEstimate:
    """What a llama.cpp server of this file needs resident: the weights (mmapped, all touched) and the copies it
    repacks, the f16 KV cache of ``ctx`` tokens (shared by its slots), compute buffers per slot and the process
    (see ``WORK_BUFFER``)."""
    per_token = info.kv_bytes_per_token() or 0
    return MemoryEstimate(weights=size, repacked=info.repacked, kv_cache=per_token * ctx,
                          compute=(info.n_vocab or 0) * COMPUTE_PER_VOCAB_SLOT * parallel, work=WORK_BUFFER)


def available_memory() -> int | None:
    """``MemAvailable`` from /proc/meminfo in bytes (None where there is none)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError) as e:
        log.info("MemAvailable unknown (%s): the memory check is skipped", e)
    return None


def check_memory(name: str, estimate: MemoryEstimate, ctx: int, available: int | None) -> None:
    """Refuse a server that would not fit in the memory available now, with the figures."""
    if available is None or estimate.total <= available:
        return
    raise ModelUnavailable(f"{name} does not fit in memory: it needs {estimate.text(ctx)}, and {available / MiB:,.0f} "
                           f"MiB are available (MemAvailable). Lower [local] ctx, stop other programs, choose a smaller "
                           f"model, or set [local] check_memory = false to try anyway")
