"""Jobs and units in the run store: submit, claim under a lease, heartbeat, finish, fail, cancel, retry, requeue.

Every change is one write transaction, so two worker threads (or two processes over one PAL home) never claim
the same unit: a claim picks the first queued unit of an unfinished job whose dependencies are all done and
takes its lease in the same transaction. Those units are the ready-queue (``job_ready``, :mod:`jobs.schema`),
kept in step here with every change of a unit's status — a unit enters it when it is queued with its
dependencies done or when its last dependency is done, and leaves it when it is claimed, cancelled, or a
dependency is queued again — so a claim reads one index entry (O(log n) in the units queued) instead of testing
each queued unit's dependencies under the write lock; :meth:`JobStore.reindex` rebuilds it from the units
(when an engine starts, after units came in from elsewhere, e.g. a bundle). Owners are ``host:pid:token`` strings, so an engine starting on a host
can tell the units of a dead process on that host (requeued at once) from those of a live one elsewhere
(requeued only when their lease expires).
"""

from __future__ import annotations

import json
import socket
import sqlite3
from collections.abc import Callable, Iterable

from backends.store.db import Database
from jobs.graph import chain_heights
from jobs.types import STATUSES, JobSpec, JobSummary, Unit, now

HOST = socket.gethostname()

# the queued units (of the selection after WHERE) whose dependencies are all done, as rows of ``job_ready``
_READY_ROWS = ("SELECT u.unit_id, u.job_id, j.pool, u.kind, j.created_at, u.seq FROM job_units u JOIN jobs j "
               "USING (job_id) WHERE u.status='queued' AND NOT EXISTS (SELECT 1 FROM job_deps d JOIN job_units p "
               "ON p.unit_id=d.dep_id WHERE d.unit_id=u.unit_id AND p.status!='done') AND ")


def unit_id(job_id: str, key: str) -> str:
    return f"{job_id}/{key}"


