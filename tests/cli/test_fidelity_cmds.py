"""`pal memory fidelity` as users run it: gold (oracle upper bound) scores 1.0, a baseline is built and measured,
several users give a summary with bootstrap CIs, an unbuilt LLM method and unknown users are clear errors."""

import json
import os
import shutil
import subprocess

from tests.cli.test_dataset_cmds import PAL
from tests.conftest import DEMO


def run(home, *args, embedder="hash"):
    return subprocess.run([PAL, "memory", "fidelity", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PAL_HOME": str(home), "PAL_EMBEDDER": embedder})


def test_gold_and_a_baseline_over_two_users(tmp_path):
    gold = run(tmp_path, "--dataset", str(DEMO), "--user", "1000", "--method", "gold", "--json")
    assert gold.returncode == 0, gold.stderr
    data = json.loads(gold.stdout)
    assert data["label"] == "gold (oracle upper bound)" and data["unavailable_files"] == []
    row = data["users"][0]
    assert row["oracle"] and row["as_of"] == "1000_sample8" and row["missed"] == []
    assert row["situation_ari"] == 1.0 and row["requirement_recall"] == 1.0 and row["polarity_errors"] == 0
    assert set(data["definitions"]) >= {"situation_ari", "text_recall"}
    base = run(tmp_path, "--dataset", str(DEMO), "--users", "1000,1001", "--method", "rag-turn", "--threshold", "0.7",
               "--json")
    assert base.returncode == 0, base.stderr
    data = json.loads(base.stdout)
    assert "building rag-turn for user 1001" in base.stderr
    assert [r["user"] for r in data["users"]] == ["1000", "1001"]
    assert all(r["situation_ari"] is None and "situation" in r["unavailable"] for r in data["users"])
    summary = data["summary"]
    assert summary["threshold"] == 0.7 and summary["users"] == ["1000", "1001"]
    lo, hi = summary["text_recall"]["ci"]
    assert lo <= summary["text_recall"]["value"] <= hi and summary["text_recall"]["n"] == 2


def test_clear_errors_and_partial_releases(tmp_path):
    res = run(tmp_path, "--dataset", str(DEMO), "--user", "9999", "--method", "gold")
    assert res.returncode == 2 and "no user 9999" in res.stderr
    res = run(tmp_path, "--dataset", str(DEMO), "--user", "1000", "--method", "h2memory")
    assert res.returncode == 1 and "pal memory build" in res.stderr and "--build" in res.stderr
    root = tmp_path / "partial"
    shutil.copytree(DEMO, root)
    shutil.rmtree(root / "situation")
    res = run(tmp_path, "--dataset", str(root), "--user", "1000", "--method", "gold")
    assert res.returncode == 0, res.stderr
    assert "not measurable here: situation needs situation/situation.json" in res.stdout
