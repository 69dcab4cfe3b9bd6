"""Record the bundled demo workspace (``data/demo/workspace.palbundle``) with PAL Studio's own commands, in stages.

Why stages: on a 2-core machine the whole recording (H²Memory of three users, every demo user simulated on two query
topics with four methods, FairEval of every method pair with k = 3 in both orders) takes many CPU-hours. The stages
run in the order a visitor meets their records — the tour's topic and a Chinese user first — so a recording cut short
still makes a workspace whose tour reads well. Every command resumes where it stopped (``pal simulate`` keeps every
saved utterance, ``pal judge`` every stored judgment, ``pal memory`` every built session), so running this again
continues the recording; a ledger (``recording.json`` in the recording's PAL_HOME) keeps each stage's time and
status, and the bundle's manifest says which stages are in it. On a machine without the recording's home (a fresh
clone) the recording continues from the bundle itself: it is imported into a new home and the stages its manifest
lists are not recorded again (``--fresh`` records from the start). After the tour's stages the demo users come one at
a time (dialogues, then verdicts), so a recording cut short holds whole users.

Models: the memory builder is the default local model (Qwen2.5-Coder-0.5B); the User-LLM, the assistant and the
judge are the 1.5B (``make model-1.5b``; ``PAL_DEMO_DIALOGUE_MODEL`` names another), because their words are what
a visitor reads.

Run: ``make demo-workspace`` (every stage, then the export), or
``.venv/bin/python scripts/record_demo.py [--minutes M] [--only-export] [--list]``: ``--minutes`` starts no stage
after M minutes (the stage under way finishes), then exports what is recorded. To stop a recording early and keep
it, ``touch HOME/STOP`` (HOME: ``--home``, ``.pal-demo`` by default; the stage under way finishes, then the export), or
press Ctrl-C (the command under way stops, keeping what it saved; the export follows and the stage resumes next time).
``--redo RUN,RUN`` (``make demo-workspace REDO=…``) records runs anew — ones recorded before a rule of the simulator
changed — by discarding them with their judgments and setting the stages that made them to run again.
``--refresh-derived`` records nothing: it makes the derived records again under
today's definitions — every stored build's memory fidelity with its users' reference rows, every stored run's
simulator-fidelity checks (no LLM call: nothing is built, simulated or judged) — and exports; the records they
replace stay in the recording's home and are left out of the bundle, and its manifest names the definitions and the
day. Run again under the same definitions it only exports; each command resumes (stored results are reused).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from backends.paths import StatePaths  # noqa: E402  (the project root is on the path first)
from scripts.demo_derived import definitions, definitions_text, drop_superseded, superseded  # noqa: E402

DATASET = "data/demo"
BUNDLE = ROOT / "data" / "demo" / "workspace.palbundle"
BASELINES = ["gold", "rag-turn", "vanilla-log"]  # memories that need no LLM (gold: the dataset's own)
NO_LLM_MEMORIES = ["gold", "rag-turn", "rag-session", "vanilla-log"]
H2_USERS = ["1002", "1006", "1007"]  # the tour's user and both Chinese users
TOUR_TASKS = ["1002_sample7_topic-1", "1006_sample7_topic-1"]  # the tour's topic, then a Chinese user's
TOUR_PAIRS = [("rag-turn", "vanilla-log"), ("gold", "vanilla-log"), ("gold", "rag-turn")]  # the tour's stop 12 first
# runs recorded as another take (``pal simulate --seed``; "task/method" → seed): the tour's topic drifted to another
# of the user's needs at seed 0, and a run recorded anew at the same seed is the same sample (the seeds and the LLM
# cache); the take kept is the one ``pal runs check`` finds fewest turns to ask again in (FIDELITY.md)
TAKES: dict[str, str] = {"1002_sample7_topic-1/gold": "1", "1002_sample7_topic-1/rag-turn": "1",
                         "1002_sample7_topic-1/vanilla-log": "2", "1006_sample7_topic-1/gold": "1"}
REDONE = "recorded anew after a rule changed (discarded with their judgments): "  # a manifest line's start
REFRESHED = "derived records made again under "  # a manifest line's start (--refresh-derived)
USERS = ["1000", "1001", "1002", "1003", "1004", "1005", "1006", "1007"]
BUILDER_MODEL = "qwen2.5-coder-0.5b"  # the default local model: memory builder (its JSON is valid; FIDELITY.md)
DIALOGUE_MODEL = "qwen2.5-coder-1.5b"  # User-LLM, assistant and judge: what a visitor reads. The 0.5B as assistant
# answered with its own memory note ("What do you know about the user's past requirements?"), as User-LLM spoke as
# the user in half its drafts, as judge preferred whichever answer came first (every judgment a tie)


def two_topics(user: str) -> list[str]:
    """The first topic of each of the user's two query sessions (sample7, sample8), as dialogue-task ids."""
    return [f"{user}_sample7_topic-1", f"{user}_sample8_topic-1"]