class JobStore:
    """The tables of :mod:`jobs.schema`; safe to share between threads and processes."""

    def __init__(self, db: Database):
        self.db = db

    # ------------------------------------------------------------------ submitting

    def submit(self, spec: JobSpec) -> str:
        """Insert the job and every unit not stored yet (same key: kept as it is, so re-submitting resumes)."""
        keys = [u.key for u in spec.units]
        if len(keys) != len(set(keys)):
            dup = next(k for k in keys if keys.count(k) > 1)
            raise ValueError(f"job {spec.job_id}: two units with key {dup!r}")
        known = set(keys)
        for u in spec.units:
            missing = [d for d in u.deps if d not in known]
            if missing:
                raise ValueError(f"job {spec.job_id}: unit {u.key!r} depends on unknown unit {missing[0]!r}")
        t = now()
        with self.db.write() as conn:
            conn.execute("INSERT OR IGNORE INTO jobs VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?)",
                         (spec.job_id, spec.kind, spec.title, spec.created_by, spec.pool,
                          json.dumps(spec.config, sort_keys=True), t, t))
            conn.execute("UPDATE jobs SET title=?, config=?, pool=?, cancelled=0, updated_at=? WHERE job_id=?",
                         (spec.title, json.dumps(spec.config, sort_keys=True), spec.pool, t, spec.job_id))
            for seq, u in enumerate(spec.units):
                conn.execute("INSERT OR IGNORE INTO job_units (unit_id, job_id, seq, kind, label, payload, status, "
                             "max_attempts) VALUES (?, ?, ?, ?, ?, ?, 'queued', ?)",
                             (unit_id(spec.job_id, u.key), spec.job_id, seq, u.kind, u.label or u.key,
                              json.dumps(u.payload, sort_keys=True), u.max_attempts))
                conn.executemany("INSERT OR IGNORE INTO job_deps VALUES (?, ?)",
                                 [(unit_id(spec.job_id, u.key), unit_id(spec.job_id, d)) for d in u.deps])
            conn.execute("UPDATE job_units SET status='queued', max_attempts=attempts+max_attempts WHERE job_id=? "
                         "AND status IN ('cancelled', 'failed')", (spec.job_id,))
            _ready_job(conn, spec.job_id)
        return spec.job_id

    # ------------------------------------------------------------------ claiming and running

    def claim(self, owner: str, lease_s: float, *, job_id: str | None = None, pool: str | None = None,
              kinds: Iterable[str] | None = None, exclude: Iterable[str] = ()) -> Unit | None:
        """Take the lease of the next runnable unit (of one job, or of one pool), or None when none is runnable.

        The next one is the first of the ready-queue in (job created, job, unit order) — one job's units in their
        order when ``job_id`` is given — read from the index that has that order."""
        conds = ["j.cancelled=0"]
        args: list = []
        order = "r.created_at, r.job_id, r.seq"
        if job_id is not None:
            conds.append("r.job_id=?")
            args.append(job_id)
            order = "r.seq"
        if pool is not None:
            conds.append("r.pool=?")
            args.append(pool)
        if kinds is not None:
            kinds = list(kinds)
            conds.append(f"r.kind IN ({','.join('?' * len(kinds))})")
            args += kinds
        exclude = list(exclude)
        if exclude:
            conds.append(f"r.unit_id NOT IN ({','.join('?' * len(exclude))})")
            args += exclude
        sql = ("SELECT r.unit_id, r.job_id FROM job_ready r JOIN jobs j ON j.job_id=r.job_id WHERE "
               + " AND ".join(conds) + f" ORDER BY {order} LIMIT 1")
        with self.db.read() as conn:  # idle workers look without the write lock (most of their claims find nothing)
            if conn.execute(sql, args).fetchone() is None:
                return None
        t = now()
        with self.db.write() as conn:
            row = conn.execute(sql, args).fetchone()
            if row is None:
                return None
            conn.execute("UPDATE job_units SET status='running', lease_owner=?, lease_until=?, attempts=attempts+1, "
                         "started_at=?, last_error=NULL WHERE unit_id=?", (owner, t + lease_s, t, row[0]))
            conn.execute("DELETE FROM job_ready WHERE unit_id=?", (row[0],))
            conn.execute("UPDATE jobs SET updated_at=? WHERE job_id=?", (t, row[1]))
            return self._unit(conn, row[0])

    def claim_plan(self, *, job_id: str | None = None, pool: str | None = None) -> list[str]:
        """How SQLite runs a claim's query (``EXPLAIN QUERY PLAN`` details): what a test reads to see it walks an
        index in claim order rather than sorting or scanning the units."""
        conds, order = ["j.cancelled=0"], "r.created_at, r.job_id, r.seq"
        args: list[str] = []
        if job_id is not None:
            conds, args, order = [*conds, "r.job_id=?"], [*args, job_id], "r.seq"
        if pool is not None:
            conds, args = [*conds, "r.pool=?"], [*args, pool]
        with self.db.read() as conn:
            return [r[3] for r in conn.execute(
                "EXPLAIN QUERY PLAN SELECT r.unit_id, r.job_id FROM job_ready r JOIN jobs j ON j.job_id=r.job_id "
                "WHERE " + " AND ".join(conds) + f" ORDER BY {order} LIMIT 1", args)]

    def reindex(self) -> int:
        """Rebuild the ready-queue from the units (units that came in other than through this store, a queue left
        behind); the number of entries it changed."""
        with self.db.write() as conn:
            gone = conn.execute("DELETE FROM job_ready WHERE unit_id NOT IN (SELECT unit_id FROM (" + _READY_ROWS
                                + "1))").rowcount
            added = conn.execute("INSERT OR IGNORE INTO job_ready " + _READY_ROWS + "1").rowcount
        return gone + added

    def heartbeat(self, owner: str, lease_s: float) -> set[str]:
        """Extend the leases ``owner`` holds; returns the ids of its units whose job was cancelled."""
        t = now()
        with self.db.write() as conn:
            conn.execute("UPDATE job_units SET lease_until=? WHERE lease_owner=? AND status='running'",
                         (t + lease_s, owner))
            return {r[0] for r in conn.execute(
                "SELECT u.unit_id FROM job_units u JOIN jobs j USING (job_id) WHERE u.lease_owner=? "
                "AND u.status='running' AND j.cancelled=1", (owner,))}

    def set_progress(self, uid: str, owner: str, fraction: float, text: str) -> None:
        with self.db.write() as conn:
            conn.execute("UPDATE job_units SET progress=?, progress_text=? WHERE unit_id=? AND lease_owner=?",
                         (max(0.0, min(1.0, fraction)), text[:300], uid, owner))

    def finish(self, uid: str, owner: str, result: dict | None, seconds: float) -> bool:
        """The unit is done (only while ``owner`` holds its lease; False when the lease was lost meanwhile)."""
        return self._end(uid, owner, "done", None, result, seconds)

    def fail(self, uid: str, owner: str, error: str, seconds: float) -> str:
        """A failed attempt: queued again while attempts remain, else ``failed``. Returns the new status."""
        with self.db.read() as conn:
            row = conn.execute("SELECT attempts, max_attempts FROM job_units WHERE unit_id=?", (uid,)).fetchone()
        status = "queued" if row is not None and row[0] < row[1] else "failed"
        self._end(uid, owner, status, error, None, seconds)
        return status

    def release(self, uid: str, owner: str, status: str = "queued", error: str | None = None) -> None:
        """Give the lease back: ``queued`` (stopped by a shutdown, run again later) or ``cancelled``."""
        with self.db.write() as conn:
            conn.execute("UPDATE job_units SET status=?, lease_owner=NULL, lease_until=NULL, last_error=COALESCE(?, "
                         "last_error), attempts=MAX(0, attempts - (? = 'queued')) WHERE unit_id=? AND lease_owner=?",
                         (status, error, status, uid, owner))
            _ready_units(conn, [uid])

    def _end(self, uid: str, owner: str, status: str, error: str | None, result: dict | None, seconds: float) -> bool:
        t = now()
        with self.db.write() as conn:
            cur = conn.execute(
                "UPDATE job_units SET status=?, last_error=?, result=?, lease_owner=NULL, lease_until=NULL, "
                "finished_at=?, seconds=seconds+?, progress=CASE WHEN ?='done' THEN 1 ELSE progress END "
                "WHERE unit_id=? AND lease_owner=? AND status='running'",
                (status, error, json.dumps(result) if result is not None else None, t, seconds, status, uid, owner))
            conn.execute("UPDATE jobs SET updated_at=? WHERE job_id=(SELECT job_id FROM job_units WHERE unit_id=?)",
                         (t, uid))
            if cur.rowcount == 1:
                _ready_units(conn, [uid, *(_dependants(conn, [uid]) if status == "done" else [])])
            return cur.rowcount == 1

    # ------------------------------------------------------------------ a person's controls

    def cancel(self, job_id: str) -> None:
        """Queued units are cancelled now; running ones stop at their next check (their workers see it)."""
        with self.db.write() as conn:
            conn.execute("UPDATE jobs SET cancelled=1, updated_at=? WHERE job_id=?", (now(), job_id))
            conn.execute("UPDATE job_units SET status='cancelled' WHERE job_id=? AND status='queued'", (job_id,))
            conn.execute("DELETE FROM job_ready WHERE job_id=?", (job_id,))

    def retry(self, job_id: str, unit_ids: Iterable[str] | None = None) -> int:
        """Failed and cancelled units (all, or these) are queued again with one more attempt allowed."""
        ids = list(unit_ids) if unit_ids is not None else None
        sql = ("UPDATE job_units SET status='queued', max_attempts=attempts+1 WHERE job_id=? "
               "AND status IN ('failed', 'cancelled')")
        args: list = [job_id]
        if ids is not None:
            sql += f" AND unit_id IN ({','.join('?' * len(ids))})"
            args += ids
        with self.db.write() as conn:
            conn.execute("UPDATE jobs SET cancelled=0, updated_at=? WHERE job_id=?", (now(), job_id))
            n = conn.execute(sql, args).rowcount
            _ready_job(conn, job_id)
            return n

    @staticmethod
    def requeue_reading_in(conn: sqlite3.Connection, run_id: str) -> list[str]:
        """Queue again, in the caller's transaction, every unit that made, judged or checked the simulation run
        ``run_id`` (its id a part of the unit's key: ``sim/<run>``, ``judge/<run>/<run>/<aspect>``, ``simfid/<run>``)
        and had ended; their ids. Why: a discarded run (:mod:`studio.discard`) is recorded anew by the command that
        made it, which resubmits the same job — whose units, still done, would be skipped."""
        rows = conn.execute("SELECT unit_id FROM job_units WHERE instr(unit_id || '/', '/' || ? || '/') > 0 "
                            "AND status IN ('done', 'failed', 'cancelled')", (run_id,)).fetchall()
        ids = [r[0] for r in rows]
        conn.executemany("UPDATE job_units SET status='queued', max_attempts=attempts+1, result=NULL, last_error=NULL, "
                         "progress=0, progress_text='', lease_owner=NULL, lease_until=NULL WHERE unit_id=?",
                         [(i,) for i in ids])
        _ready_units(conn, [*ids, *_dependants(conn, ids)])  # a dependant waits again for a unit no longer done
        return ids

    # ------------------------------------------------------------------ dead workers

    def requeue_expired(self) -> int:
        """Units whose lease ran out (their worker stopped renewing it) are queued again."""
        with self.db.write() as conn:
            ids = [r[0] for r in conn.execute("SELECT unit_id FROM job_units WHERE status='running' AND lease_until < ?",
                                              (now(),))]
            conn.executemany("UPDATE job_units SET status='queued', lease_owner=NULL, lease_until=NULL, "
                             "last_error='the worker stopped renewing its lease' WHERE unit_id=? AND status='running'",
                             [(i,) for i in ids])
            _ready_units(conn, ids)
            return len(ids)

    def requeue_dead(self, alive: Callable[[str], bool]) -> int:
        """Running units of owners on this host that ``alive`` says are gone are queued again at once."""
        with self.db.read() as conn:
            owners = {r[0] for r in conn.execute("SELECT DISTINCT lease_owner FROM job_units WHERE status='running'")}
        dead = [o for o in owners if o and o.split(":")[0] == HOST and not alive(o)]
        if not dead:
            return 0
        with self.db.write() as conn:
            ids = [r[0] for r in conn.execute(f"SELECT unit_id FROM job_units WHERE status='running' AND lease_owner "
                                              f"IN ({','.join('?' * len(dead))})", dead)]
            conn.executemany("UPDATE job_units SET status='queued', lease_owner=NULL, lease_until=NULL, last_error="
                             "'its worker died' WHERE unit_id=? AND status='running'", [(i,) for i in ids])
            _ready_units(conn, ids)
            return len(ids)

    # ------------------------------------------------------------------ reading

    def _unit(self, conn: sqlite3.Connection, uid: str) -> Unit:
        row = conn.execute("SELECT * FROM job_units WHERE unit_id=?", (uid,)).fetchone()
        if row is None:
            raise KeyError(f"no job unit {uid!r}")
        deps = [r[0] for r in conn.execute("SELECT dep_id FROM job_deps WHERE unit_id=?", (uid,))]
        return _to_unit(row, deps)

    def unit(self, uid: str) -> Unit:
        with self.db.read() as conn:
            return self._unit(conn, uid)

    def units(self, job_id: str, status: str | None = None) -> list[Unit]:
        sql = "SELECT * FROM job_units WHERE job_id=?" + (" AND status=?" if status else "") + " ORDER BY seq"
        with self.db.read() as conn:
            rows = conn.execute(sql, (job_id, status) if status else (job_id,)).fetchall()
            deps: dict[str, list[str]] = {}
            for d in conn.execute("SELECT d.unit_id, d.dep_id FROM job_deps d JOIN job_units u USING (unit_id) "
                                  "WHERE u.job_id=?", (job_id,)):
                deps.setdefault(d[0], []).append(d[1])
        return [_to_unit(r, deps.get(r["unit_id"], [])) for r in rows]

    def heights(self, job_id: str) -> dict[str, int]:
        """Each unit of ``job_id`` with its height in the job's graph: the longest chain of units that wait on it, one
        after another (0: nothing waits on it). What the engine's calls are prioritised by (:mod:`jobs.engine`)."""
        with self.db.read() as conn:
            ids = [r[0] for r in conn.execute("SELECT unit_id FROM job_units WHERE job_id=?", (job_id,))]
            edges = conn.execute("SELECT d.unit_id, d.dep_id FROM job_deps d JOIN job_units u USING (unit_id) "
                                 "WHERE u.job_id=?", (job_id,)).fetchall()
        return chain_heights(ids, edges)

    def config(self, job_id: str) -> dict:
        with self.db.read() as conn:
            row = conn.execute("SELECT config FROM jobs WHERE job_id=?", (job_id,)).fetchone()
        if row is None:
            raise KeyError(f"no job {job_id!r}")
        return json.loads(row[0])

    def exists(self, job_id: str) -> bool:
        with self.db.read() as conn:
            return conn.execute("SELECT 1 FROM jobs WHERE job_id=?", (job_id,)).fetchone() is not None

    def summary(self, job_id: str) -> JobSummary:
        with self.db.read() as conn:
            job = conn.execute("SELECT * FROM jobs WHERE job_id=?", (job_id,)).fetchone()
            if job is None:
                raise KeyError(f"no job {job_id!r}")
            return self._summary(conn, job)

    def _summary(self, conn: sqlite3.Connection, job: sqlite3.Row) -> JobSummary:
        rows = conn.execute("SELECT kind, status, COUNT(*), SUM(progress), SUM(seconds) FROM job_units WHERE job_id=? "
                            "GROUP BY kind, status", (job["job_id"],)).fetchall()
        counts = dict.fromkeys(STATUSES, 0)
        by_kind: dict[str, tuple[int, float, int]] = {}  # kind → (done, their seconds, queued or running)
        progress, seconds = 0.0, 0.0
        for kind, status, n, prog, secs in rows:
            counts[status] = counts.get(status, 0) + n
            done, done_s, left = by_kind.get(kind, (0, 0.0, 0))
            if status == "done":
                progress += n
                seconds += secs or 0.0
                done, done_s = done + n, done_s + (secs or 0.0)
            elif status == "running":
                progress += prog or 0.0
            by_kind[kind] = (done, done_s, left + (n if status in ("queued", "running") else 0))
        blocked = conn.execute(  # queued units that wait, directly or not, on a failed or cancelled unit
            "WITH RECURSIVE bad(uid) AS (SELECT unit_id FROM job_units WHERE job_id=?1 AND status IN ('failed', "
            "'cancelled') UNION SELECT d.unit_id FROM job_deps d JOIN bad ON d.dep_id=bad.uid) "
            "SELECT COUNT(*) FROM job_units u JOIN bad ON u.unit_id=bad.uid WHERE u.status='queued'",
            (job["job_id"],)).fetchone()[0]
        errors = [f"{r[0]}: {r[1]}" for r in conn.execute(
            "SELECT label, last_error FROM job_units WHERE job_id=? AND status='failed' ORDER BY seq LIMIT 5",
            (job["job_id"],))]
        total = sum(counts.values())
        return JobSummary(by_kind=by_kind, job_id=job["job_id"], kind=job["kind"], title=job["title"], created_by=job["created_by"],
                          pool=job["pool"], cancelled=bool(job["cancelled"]), created_at=job["created_at"],
                          updated_at=job["updated_at"], counts=counts, total=total,
                          progress=progress / total if total else 1.0, seconds_done=seconds, blocked=blocked,
                          errors=errors)

    def jobs(self, kind: str | None = None, limit: int = 50, prefix: str | None = None) -> list[JobSummary]:
        """Summaries of the newest jobs (of one kind; whose id starts with ``prefix``)."""
        where: list[str] = []
        args: list[object] = []
        if kind:
            where.append("kind=?")
            args.append(kind)
        if prefix:
            where.append("substr(job_id, 1, ?) = ?")
            args += [len(prefix), prefix]
        sql = ("SELECT * FROM jobs" + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY updated_at DESC LIMIT ?")
        with self.db.read() as conn:
            return [self._summary(conn, j) for j in conn.execute(sql, (*args, limit)).fetchall()]

    def record_run(self, job_id: str, started_at: float, wall_s: float, cpu_s: float, units: int,
                   executor: str) -> None:
        """One foreground run of ``job_id``: its wall seconds, the CPU seconds of the process that ran it (threads:
        its units' own work; another executor: the driver's) and the units it finished."""
        with self.db.write() as conn:
            conn.execute("INSERT INTO job_runs VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (job_id, started_at, started_at + wall_s, wall_s, cpu_s, units, executor))

    def runs(self, executor: str | None = None) -> list[dict]:
        """Every recorded run (of one executor), newest first."""
        sql = "SELECT * FROM job_runs" + (" WHERE executor=?" if executor else "") + " ORDER BY started_at DESC"
        with self.db.read() as conn:
            return [dict(r) for r in conn.execute(sql, (executor,) if executor else ())]

    def delete(self, job_id: str) -> None:
        with self.db.write() as conn:
            conn.execute("DELETE FROM jobs WHERE job_id=?", (job_id,))


def _ready_units(conn: sqlite3.Connection, ids: list[str]) -> None:
    """Bring these units' ready-queue entries in step with their status and their dependencies'."""
    for uid in dict.fromkeys(ids):
        conn.execute("DELETE FROM job_ready WHERE unit_id=?", (uid,))
        conn.execute("INSERT INTO job_ready " + _READY_ROWS + "u.unit_id=?", (uid,))


def _ready_job(conn: sqlite3.Connection, job_id: str) -> None:
    """The same for every unit of one job (a job submitted or retried: its pool may have changed too)."""
    conn.execute("DELETE FROM job_ready WHERE job_id=?", (job_id,))
    conn.execute("INSERT INTO job_ready " + _READY_ROWS + "u.job_id=?", (job_id,))


def _dependants(conn: sqlite3.Connection, ids: list[str]) -> list[str]:
    """The units that depend directly on any of ``ids``."""
    return [r[0] for uid in ids for r in conn.execute("SELECT unit_id FROM job_deps WHERE dep_id=?", (uid,))]


def _to_unit(row: sqlite3.Row, deps: list[str]) -> Unit:
    data = dict(row)
    data["payload"] = json.loads(data["payload"])
    data["result"] = json.loads(data["result"]) if data["result"] else None
    return Unit(**data, deps=deps)
