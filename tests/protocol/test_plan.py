"""Plans that tell the truth: build calls per session from measured rates (more logs, more h2memory calls), the
wall time as the longest of the endpoint-bound, app-bound and scheduled times, and the app's CPU per call measured
from this home's job runs once there are some."""

from __future__ import annotations

import time

import pytest

from protocol.calibration import Calibration, load_rates, static_session_calls
from protocol.config import ExperimentConfig
from protocol.plan import make_plan, time_lines
from testkit.release import make_release
from testkit.workspace import make_workspace

URL = "http://127.0.0.1:9/v1"


@pytest.fixture
def home(tmp_path):
    ws = make_workspace(tmp_path / "pal", env={"PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_BASE_URL": URL,
                                               "PAL_DEFAULT_MODEL": "m", "PAL_EMBEDDER": "hash"},
                        secrets={"limits": {URL: {"concurrency": 4}}})
    return ws, tmp_path


def plan_for(ws, root, users, cal=None, concurrency=8, tasks=("build", "dialogue", "faireval")):
    exp = ExperimentConfig(name="p", dataset=str(root), users=users, methods=["h2memory", "vanilla-log"],
                           baseline="vanilla", tasks=list(tasks), concurrency=concurrency)
    return make_plan(exp, ws.dataset(str(root)), ws.config, cal or Calibration.load(ws.runs, ws.memory, ws.jobs.store))


def test_static_build_calls_follow_the_sessions_logs_at_the_files_rates(home):
    ws, tmp = home
    rates = load_rates()
    assert all(r["source"] for r in rates["build"].values()) and rates["app"]["source"]
    assert static_session_calls("h2memory", 40) > static_session_calls("h2memory", 10)
    short = plan_for(ws, make_release(tmp / "short", users=1, sessions=3, logs_per_session=8), ["0000"],
                     tasks=("build",))
    long = plan_for(ws, make_release(tmp / "long", users=1, sessions=3, logs_per_session=40), ["0000"],
                    tasks=("build",))
    few, many = (next(r.calls for r in p.rows if r.method == "h2memory") for p in (short, long))
    assert many > few and many == pytest.approx(3 * static_session_calls("h2memory", 40))


def test_the_wall_time_is_the_longest_bound_and_each_is_said(home):
    ws, tmp = home
    root = make_release(tmp / "ds", users=2, sessions=3, logs_per_session=8, turns=8, query_sessions=1)
    plan = plan_for(ws, root, ["0000", "0001"])
    assert plan.wall_seconds == max(plan.endpoint_seconds, plan.app_seconds, plan.schedule_seconds) > 0
    assert plan.endpoint == URL.rstrip("/") and not plan.app_cpu_measured
    calls = plan.total("calls")
    assert plan.app_seconds == pytest.approx(calls * plan.app_cpu_per_call)
    assert plan.endpoint_seconds == pytest.approx(plan.total("seconds") / 4)  # the endpoint serves 4 at once
    slow_app = Calibration({}, app_cpu=1.0)
    app_bound = plan_for(ws, root, ["0000", "0001"], cal=slow_app)
    assert app_bound.bound == "app" and app_bound.wall_seconds == pytest.approx(calls)
    lines = time_lines(app_bound)
    assert "bound by the app" in lines[0] and lines[1].startswith("endpoint-bound") and "measured" in lines[2]


def test_the_apps_cpu_per_call_is_measured_from_recorded_job_runs(home):
    ws, tmp = home
    from backends.store.runstore import CallRecord
    from jobs.types import JobSpec, UnitSpec

    ws.jobs.store.submit(JobSpec(job_id="j", kind="t", title="t", pool="cli", units=[UnitSpec(key="a", kind="x")]))
    start = time.time()
    for _ in range(50):
        ws.runs.record_call(CallRecord(session_id="j", role="assistant", provider="openai",
                                       endpoint=URL, model="m"))
    ws.jobs.store.record_run("j", start - 1, time.time() - start + 2, cpu_s=0.5, units=1, executor="threads")
    cal = Calibration.load(ws.runs, ws.memory, ws.jobs.store)
    assert cal.cpu_per_call == (pytest.approx(0.01), True)
    assert Calibration.load(ws.runs, ws.memory).cpu_per_call[1] is False  # without the job store: the file's
