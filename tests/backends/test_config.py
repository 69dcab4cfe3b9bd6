import pytest

from backends.config import ROLES, ConfigError, load_config


def test_defaults_use_the_bundled_model_for_every_role():
    cfg = load_config(secrets={}, env={})
    assert set(cfg.roles) == set(ROLES)
    assert all(cfg.role(r).provider == "local" for r in ROLES)
    assert cfg.role("judge").temperature == 0.0 and cfg.role("assistant").temperature == 0.7


def test_layers_secrets_then_env_then_session_overrides():
    secrets = {"llm": {"default": {"provider": "openai", "base_url": "http://s/v1", "model": "m-secret", "api_key": "k1"},
                       "judge": {"model": "judge-secret", "temperature": 0.3}}}
    env = {"PAL_DEFAULT_MODEL": "m-env", "PAL_JUDGE_BASE_URL": "http://judge/v1", "PAL_JUDGE_TEMPERATURE": "0"}
    cfg = load_config(secrets=secrets, env=env, overrides={"assistant": {"model": "m-session"}})
    assert cfg.role("user_simulator").model == "m-env"  # environment wins over secrets
    assert cfg.role("judge").model == "m-env"  # PAL_DEFAULT_* wins over [llm.judge]
    assert cfg.role("judge").base_url == "http://judge/v1" and cfg.role("judge").temperature == 0.0
    assert cfg.role("assistant").model == "m-session"
    assert cfg.role("assistant").api_key.get_secret_value() == "k1"


def test_keys_never_appear_in_repr_or_public_view():
    cfg = load_config(secrets={}, env={"PAL_DEFAULT_API_KEY": "sk-very-secret", "PAL_DEFAULT_PROVIDER": "openai",
                                       "PAL_DEFAULT_MODEL": "gpt"})
    role = cfg.role("assistant")
    assert "sk-very-secret" not in repr(role) and "sk-very-secret" not in role.model_dump_json()
    assert role.public()["api_key_set"] is True and "api_key" not in role.public()


def test_clear_errors_for_bad_config():
    with pytest.raises(ConfigError, match=r"\[llm.jduge\] is not a role"):
        load_config(secrets={"llm": {"jduge": {}}}, env={})
    with pytest.raises(ConfigError, match="role judge: temperature"):
        load_config(secrets={}, env={"PAL_JUDGE_TEMPERATURE": "hot"})
    with pytest.raises(ConfigError, match="needs a model"):
        load_config(secrets={}, env={"PAL_ASSISTANT_PROVIDER": "openai"})
    with pytest.raises(ConfigError, match="unknown|Extra inputs"):
        load_config(secrets={"llm": {"default": {"modle": "x"}}}, env={})


LAB = {"PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_BASE_URL": "https://llm.lab.example/v1",
       "PAL_DEFAULT_MODEL": "m", "PAL_DEFAULT_API_KEY": "sk-lab-key-123456"}


@pytest.mark.parametrize("override", [{"base_url": "http://evil.example/v1"}, {"provider": "local"},
                                      {"base_url": "https://llm.lab.example/v2"}])
def test_an_override_of_provider_or_base_url_never_keeps_the_configured_key(override):
    cfg = load_config(secrets={}, env=LAB, overrides={"judge": override})
    assert cfg.role("judge").api_key is None
    assert cfg.role("assistant").api_key.get_secret_value() == "sk-lab-key-123456"
    own = load_config(secrets={}, env=LAB, overrides={"judge": {**override, "api_key": "sk-mine"}})
    assert own.role("judge").api_key.get_secret_value() == "sk-mine"
    same = load_config(secrets={}, env=LAB, overrides={"judge": {"model": "other", "base_url": None,
                                                                 "provider": "openai"}})
    assert same.role("judge").api_key.get_secret_value() == "sk-lab-key-123456"  # same endpoint: key stays


def test_credentials_in_urls_are_masked_in_the_public_view():
    from backends.config import mask_url

    cfg = load_config(secrets={}, env={**LAB, "PAL_DEFAULT_BASE_URL": "https://bob:hunter2@llm.lab.example:8443/v1"})
    assert cfg.role("judge").public()["base_url"] == "https://***@llm.lab.example:8443/v1"
    assert mask_url("http://host/v1") == "http://host/v1" and mask_url(None) is None


def test_allowed_endpoints_refuse_other_hosts_with_a_clear_error():
    env = {**LAB, "PAL_ALLOWED_ENDPOINTS": "llm.lab.example, 127.0.0.1:8000"}
    assert load_config(secrets={}, env=env).role("judge").base_url == "https://llm.lab.example/v1"
    load_config(secrets={}, env=env, overrides={"judge": {"base_url": "http://127.0.0.1:8000/v1"}})
    for url in ("http://127.0.0.1:9999/v1", "http://169.254.169.254/v1", "http://llm.lab.example.evil.io/v1"):
        with pytest.raises(ConfigError, match="role judge: endpoint host .* is not in PAL_ALLOWED_ENDPOINTS"):
            load_config(secrets={}, env=env, overrides={"judge": {"base_url": url}})
    load_config(secrets={}, env=env, overrides={"judge": {"provider": "local"}})  # the bundled model is always fine


def test_the_client_fingerprint_changes_when_only_a_key_changes():
    from backends.config import config_fingerprint

    a = config_fingerprint(load_config(secrets={}, env=LAB))
    b = config_fingerprint(load_config(secrets={}, env={**LAB, "PAL_DEFAULT_API_KEY": "sk-other-key-999"}))
    assert a != b and "sk-lab-key-123456" not in a
    assert a == config_fingerprint(load_config(secrets={}, env=LAB))
