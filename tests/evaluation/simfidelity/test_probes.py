"""Counterfactual probes for over-cooperation (evaluation/simfidelity/probes.py) on the demo users: the dataset's
dialogue up to its first Solution Feedback, the proposal replaced by a disliked or a liked candidate; always-accept
shows over-cooperation there, a user who keeps their preferences does not; stored, so a probe is asked once; and
`pal simulate fidelity --probes` prints them as rows of their own."""

from __future__ import annotations

import time

import pytest

from backends.embeddings import HashEmbedder
from evaluation.simfidelity.aggregate import leaderboard
from evaluation.simfidelity.probes import (
    build_cases,
    interleaved,
    measure_probes,
    probe_history,
    reference_side,
)
from evaluation.simfidelity.service import matchers
from palset.loader import load_dataset
from palset.vocab import Act
from sim.reference import PHRASES
from sim.types import Utterance
from testkit.workspace import make_workspace
from tests.conftest import DEMO


@pytest.fixture(scope="module")
def demo():
    return load_dataset(DEMO)


@pytest.fixture
def mf():
    emb = HashEmbedder()
    return matchers(lambda _language: emb)


def test_probes_cover_every_demo_user_with_disliked_and_liked_candidates(demo):
    cases = build_cases(demo)
    assert len(cases) >= 100 and {c.user_id for c in cases} == set(demo.users)
    assert {c.label for c in cases} == {"pos", "neg"} and sum(c.label == "neg" for c in cases) >= 50
    case = next(c for c in cases if c.label == "neg")
    history, schedule = probe_history(demo, case)
    last = history[-1]
    assert last.side == "assistant" and last.act is Act.SOLUTION_PROPOSAL and last.content == case.candidate
    assert len(history) == 2 * (case.turn_no - 1) and schedule[case.turn_no - 1][0] is Act.SOLUTION_FEEDBACK
    first = interleaved(cases)[:2 * len(demo.users)]
    assert {c.user_id for c in first} == set(demo.users) and {c.label for c in first} == {"pos", "neg"}


class KeepsPreferences:
    """A user side that rejects exactly the disliked candidates (what the gold implies), counting its calls."""

    kind = "keeps-preferences"

    def __init__(self, disliked: set[str], language: str):
        self.disliked, self.phrases, self.calls = disliked, PHRASES[language], 0

    def say(self, turn_no, act, history, salt, on_token=None):
        self.calls += 1
        proposal = history[-1].content
        text = self.phrases["reject" if proposal in self.disliked else "accept"]
        return Utterance(turn_no=turn_no, side="user", actor="simulator", act=act, content=text,
                         created_at=time.time()), False


def test_always_accept_shows_over_cooperation_and_a_user_keeping_preferences_does_not(demo, mf, tmp_path):
    ws = make_workspace(tmp_path)
    cases = build_cases(demo)
    floor, errors = measure_probes(demo, cases, "always-accept", reference_side("always-accept"), "always-accept",
                                   mf, ws.simfidelity)
    assert not errors and len(floor) == len(cases)
    (row,) = leaderboard(floor)
    assert row["simulator"] == "always-accept probe" and row["counts"]["verdict_matched"] >= 100
    assert row["disliked_acceptance"] == 1.0 and row["over_cooperation"] == pytest.approx(1 - row["implied_acceptance"])

    disliked = {c.candidate for c in cases if c.label == "neg"}
    sides: list[KeepsPreferences] = []

    def side_for(user, _session, _topic, _run_id):
        sides.append(KeepsPreferences(disliked, user.language))
        return sides[-1]

    keeps, errors = measure_probes(demo, cases, "keeps", side_for, "scripted", mf, ws.simfidelity)
    (row,) = leaderboard(keeps)
    assert not errors and row["disliked_acceptance"] == 0.0 and row["over_cooperation"] == pytest.approx(0.0)
    assert row["verdict_consistency"] == 1.0
    again, _ = measure_probes(demo, cases, "keeps", side_for, "scripted", mf, ws.simfidelity)
    assert len(sides) == len(cases) and len(again) == len(cases)  # stored: no probe asked twice
    stored = {r.simulator for r in ws.simfidelity.results(floor[0].dataset)}
    assert stored == {"always-accept probe", "keeps probe"}  # so the Evaluate page's board shows them


@pytest.mark.slow(seconds=15)
def test_pal_simulate_fidelity_probes_prints_the_probe_rows(tmp_path):
    from tests.cli.test_simfid_cmds import pal

    res = pal(tmp_path, "simulate", "fidelity", "--dataset", str(DEMO), "--probes", "always-accept,random-verdict",
              "--probe-limit", "40")
    assert res.returncode == 0, res.stderr
    rows = [line.split() for line in res.stdout.splitlines()]
    assert any(r[:2] == ["always-accept", "probe"] for r in rows) and any(r[:2] == ["random-verdict", "probe"]
                                                                          for r in rows)
    assert "[probe 40/40]" in res.stderr
    bad = pal(tmp_path, "simulate", "fidelity", "--dataset", str(DEMO), "--probes", "replay")
    assert bad.returncode == 2 and "unknown probe simulator 'replay'" in bad.stderr
