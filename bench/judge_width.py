"""FairEval at the endpoint's speed: a k = 3 two-order judgment against an OpenAI-compatible endpoint nobody
configured (no ``[limits]``, no slot count), whose every answer takes ``--latency`` seconds like a remote API.

Prints, for the default width and for a configured concurrency of 1 (what every unconfigured endpoint got
before), the most requests the endpoint served at once and the judgment's wall time.
Target: ≥ 4 requests in flight at the default width (six samples, two orders × k = 3).
Run: ``.venv/bin/python bench/judge_width.py [--latency 1.0] [--k 3]`` (seconds; uses a temporary PAL_HOME).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["PAL_HOME"] = tempfile.mkdtemp(prefix="pal-bench-")

from backends.llm.limits import DEFAULT_CONCURRENCY  # noqa: E402
from evaluation.faireval import judge_pair  # noqa: E402
from evaluation.service import topic_context  # noqa: E402
from palset.dataset import dataset_key  # noqa: E402
from palset.loader import load_dataset  # noqa: E402
from palset.vocab import Act  # noqa: E402
from sim.types import RunRecord, RunSpec, Utterance  # noqa: E402
from testkit.fake_endpoints import FakeEndpoint  # noqa: E402
from testkit.workspace import make_workspace  # noqa: E402

DEMO = ROOT / "data" / "demo"
USER, SAMPLE, TOPIC = "1000", "1000_sample7", "topic-1"


class SlowEndpoint(FakeEndpoint):
    """Answers after ``latency`` seconds and counts the requests it serves at once."""

    def __init__(self, latency: float):
        super().__init__()
        self.hold, self.now, self.most = latency, 0, 0
        self._count = threading.Lock()

    def answer(self, body):
        with self._count:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(self.hold)
        with self._count:
            self.now -= 1
        return super().answer(body)


def run_record(method: str, words: str) -> RunRecord:
    spec = RunSpec(dataset=dataset_key(DEMO), user_id=USER, sample_id=SAMPLE, topic_key=TOPIC, method=method)
    turns = [("user", Act.TOPIC_INQUIRY, "I need help with my rota."),
             ("assistant", Act.REQUIREMENT_PREDICTION, f"Do you need a swap partner? {words}")]
    return RunRecord(run_id=f"bench-{method}", spec=spec, status="finished",
                     utterances=[Utterance(turn_no=0, side=side, actor="simulator", act=act, content=text)
                                 for side, act, text in turns])


def measure(tmp: Path, latency: float, k: int, limits: dict | None) -> tuple[int, float, int]:
    """(most in flight, wall seconds, valid samples) of one judgment."""
    dataset = load_dataset(DEMO)
    ctx = topic_context(dataset, USER, SAMPLE, TOPIC)
    with SlowEndpoint(latency).running() as server:
        env = {"PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_BASE_URL": server.base_url, "PAL_DEFAULT_MODEL": "m"}
        secrets: dict = {"cache": False}
        if limits is not None:
            secrets["limits"] = {server.base_url: limits}
        ws = make_workspace(tmp, env=env, secrets=secrets)
        start = time.perf_counter()
        j = judge_pair(ws.llm(session_id="bench"), ctx, run_record("a", "ZEBRA"), run_record("b", "plain"),
                       "requirement", k=k, temperature=1.0)
        wall = time.perf_counter() - start
    return server.most, wall, sum(s.ok for s in j.samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=1.0, help="seconds per answer")
    ap.add_argument("--k", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        measure(Path(tmp) / "warm", 0.0, 1, None)  # imports, SDK and token counter loaded once, not timed
        rows = [("default width (nobody configured)", measure(Path(tmp) / "d", args.latency, args.k, None)),
                ("configured concurrency 1 (before)", measure(Path(tmp) / "one", args.latency, args.k,
                                                             {"concurrency": 1}))]
    print(f"k = {args.k}, two orders, {2 * args.k} samples, {args.latency:.2f} s per answer; "
          f"default concurrency {DEFAULT_CONCURRENCY}")
    for label, (most, wall, valid) in rows:
        print(f"  {label:36s} most in flight {most}  wall {wall:6.2f} s  valid samples {valid}")
    most = rows[0][1][0]
    print(f"target ≥ 4 in flight at the default width: {'met' if most >= 4 else 'NOT met'} ({most})")


if __name__ == "__main__":
    main()
