"""AppTest of the Audit page: admins see who changed what and when, filter it, and export it (formulas inert)."""

from tests.pages.apptest import app_workspace, open_page


def test_admins_see_filter_and_export_the_audit_log(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    audit = app_workspace().audit
    audit.record("boss", "account.add", "ann", role="annotator")
    audit.record("res", "review.batch_create", "=HYPERLINK(\"https://evil.example\")", items=3)
    audit.record("boss", "memory.forget", "b1/m1", forgotten=["m1", "m2"])
    at = open_page("audit")
    table = at.dataframe[0].value
    assert list(table["action"]) == ["memory.forget", "review.batch_create", "account.add"]  # newest first
    assert list(table["actor"]) == ["boss", "res", "boss"] and table["time"].str.match(r"\d{4}-\d\d-\d\d ").all()
    csv_button = next(b for b in at.get("download_button") if b.proto.label == "Export CSV")
    assert csv_button is not None
    at.selectbox(key="audit_action").set_value("account.add").run()
    assert list(at.dataframe[0].value["target"]) == ["ann"]
    at.selectbox(key="audit_action").set_value("(all)").run()
    at.text_input(key="audit_actor").input("res").run()
    assert list(at.dataframe[0].value["action"]) == ["review.batch_create"]


def test_audit_csv_neutralises_formulas():
    import pandas as pd

    from backends.csvsafe import frame_to_csv, neutralise, rows_to_csv

    assert neutralise("=1+1") == "'=1+1" and neutralise("@SUM(A1)") == "'@SUM(A1)" and neutralise(-3) == -3
    assert neutralise("plain") == "plain" and neutralise("+44 7700") == "'+44 7700"
    text = rows_to_csv([{"a": "=HYPERLINK(\"x\")", "b": 2}])
    assert "\n'=HYPERLINK" in text.replace('"', "") and ",2" in text
    assert frame_to_csv(pd.DataFrame({"=x": ["-1 bad", "ok"]})).splitlines() == ["'=x", "'-1 bad", "ok"]
