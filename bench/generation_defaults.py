"""A one-month synthetic user on the defaults, as a new user makes one: minutes, calls, timeouts, valid or not.

For each language asked, in a fresh ``PAL_HOME`` and with no role configured through the environment, this runs
exactly what a person with a laptop and no API key runs::

    pal generate --out DIR --users 1 --months 1 --lang en
    pal validate DIR

and prints the wall minutes, the LLM calls the generation recorded (errors and timeouts among them), the tokens,
the bundled server's measured speed the deadlines came from (``llm_capabilities``), the longest call and whether
the dataset validates. A failed generation is resumed once with ``--resume`` when ``--resume`` is given (what the
error message tells a person to do), and both runs are counted. ``.streamlit/secrets.toml``, when present, still
applies (it is the person's own configuration); the bench says so.

    .venv/bin/python bench/generation_defaults.py                 # en and zh, one month each
    .venv/bin/python bench/generation_defaults.py --langs en --keep /tmp/gen-bench
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from backends.paths import StatePaths  # noqa: E402  (the project root is on the path first)

PAL = ROOT / ".venv" / "bin" / "pal"
SECRETS = ROOT / ".streamlit" / "secrets.toml"


def clean_env(home: Path) -> dict[str, str]:
    """The environment of a person who configured nothing: no ``PAL_*`` role settings, a fresh home."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAL_")}
    return {**env, "PAL_HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def run(cmd: list[str], env: dict[str, str], log: Path) -> tuple[int, float]:
    """Exit code and wall seconds of ``cmd``, its output appended to ``log``."""
    started = time.perf_counter()
    with log.open("a", encoding="utf-8") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        code = subprocess.run(cmd, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    return code, time.perf_counter() - started


def call_figures(home: Path) -> dict[str, object]:
    """What the run store recorded: calls, errors, timeouts, tokens, the longest call, the measured rates."""
    with sqlite3.connect(StatePaths(home).runs_db) as db:
        calls, errors, tin, tout, longest = db.execute(
            "SELECT COUNT(*), SUM(error IS NOT NULL), COALESCE(SUM(tokens_in), 0), COALESCE(SUM(tokens_out), 0), "
            "COALESCE(MAX(latency_ms), 0) FROM llm_calls").fetchone()
        timeouts = db.execute("SELECT COUNT(*) FROM llm_calls WHERE error LIKE 'LLMTimeout%'").fetchone()[0]
        rates = db.execute("SELECT endpoint, model, prompt_rate, decode_rate, rate_slots FROM llm_capabilities "
                           "WHERE decode_rate IS NOT NULL").fetchall()
        last_error = db.execute("SELECT error FROM llm_calls WHERE error IS NOT NULL ORDER BY rowid DESC LIMIT 1"
                                ).fetchone()
    return {"calls": calls, "errors": errors or 0, "timeouts": timeouts, "tokens_in": tin, "tokens_out": tout,
            "longest_s": longest / 1000, "rates": rates, "last_error": last_error[0] if last_error else None}


def print_calls(figures: dict[str, object]) -> None:
    """The calls a run recorded and the measured speed its deadlines came from, as the bench prints them."""
    print(f"   calls: {figures['calls']} ({figures['errors']} with an error, {figures['timeouts']} timed out); "
          f"tokens {figures['tokens_in']:,} in / {figures['tokens_out']:,} out; longest call "
          f"{figures['longest_s']:.0f} s")
    for endpoint, model, prompt, decode, slots in figures["rates"]:  # type: ignore[attr-defined]  # rows of the query
        print(f"   measured speed of {endpoint} ({model}): prompt {prompt:.0f} tok/s, decode {decode:.1f} tok/s "
              f"per request with {slots} slot(s) busy")


def step_seconds(home: Path) -> dict[str, float]:
    """Seconds and calls of each stored step of the home's generation runs (what the Generate page's ETA is
    proportioned on: ``ui/generate/step_shares.json``)."""
    from studio.workspace import Workspace
    from synth.registry import NAMES

    store, out = Workspace(home, read_only=True).synth, dict[str, float]()
    for info in store.list():
        for name in NAMES:
            if (rec := store.step(info.run_id, name)) is not None:
                out[name] = out.get(name, 0.0) + rec.seconds
    return out


def one_language(lang: str, months: int, base: Path, resume: bool) -> None:
    home, out, log = base / f"home-{lang}", base / f"dataset-{lang}", base / f"{lang}.log"
    env = clean_env(home)
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else ["?"]
    print(f"\n== {lang}: pal generate --users 1 --months {months} (load average before: {' '.join(load)})", flush=True)
    code, seconds = run([str(PAL), "generate", "--out", str(out), "--users", "1", "--months", str(months),
                         "--lang", lang], env, log)
    tries = 1
    if code != 0 and resume:
        print(f"   generate exited {code} after {seconds / 60:.1f} min; resuming once", flush=True)
        code, more = run([str(PAL), "generate", "--out", str(out), "--months", str(months), "--lang", lang,
                          "--resume"], env, log)
        seconds, tries = seconds + more, 2
    valid, _ = run([str(PAL), "validate", str(out), "--quiet"], env, log) if code == 0 else (None, 0.0)
    figures = call_figures(home)
    print(f"   generate: exit {code} in {seconds / 60:.1f} min ({tries} run{'s' if tries > 1 else ''})")
    print_calls(figures)
    print(f"   validate: {'not run' if valid is None else 'ok' if valid == 0 else f'exit {valid}'}")
    steps = step_seconds(home)
    if steps:
        total = sum(steps.values()) or 1.0
        print("   seconds per step (share): " + ", ".join(f"{n} {s:.0f} ({s / total:.1%})" for n, s in steps.items()))
        print(f"   shares as JSON: {json.dumps({n: round(s / total, 4) for n, s in steps.items()})}")
    if figures["last_error"]:
        print(f"   last call error: {str(figures['last_error'])[:300]}")
    print(f"   output and logs: {log}", flush=True)


def work_folder(keep: Path | None, prefix: str, what: str) -> Path:
    """The folder a defaults bench works in (``--keep``, else a new temporary one), announced with whether the
    person's own ``secrets.toml`` applies."""
    base = keep or Path(tempfile.mkdtemp(prefix=prefix))
    base.mkdir(parents=True, exist_ok=True)
    print(f"{what} on the defaults; secrets.toml {'present: it applies' if SECRETS.exists() else 'absent'}; "
          f"work in {base}")
    return base


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--langs", default="en,zh")
    parser.add_argument("--months", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="folder for the homes, datasets and logs (default: a temporary one)")
    parser.add_argument("--resume", action="store_true", help="resume a failed generation once")
    args = parser.parse_args()
    base = work_folder(args.keep, "gen-defaults-", "generation")
    for lang in args.langs.split(","):
        one_language(lang.strip(), args.months, base, args.resume)


if __name__ == "__main__":
    sys.exit(main())
