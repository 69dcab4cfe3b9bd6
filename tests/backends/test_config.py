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