def pairs(methods: list[str]) -> list[tuple[str, str]]:
    """Every unordered pair of ``methods``, in list order (FairEval judges both orders of each)."""
    return [(a, b) for i, a in enumerate(methods) for b in methods[i + 1:]]


@dataclass(frozen=True)
class Stage:
    """One step of the recording: a name, what it makes (for the manifest) and the ``pal`` commands that make it."""

    name: str
    how: str
    commands: list[list[str]] = field(default_factory=list)


def simulate(methods: list[str], tasks: list[str], seed: str = "0") -> list[str]:
    return ["simulate", "--dataset", DATASET, "--methods", ",".join(methods), "--task-ids", ",".join(tasks),
            "--concurrency", "2", *(["--seed", seed] if seed != "0" else [])]


def simulations(methods: list[str], tasks: list[str]) -> list[list[str]]:
    """The commands that simulate every method on every task: one, unless a run of them is a take of its own
    (:data:`TAKES`) — then the tasks with the same methods at the same seed share a command."""
    groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for task in tasks:
        seeds = {m: TAKES.get(f"{task}/{m}", "0") for m in methods}
        for seed in dict.fromkeys(seeds.values()):
            groups.setdefault((seed, tuple(m for m in methods if seeds[m] == seed)), []).append(task)
    return [simulate(list(ms), ts, seed) for (seed, ms), ts in groups.items()]


def judge(a: str, b: str, users: list[str], *extra: str) -> list[str]:
    return ["judge", "--dataset", DATASET, "--runs", a, "--baseline", b, "--users", ",".join(users), "--k", "3",
            *extra]


def tour_judge(a: str, b: str, *extra: str) -> list[str]:
    """A judge command of the tour's stages: only the tour's topics (run again after a redo, it would otherwise judge
    the users' second topics too, recorded later by their own stages)."""
    return judge(a, b, ["1002", "1006"], "--task-ids", ",".join(TOUR_TASKS), *extra)


def build_plan() -> list[Stage]:
    """The stages, in the order a visitor meets their records."""
    return [
        Stage("memories", "pal memory fidelity --users all --method M for M in " + ", ".join(NO_LLM_MEMORIES)
              + " (no LLM)", [["memory", "fidelity", "--dataset", DATASET, "--users", "all", "--method", m]
                              for m in NO_LLM_MEMORIES]),
        Stage("tour-dialogues", f"pal simulate --methods {','.join(BASELINES)} --task-ids {','.join(TOUR_TASKS)}",
              simulations(BASELINES, TOUR_TASKS)),
        Stage("tour-verdicts", "pal judge --k 3 of every pair of " + ", ".join(BASELINES) + " on those topics",
              [tour_judge(a, b) for a, b in TOUR_PAIRS]),
        *[Stage(f"h2memory-{u}", f"pal memory fidelity --user {u} --method h2memory (built by the default model)",
                [["memory", "fidelity", "--dataset", DATASET, "--users", u, "--method", "h2memory", "--build"]])
          for u in H2_USERS],
        Stage("h2memory-dialogues", "pal simulate --methods h2memory on the tour's topics",
              simulations(["h2memory"], TOUR_TASKS)),
        Stage("h2memory-verdicts", "pal judge --k 3 of h2memory against " + ", ".join(BASELINES) + " there",
              [tour_judge("h2memory", b) for b in BASELINES]),
        Stage("review-batch", "pal judge --runs gold --baseline vanilla-log --users 1002 --review-uncertain 1 "
              "--annotators reviewer-a,reviewer-b (a calibration batch at temperature 1)",
              [judge("gold", "vanilla-log", ["1002"], "--task-ids", TOUR_TASKS[0], "--review-uncertain", "1",
                     "--annotators", "reviewer-a,reviewer-b", "--review-seed", "7")]),
        *[stage for u in USERS for stage in user_stages(u)],
        Stage("simulator-fidelity", "pal simulate fidelity (every check on every run)",
              [["simulate", "fidelity", "--dataset", DATASET, "--format", "csv"]]),
    ]


