"""AppTest of the Memory page with PLUM: the Build button drives QA writing and (here, recorded) training
session by session, and the PLUM tab shows the QA pairs per session, the loss curve and the probe box."""

from __future__ import annotations

import pytest

from backends.config import ROLES, load_config
from backends.llm.fake import ScriptedLLM
from memory.methods.plum import Plum
from memory.plum.adapter import RECORD, WEIGHTS, Checkpoint, TrainRecord
from tests.memory.plum.conftest import qa_reply
from tests.pages.apptest import app_workspace, open_page


@pytest.fixture(autouse=True)
def plum_env(tmp_path, monkeypatch):
    """Hash embedder, a temporary PAL_HOME, a scripted QA writer as the page's client, recorded training."""
    monkeypatch.setenv("PAL_EMBEDDER", "hash")
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    fake = ScriptedLLM(qa_reply())
    client = app_workspace().with_config(load_config(secrets={}, env={})).llm(providers=dict.fromkeys(ROLES, fake))
    import ui.memory.common

    monkeypatch.setattr(ui.memory.common, "llm_client", lambda: client)
    trained: list[str] = []

    def fake_train(self, session, pairs):
        pos = [s.sample_id for s in self.ctx.user.sessions].index(session.sample_id)
        folder = self.adapters.folder(pos, session.sample_id)
        folder.mkdir(parents=True, exist_ok=True)
        rec = TrainRecord(sample_id=session.sample_id, session_index=session.index, position=pos, pairs=len(pairs),
                          steps=3, losses=[3.0 - pos * 0.1, 2.0, 1.5], loss_before=3.2, hyper=self.hyper.model_dump(),
                          version=f"v{pos}")
        (folder / WEIGHTS).write_bytes(b"weights")
        (folder / RECORD).write_text(rec.model_dump_json())
        trained.append(session.sample_id)
        return Checkpoint(folder=folder, record=rec)

    monkeypatch.setattr(Plum, "_train", fake_train)
    return trained


def test_build_then_plum_tab_shows_pairs_curve_and_probe(plum_env):
    at = open_page("memory", user="1000", method="plum")
    at.button(key="mem_build").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.metric[0].value == "18 / 18" and not at.error
    assert plum_env == [f"1000_sample{i}" for i in range(9)]  # trained once per session, in time order
    at.query_params["tab"] = "PLUM"
    at.query_params["session"] = "1000_sample2"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    frames = [d.value for d in at.dataframe]
    qa = next(f for f in frames if "polarity" in f.columns)
    assert set(qa["polarity"]) == {"positive", "negative"} and "opener" in set(qa["source"])
    assert "QA pairs of 1000\\_sample2" in "\n".join(m.value for m in at.markdown)
    sessions = next(f for f in frames if "loss before" in f.columns)
    assert list(sessions["session"]) == [f"1000_sample{i}" for i in range(9)]
    chart = at.get("plotly_chart")
    assert chart and "Training loss" in chart[0].proto.spec
    assert at.text_input(key="plum_probe_q") is not None
    assert at.button(key="plum_probe").disabled
