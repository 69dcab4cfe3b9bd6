"""Measure a stored build: read its per-session snapshots, reuse a stored report of exactly this memory or
compute and store one; and the reference memories' reports of a user (:mod:`evaluation.fidelity.references`),
stored beside them. Stores and the embedder come in as parameters (the composition root owns them)."""

from __future__ import annotations

import hashlib
import json
import logging

from backends.embeddings import Embedder
from backends.llm.client import LLMClient
from evaluation.fidelity.compute import Snapshot, StatementVectors, compute_fidelity
from evaluation.fidelity.references import REFERENCES, reference_snapshots
from evaluation.fidelity.store import FidelityStore
from evaluation.fidelity.types import GOLD_VERSION, METRIC_VERSION, FidelityConfig, FidelityReport
from memory.build import MemoryBuilder
from memory.store import MemoryStore, dialogue_stage
from palset.dataset import Dataset, User

log = logging.getLogger(__name__)


def load_snapshots(store: MemoryStore, build_id: str, user: User) -> list[Snapshot]:
    """The build's memory after each session's dialogue, for the leading sessions whose dialogue is ingested.

    Forgotten items are left out (a forgotten item counts as lost); edited items count as edited."""
    done = set(store.done_stages(build_id))
    out: list[Snapshot] = []
    for pos in range(len(user.sessions)):
        if dialogue_stage(pos) not in done:
            break
        out.append({i.id: i for i in store.items_as_of(build_id, dialogue_stage(pos))})
    return out


def fidelity_key(build_id: str, snapshots: list[Snapshot], embedder: str, config: FidelityConfig) -> str:
    """Names exactly what is measured: the build (the key's prefix), its snapshots (edits and forgets change
    it), embedder, settings. The hash leaves the build id out, so a bundle moved to another home re-keys a
    report by its prefix alone (:func:`rekey_fidelity`)."""
    h = hashlib.sha1(json.dumps({"e": embedder, "c": config.model_dump(), "g": GOLD_VERSION, "v": METRIC_VERSION},
                                sort_keys=True).encode())
    for snap in snapshots:
        for item_id in sorted(snap):
            h.update(snap[item_id].model_dump_json().encode())
        h.update(b"|")
    return f"fidelity-{build_id}-{h.hexdigest()[:12]}"


def rekey_fidelity(key: str, build_id: str) -> str:
    """The key of the same measurement of the same memory stored under another build id."""
    return f"fidelity-{build_id}-{key.rsplit('-', 1)[1]}"


def reference_key(dataset: str, user_id: str, reference: str, embedder: str, config: FidelityConfig, *,
                  gold_version: str = GOLD_VERSION, metric_version: str = METRIC_VERSION) -> str:
    """A reference report's key: the dataset's key (a bundle re-keys it from the imported row), user, reference,
    embedder, settings and versions (today's, or those an imported report was measured under: an older report
    must not land under the key a current one is looked up by)."""
    h = hashlib.sha1(json.dumps({"d": dataset, "u": user_id, "r": reference, "e": embedder,
                                 "c": config.model_dump(), "g": gold_version, "v": metric_version},
                                sort_keys=True).encode())
    return f"fidelity-{reference.replace(':', '-')}-{h.hexdigest()[:16]}"


def reference_reports(dataset: Dataset, dkey: str, user: User, embedder: Embedder, results: FidelityStore | None, *,
                      config: FidelityConfig | None = None, vectors: StatementVectors | None = None,
                      recompute: bool = False, names: tuple[str, ...] = tuple(REFERENCES),
                      compute: bool = True, store: bool = True) -> list[FidelityReport]:
    """The reference memories' reports of ``user``: stored ones reused; missing ones computed (unless ``compute``
    is False: a read-only presentation shows what its bundle holds) and stored (unless ``store`` is False or
    ``results`` is None). A reference that cannot be made here (no other user of the language) is left out and
    logged."""
    config = config or FidelityConfig()
    vectors = vectors or StatementVectors(embedder)
    out = []
    for name in names:
        key = reference_key(dkey, user.uid, name, embedder.name, config)
        if not recompute and results is not None and (stored := results.get(key)) is not None:
            out.append(stored)
            continue
        if not compute:
            continue
        snapshots, note = reference_snapshots(name, user, dataset)
        if not snapshots:
            log.info("reference %s for user %s not made: %s", name, user.uid, note)
            continue
        report = compute_fidelity(user, name, snapshots, embedder, config=config, dataset=dkey, vectors=vectors,
                                  stages_done=2 * len(snapshots))
        report.fidelity_key = key
        if note:
            report.scopes["reference"] = note
        if results is not None and store:
            results.save(report)
        out.append(report)
    return out


def measure_build(builder: MemoryBuilder, results: FidelityStore, *, config: FidelityConfig | None = None,
                  embedder: Embedder | None = None, recompute: bool = False,
                  vectors: StatementVectors | None = None) -> FidelityReport:
    """The fidelity report of the builder's stored memory (stored; reused when nothing changed since)."""
    config = config or FidelityConfig()
    embedder = embedder or builder.embedder
    snapshots = load_snapshots(builder.store, builder.build_id, builder.user)
    key = fidelity_key(builder.build_id, snapshots, embedder.name, config)
    if not recompute and (stored := results.get(key)) is not None:
        return stored
    report = compute_fidelity(builder.user, builder.method, snapshots, embedder, config=config,
                              dataset=builder.dataset, build_id=builder.build_id,
                              stages_done=len(builder.store.done_stages(builder.build_id)), vectors=vectors)
    report.fidelity_key = key
    results.save(report)
    log.info("stored %s (%d sessions, %.2f s)", key, len(report.sessions), report.seconds)
    return report


def judge_report(report: FidelityReport, builder: MemoryBuilder, llm: LLMClient, results: FidelityStore, *,
                 evidence_k: int = 5, limit: int | None = None, vectors: StatementVectors | None = None) -> FidelityReport:
    """A copy of ``report`` with the judge-based variant (at its headline session, the last history session
    measured), stored in its place. ``report`` itself is left as read: a stored report is shared by every reader
    of this process (:class:`evaluation.fidelity.store.ParsedReports`)."""
    from evaluation.fidelity.judge import judge_fidelity
    from memory.methods.gold import gold_stages

    snapshots = load_snapshots(builder.store, builder.build_id, builder.user)
    if not snapshots or report.headline is None:
        raise ValueError(f"{builder.method} for user {builder.user.uid}: no history session's dialogue is ingested yet")
    at = min(report.headline.position, len(snapshots) - 1)
    gold = gold_stages(builder.user)[dialogue_stage(at)]
    judge = judge_fidelity(llm, gold, snapshots[at], vectors or StatementVectors(builder.embedder),
                           evidence_k=evidence_k, limit=limit, layered=report.layered)
    judged = report.model_copy(update={"judge": judge})
    results.save(judged)
    return judged