def user_stages(user: str) -> list[Stage]:
    """One demo user's dialogues on two query topics, then FairEval of every pair of its methods there: a user at a
    time, so that a recording cut short holds whole users (each user's dialogues with their verdicts)."""
    methods = [*BASELINES, "h2memory"] if user in H2_USERS else BASELINES
    return [
        Stage(f"dialogues-{user}", f"pal simulate user {user} on two query topics with " + ", ".join(methods),
              simulations(methods, two_topics(user))),
        Stage(f"verdicts-{user}", f"pal judge --k 3 of every pair of {', '.join(methods)} on user {user}'s topics",
              [judge(a, b, [user]) for a, b in pairs(methods)]),
    ]


def recording_env(home: Path) -> dict[str, str]:
    """The environment every command runs in: the recording's own PAL_HOME and the models of each role."""
    env = {**os.environ, "PAL_HOME": str(home), "PAL_AUTH": "local", "PAL_EMBEDDER": "auto",
           "PAL_DEFAULT_PROVIDER": "local", "PAL_DEFAULT_MODEL": BUILDER_MODEL, "PAL_DEFAULT_TIMEOUT": "900",
           "HF_HUB_OFFLINE": "1"}
    dialogue = os.environ.get("PAL_DEMO_DIALOGUE_MODEL", DIALOGUE_MODEL)
    for role in ("USER_SIMULATOR", "ASSISTANT", "JUDGE"):
        env[f"PAL_{role}_MODEL"] = dialogue
    return env


def load_ledger(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"stages": {}}


def recorded_stages(how: list[str]) -> dict[str, float]:
    """The stages a bundle holds and their seconds, read back from its manifest's ``how`` lines (:func:`export` writes
    one ``"<stage how> — <minutes> min"`` line per finished stage)."""
    found: dict[str, float] = {}
    for stage in build_plan():
        prefix = stage.how + " — "
        for line in how:
            if line.startswith(prefix) and line.endswith(" min"):
                found[stage.name] = float(line[len(prefix):-len(" min")]) * 60
    return found


def seed_from_bundle(bundle: Path, env: dict[str, str], ledger: dict, save) -> bool:
    """Continue the recording a bundle holds on a machine without its recording's home (a fresh clone): import the
    bundle into the new home and mark its stages done, with the minutes they took. False when the import failed."""
    with zipfile.ZipFile(bundle) as z:
        how = json.loads(z.read("manifest.json")).get("how", [])
    print(f"== continuing the recording in {bundle.name}: pal workspace import", flush=True)
    if subprocess.call([sys.executable, "-m", "cli", "workspace", "import", str(bundle)], cwd=ROOT, env=env) != 0:
        print(f"error: could not import {bundle}; run with --fresh to record from the start", file=sys.stderr)
        return False
    for name, seconds in recorded_stages(how).items():
        ledger["stages"][name] = {"seconds": seconds, "status": "done", "how": next(
            s.how for s in build_plan() if s.name == name)}
    ledger["redone"] = [r for line in how if line.startswith(REDONE) for r in line[len(REDONE):].split(", ")]
    if refreshed := next((line for line in how if line.startswith(REFRESHED)), None):  # kept in the next export;
        ledger["refreshed"] = {"definitions": None, "status": "done", "how": refreshed}  # --refresh-derived resumes
    ledger["continued_from"] = bundle.name
    save()
    print(f"== recorded before: {', '.join(ledger['stages']) or 'nothing'}", flush=True)
    return True


def run_stage(stage: Stage, env: dict[str, str], ledger: dict, save) -> bool:
    """Run one stage's commands (each resumes its own work); record seconds and status. False when one failed."""
    entry = ledger["stages"].setdefault(stage.name, {"seconds": 0.0, "status": "pending", "how": stage.how})
    if entry["status"] == "done":
        print(f"== {stage.name}: done before ({entry['seconds'] / 60:.1f} min)", flush=True)
        return True
    return run_commands(stage, entry, env, save)


