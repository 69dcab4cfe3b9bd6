"""`pal llm check` as users run it: against the real bundled model, and against a dead endpoint."""

import os
import subprocess

import pytest

from backends.llm.local_server import free_port
from tests.cli.test_dataset_cmds import PAL


def run(env_extra, *args):
    env = {**os.environ, **env_extra}
    return subprocess.run([PAL, "llm", "check", *args], capture_output=True, text=True, timeout=240, env=env)


@pytest.mark.slow(seconds=60)
@pytest.mark.local_model
def test_check_starts_the_local_model_and_parses_structured_output(tmp_path):
    """The default model as a user gets it (Qwen2.5-Coder-0.5B, threads chosen by measurement)."""
    res = run({"PAL_HOME": str(tmp_path)}, "--role", "judge")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "judge: local local:Qwen2.5-Coder-0.5B-Instruct-Q4_K_M" in res.stdout
    assert "tokens/s" in res.stdout and "structured: parsed" in res.stdout


def test_check_fails_clearly_and_never_prints_the_key(tmp_path):
    env = {"PAL_HOME": str(tmp_path), "PAL_JUDGE_PROVIDER": "openai", "PAL_JUDGE_MODEL": "gpt-x",
           "PAL_JUDGE_BASE_URL": f"http://127.0.0.1:{free_port()}/v1", "PAL_JUDGE_API_KEY": "sk-do-not-print-me",
           "PAL_JUDGE_MAX_RETRIES": "0"}
    res = run(env, "--role", "judge")
    assert res.returncode == 1
    assert "FAILED" in res.stdout and "cannot connect" in res.stdout
    assert "sk-do-not-print-me" not in res.stdout + res.stderr


def test_config_errors_exit_2_with_a_message(tmp_path):
    res = run({"PAL_HOME": str(tmp_path), "PAL_JUDGE_TEMPERATURE": "very hot"}, "--role", "judge")
    assert res.returncode == 2 and "role judge: temperature" in res.stderr


@pytest.mark.slow(seconds=5)
def test_check_reports_what_a_json_object_only_reasoning_endpoint_can_do(tmp_path):
    from testkit.fake_endpoints import FakeEndpoint

    with FakeEndpoint(formats=("json_object", None), think="field", window=8192).running() as server:
        env = {"PAL_HOME": str(tmp_path), "PAL_JUDGE_PROVIDER": "openai", "PAL_JUDGE_MODEL": "fake-model",
               "PAL_JUDGE_BASE_URL": server.base_url, "PAL_JUDGE_MAX_RETRIES": "0"}
        res = run(env, "--role", "judge")
        again = run(env, "--role", "judge", "--quick")
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    assert "structured: parsed" in out and "with json_object" in out
    assert "json_schema: refused: request rejected (400)" in out and "json_object: ok" in out and "prompt: ok" in out
    assert "context window: 8,192 tokens (endpoint /v1/models)" in out
    assert "streaming: yes" in out and "seed: " in out
    assert "reasoning: emitted" in out and "THOUGHT-LEAK" not in out
    assert again.returncode == 0 and "with json_object" in again.stdout and "structured modes" not in again.stdout
    schemas = [r for r in server.requests if (r.get("response_format") or {}).get("type") == "json_schema"
               and not r["response_format"]["json_schema"].get("strict")]
    assert len(schemas) == 2  # the first run's negotiation and its probe of json_schema alone; the second: none


def test_models_lists_the_catalog_and_refuses_an_unknown_name(tmp_path):
    res = subprocess.run([PAL, "llm", "models"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PAL_HOME": str(tmp_path)})
    assert res.returncode == 0, res.stderr
    assert "Qwen2.5-Coder-0.5B-Instruct-Q4_K_M (default): Qwen2.5-Coder-0.5B-Instruct · 0.5B · Q4_K_M · 469 MiB" in res.stdout
    assert "SmolLM2-135M-Instruct-Q4_1: SmolLM2-135M-Instruct · 135M · Q4_1 · 94 MiB" in res.stdout
    res = subprocess.run([PAL, "llm", "models", "--prepare", "gpt-4o"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "no local model is called 'gpt-4o'" in res.stderr
