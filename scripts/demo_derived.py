"""The demo recording's derived records: the definitions they are made under now (memory fidelity's metric and gold
versions, the simulator-fidelity checks' version and the rulebook fingerprint) and the SQL that finds the records a
current one replaces, so an export carries each measurement once (:mod:`scripts.record_demo`)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from backends.paths import StatePaths


def definitions() -> dict[str, str]:
    """The definitions the derived records are made under now: memory fidelity's metric and gold versions, the
    simulator-fidelity checks' version and the rulebook fingerprint (what a stored result is keyed by)."""
    from evaluation.fidelity.types import GOLD_VERSION, METRIC_VERSION
    from evaluation.simfidelity.registry import CHECKS_VERSION
    from sim.rulebook import rulebook_version

    return {"memory_fidelity": METRIC_VERSION, "gold": GOLD_VERSION, "checks": CHECKS_VERSION,
            "rulebook": rulebook_version()}


def definitions_text(defs: dict[str, str]) -> str:
    return (f"memory fidelity v{defs['memory_fidelity']} (gold v{defs['gold']}) and simulator-fidelity checks "
            f"v{defs['checks']} (rulebook {defs['rulebook']})")


# Derived records made again under newer definitions: a memory-fidelity report of an older metric or gold version
# beside a current one of the same user, method, embedder and τ, and a run's simulator-fidelity result of older
# checks or another rulebook beside a current one of that run (parameters: :func:`definitions`).
SUPERSEDED = {
    "memory_fidelity": """FROM memory_fidelity AS old WHERE (json_extract(old.data, '$.metric_version') IS NOT :metric
        OR json_extract(old.data, '$.gold_version') IS NOT :gold) AND EXISTS (SELECT 1 FROM memory_fidelity AS new
        WHERE new.dataset = old.dataset AND new.user_id = old.user_id AND new.method = old.method
        AND new.embedder = old.embedder AND new.threshold = old.threshold
        AND json_extract(new.data, '$.metric_version') = :metric AND json_extract(new.data, '$.gold_version') = :gold)""",
    "sim_fidelity": """FROM sim_fidelity AS old WHERE (json_extract(old.data, '$.checks_version') IS NOT :checks
        OR json_extract(old.data, '$.rulebook') IS NOT :rulebook) AND EXISTS (SELECT 1 FROM sim_fidelity AS new
        WHERE new.run_id = old.run_id AND json_extract(new.data, '$.checks_version') = :checks
        AND json_extract(new.data, '$.rulebook') = :rulebook)""",
}


def _superseded_args(defs: dict[str, str]) -> dict[str, str]:
    return {"metric": defs["memory_fidelity"], "gold": defs["gold"], "checks": defs["checks"],
            "rulebook": defs["rulebook"]}


def superseded(home: Path, defs: dict[str, str]) -> dict[str, int]:
    """How many rows of each derived table of the recording's home a current record replaces (tables absent: none)."""
    db = StatePaths(home).runs_db
    if not db.exists():
        return {}
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        counts = {t: con.execute(f"SELECT count(*) {sql}", _superseded_args(defs)).fetchone()[0]
                  for t, sql in SUPERSEDED.items() if t in tables}
    finally:
        con.close()
    return {t: n for t, n in counts.items() if n}


def drop_superseded(copy: Path, defs: dict[str, str]) -> dict[str, int]:
    """Delete the superseded derived records (:data:`SUPERSEDED`) from a copy of the recording's home, so a bundle
    carries each measurement once, under today's definitions; how many of each table went."""
    found = superseded(copy, defs)
    if found:
        con = sqlite3.connect(StatePaths(copy).runs_db)
        with con:
            for table in found:
                con.execute(f"DELETE {SUPERSEDED[table]}", _superseded_args(defs))
        con.close()
        print("== export leaves out the records made again: " + ", ".join(f"{n} {t}" for t, n in found.items()),
              flush=True)
    return found