def run_commands(stage: Stage, entry: dict, env: dict[str, str], save) -> bool:
    """Run ``stage``'s commands in order, adding their seconds and status to its ledger ``entry``; False when one
    failed (the rest not run)."""
    for command in stage.commands:
        print(f"== {stage.name}: pal {' '.join(command)}", flush=True)
        start = time.monotonic()
        try:
            code = subprocess.call([sys.executable, "-m", "cli", *command], cwd=ROOT, env=env)
        except KeyboardInterrupt:  # Ctrl-C: the command stops (what it saved stays); the time spent is kept
            entry["status"] = f"interrupted: pal {' '.join(command)}"
            raise
        finally:
            entry["seconds"] += time.monotonic() - start
            save()
        if code != 0:
            entry["status"] = f"failed (exit {code}): pal {' '.join(command)}"
            save()
            return False
    entry["status"] = "done"
    save()
    return True


def refresh_stage(ledger: dict) -> Stage:
    """The commands that make the derived records again from what is recorded: the memory fidelity of every no-LLM
    method's builds and of the H²Memory builds whose stage is done (with each user's reference rows), then the
    simulator fidelity of every stored run. None calls an LLM: no ``--build`` (an H²Memory build is measured as
    stored), the checks read stance with the rules."""
    built = [u for u in H2_USERS if ledger["stages"].get(f"h2memory-{u}", {}).get("status") == "done"]
    commands = [["memory", "fidelity", "--dataset", DATASET, "--users", "all", "--method", m] for m in NO_LLM_MEMORIES]
    if built:
        commands.append(["memory", "fidelity", "--dataset", DATASET, "--users", ",".join(built), "--method",
                         "h2memory"])
    commands.append(["simulate", "fidelity", "--dataset", DATASET, "--format", "csv"])
    return Stage("refresh-derived", "pal memory fidelity of every stored build with its users' reference rows and "
                 "pal simulate fidelity of every stored run (no LLM; the records they replace left out)", commands)


def refresh(env: dict[str, str], ledger: dict, save) -> bool:
    """Make the derived records again under today's :func:`definitions` (``--refresh-derived``), noting the
    definitions, the day and the minutes in the ledger's ``refreshed`` entry; a refresh done under the same
    definitions is not run again, one cut short resumes (each command reuses the results it stored). False when a
    command failed."""
    defs = definitions()
    entry = ledger.get("refreshed") or {}
    if entry.get("definitions") == defs and entry.get("status") == "done":
        print(f"== refresh-derived: done before under {definitions_text(defs)}", flush=True)
        return True
    if entry.get("definitions") != defs:
        entry = {"definitions": defs, "seconds": 0.0, "status": "pending"}
    ledger["refreshed"] = entry
    stage = refresh_stage(ledger)
    ok = run_commands(stage, entry, env, save)
    entry["day"] = time.strftime("%Y-%m-%d", time.gmtime())
    entry["how"] = (f"{REFRESHED}{definitions_text(defs)} on {entry['day']}: {stage.how} — "
                    f"{entry['seconds'] / 60:.0f} min")
    save()
    return ok


def runs_of(home: Path, run_ids: list[str]) -> dict[str, tuple[str, str, str]]:
    """(user, dialogue-task id, method) of each of ``run_ids`` stored in the recording's home; absent ones left out."""
    db = StatePaths(home).runs_db
    if not db.exists():
        return {}
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute(f"SELECT run_id, user_id, sample_id, topic_key, method FROM sim_runs WHERE run_id IN "
                           f"({','.join('?' * len(run_ids))})", run_ids).fetchall()
    finally:
        con.close()
    return {r[0]: (r[1], f"{r[2]}_{r[3]}", r[4]) for r in rows}


def stages_making(plan: list[Stage], user: str, task: str, method: str) -> list[str]:
    """The stages whose commands make a run of ``method`` on ``task`` or judge it (its user, a pair with its method,
    its topic where a command names topics), and the simulator-fidelity stage that checks every run. Not the
    review-batch stage: it makes a batch each time it runs, so it runs again only when its batch was deleted
    (:func:`redo`)."""
    names = []
    for stage in plan:
        for c in stage.commands:
            simulates = c[0] == "simulate" and "--task-ids" in c and task in _value(c, "--task-ids").split(",") \
                and method in _value(c, "--methods").split(",")
            judges = c[0] == "judge" and "--review-uncertain" not in c and user in _value(c, "--users").split(",") \
                and method in (_value(c, "--runs"), _value(c, "--baseline")) \
                and ("--task-ids" not in c or task in _value(c, "--task-ids").split(","))
            if simulates or judges or c[:2] == ["simulate", "fidelity"]:
                names.append(stage.name)
                break
    return names


def _value(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1] if flag in command else ""


def batches_showing(home: Path, run_ids: list[str]) -> list[str]:
    """The review batches of the recording's home with an item that shows one of ``run_ids`` (either side)."""
    con = sqlite3.connect(f"file:{StatePaths(home).runs_db}?mode=ro", uri=True)
    try:
        marks = ",".join("?" * len(run_ids))
        return [r[0] for r in con.execute(
            f"SELECT DISTINCT batch_id FROM review_items WHERE json_extract(payload, '$.run_a') IN ({marks}) OR "
            f"json_extract(payload, '$.run_b') IN ({marks}) ORDER BY batch_id", [*run_ids, *run_ids])]
    finally:
        con.close()


def redo(run_ids: list[str], env: dict[str, str], ledger: dict, save) -> bool:
    """Record ``run_ids`` anew: delete the review batch that shows one of them (``pal review delete``; refused once
    an annotator answered) and set the review-batch stage to make it again, discard each run with its judgments
    and simulator fidelity (``pal runs discard``), and set the stages that made, judged or checked it to run again
    (their minutes so far kept; each resumes, so it makes only what is missing). False when a run is not in the
    recording (nothing changed) or cannot go."""
    found = runs_of(Path(env["PAL_HOME"]), run_ids)
    if missing := [r for r in run_ids if r not in found]:
        print(f"error: not in the recording at {env['PAL_HOME']}: {', '.join(missing)}", file=sys.stderr)
        return False
    plan = build_plan()
    remade: set[str] = set()
    if batches := batches_showing(Path(env["PAL_HOME"]), run_ids):
        print(f"== redo: pal review delete {' '.join(batches)} --yes (they show these runs)", flush=True)
        if subprocess.call([sys.executable, "-m", "cli", "review", "delete", *batches, "--yes"], cwd=ROOT,
                           env=env) != 0:
            return False
        remade = {s.name for s in plan if any("--review-uncertain" in c for c in s.commands)}
        _set_pending(ledger, remade, save)  # the batch is gone: made again even if the discard below fails
    print(f"== redo: pal runs discard {' '.join(run_ids)} --yes", flush=True)
    if subprocess.call([sys.executable, "-m", "cli", "runs", "discard", *run_ids, "--yes"], cwd=ROOT, env=env) != 0:
        return False
    again = sorted(remade | {n for user, task, method in found.values() for n in stages_making(plan, user, task, method)},
                   key=[s.name for s in plan].index)
    ledger["redone"] = list(dict.fromkeys([*ledger.get("redone", []), *run_ids]))  # each run named once
    _set_pending(ledger, set(again), save)
    print(f"== redo: {', '.join(again)} will run again", flush=True)
    return True


def _set_pending(ledger: dict, names: set[str], save) -> None:
    for name in names & set(ledger["stages"]):
        ledger["stages"][name]["status"] = "pending"
    save()


def export(env: dict[str, str], ledger: dict, out: Path) -> int:
    """Export the recording, with one ``--how`` line per finished stage and the total recording time."""
    done = [(n, e) for n, e in ledger["stages"].items() if e["status"] == "done"]
    total = sum(e["seconds"] for e in ledger["stages"].values())
    how = ["make demo-workspace (scripts/record_demo.py: PAL Studio's own commands on data/demo, offline; "
           f"memory builder {BUILDER_MODEL}; User-LLM, assistant and judge {env['PAL_ASSISTANT_MODEL']}; "
           f"{total / 3600:.1f} h of recording on 2 CPU cores)"]
    how += [f"{e['how']} — {e['seconds'] / 60:.0f} min" for _, e in done]
    missing = [s.name for s in build_plan() if s.name not in dict(done)]
    if missing:
        how.append("not yet recorded: " + ", ".join(missing))
    if ledger.get("redone"):
        how.append(REDONE + ", ".join(ledger["redone"]))
    if (refreshed := ledger.get("refreshed") or {}).get("status") == "done":
        how.append(refreshed["how"])
    methods = [*NO_LLM_MEMORIES, *(["h2memory"] if any(n.startswith("h2memory-") for n, _ in done) else [])]
    command = [sys.executable, "-m", "cli", "workspace", "export", "--dataset", DATASET, "--pseudonymise",
               "--methods", ",".join(methods), "--out", str(out)]  # a build cut short stays out of the bundle
    for line in how:
        command += ["--how", line]
    unfinished = [u for u in H2_USERS if f"h2memory-{u}" not in dict(done)] if "h2memory" in methods else []
    home = Path(env["PAL_HOME"])
    defs = definitions()
    if not unfinished and not superseded(home, defs):
        return subprocess.call(command, cwd=ROOT, env=env)
    with tempfile.TemporaryDirectory(prefix="pal-demo-export-") as tmp:  # the recording itself keeps them, to resume
        copy = without_builds(home, Path(tmp) / "home", "h2memory", unfinished)
        drop_superseded(copy, defs)
        return subprocess.call(command, cwd=ROOT, env={**env, "PAL_HOME": str(copy)})


def without_builds(home: Path, copy: Path, method: str, users: list[str]) -> Path:
    """A copy of the recording's home without ``method``'s builds of ``users`` (builds cut short; none: a copy)."""
    shutil.copytree(home, copy)
    db = StatePaths(copy).runs_db
    if db.exists() and users:
        con = sqlite3.connect(db)
        con.execute("PRAGMA foreign_keys = ON")
        con.execute(f"DELETE FROM memory_builds WHERE method = ? AND user_id IN ({','.join('?' * len(users))})",
                    [method, *users])
        con.commit()
        con.close()
    return copy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, default=Path(os.environ.get("DEMO_HOME", ROOT / ".pal-demo")))
    parser.add_argument("--out", type=Path, default=BUNDLE)
    parser.add_argument("--minutes", type=float, default=None, help="start no stage after this many minutes")
    parser.add_argument("--only-export", action="store_true")
    parser.add_argument("--list", action="store_true", help="print the stages and their state, run nothing")
    parser.add_argument("--redo", default="", help="comma-separated run ids to record anew (discarded with their "
                        "judgments and simulator fidelity; the stages that made them run again)")
    parser.add_argument("--fresh", action="store_true",
                        help="record from the start, not from what the bundle at --out already holds")
    parser.add_argument("--refresh-derived", action="store_true",
                        help="record nothing: make every stored build's memory fidelity and every stored run's "
                             "simulator fidelity again under today's definitions (no LLM), then export")
    args = parser.parse_args(argv)
    args.home.mkdir(parents=True, exist_ok=True)
    path = args.home / "recording.json"
    ledger = load_ledger(path)
    env = recording_env(args.home)

    def save() -> None:
        path.write_text(json.dumps(ledger, indent=1), encoding="utf-8")

    plan = build_plan()
    if not ledger["stages"] and not args.fresh and not args.list and args.out.exists() \
            and not seed_from_bundle(args.out, env, ledger, save):
        return 1
    if args.list:
        for stage in plan:
            entry = ledger["stages"].get(stage.name, {"status": "pending", "seconds": 0})
            print(f"{stage.name:22} {entry['status']:10} {entry['seconds'] / 60:6.1f} min  {stage.how}")
        return 0
    if args.redo and not redo([r.strip() for r in args.redo.split(",") if r.strip()], env, ledger, save):
        return 1
    start = time.monotonic()
    ok, interrupted = True, False
    stop_file = args.home / "STOP"
    if args.refresh_derived and not args.only_export:
        try:
            ok = refresh(env, ledger, save)
        except KeyboardInterrupt:
            print("== interrupted during refresh-derived; exporting; run again to continue", flush=True)
            interrupted = True
    for stage in [] if args.only_export or args.refresh_derived else plan:
        if args.minutes is not None and time.monotonic() - start > args.minutes * 60:
            print(f"== stopping after {args.minutes:g} minutes; run again to continue", flush=True)
            break
        if stop_file.exists():
            stop_file.unlink()
            print(f"== stopping: {stop_file} asked for it; run again to continue", flush=True)
            break
        try:
            ok = run_stage(stage, env, ledger, save) and ok
        except KeyboardInterrupt:
            print(f"== interrupted during {stage.name}; exporting what is recorded; run again to continue",
                  flush=True)
            interrupted = True
            break
    code = export(env, ledger, args.out)
    return 130 if interrupted else code or (0 if ok else 1)


if __name__ == "__main__":
    sys.exit(main())
