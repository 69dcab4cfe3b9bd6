"""One driver per run: two tabs (or a tab and ``pal simulate``) on the same run never loop on a turn; the
lease keeps a second driver out; a lost insert reloads the run instead of asking again."""

from __future__ import annotations

import sqlite3

import pytest

from palset.loader import load_dataset
from sim.runner import RunElsewhere
from sim.service import make_spec
from tests.conftest import DEMO
from tests.sim.conftest import default_reply


@pytest.fixture(scope="module")
def demo():
    return load_dataset(DEMO)


def open_tab(demo, make_llm, store, reply=default_reply, driver=None):
    llm, fake = make_llm(reply)
    sim = make_llm.ws.open_simulation(demo, make_spec(demo, "1000", "1000_sample7", "topic-1", "vanilla-log"), llm)
    assert sim.store is store
    sim.driver = driver
    return sim, fake


def llm_call_rows(store) -> int:
    return sqlite3.connect(store.db.path).execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0]


def test_two_drivers_taking_turns_write_each_utterance_once_with_one_llm_call_each(demo, sim_env):
    make_llm, store = sim_env
    a, _ = open_tab(demo, make_llm, store)
    b, _ = open_tab(demo, make_llm, store)  # opened before A wrote anything: stale from the first step
    steps = 0
    while a.next_slot() is not None or b.next_slot() is not None:
        for sim in (a, b):
            sim.step()
        steps += 1
        assert steps < 50, "the drivers loop on a turn"
    final = store.load(a.record.run_id)
    keys = [(u.turn_no, u.side) for u in final.utterances]
    assert final.status == "finished" and len(keys) == len(set(keys)) == 2 * len(final.schedule)
    assert llm_call_rows(store) == len(keys)  # one llm_calls row per utterance


def test_a_lost_insert_reloads_the_run_instead_of_asking_again(demo, sim_env):
    make_llm, store = sim_env
    a, _ = open_tab(demo, make_llm, store)
    raced = []

    def slow_reply(req):  # while B is asking, A saves the very same turn side
        if not raced:
            raced.append(True)
            a.step()
        return default_reply(req)

    b, fake_b = open_tab(demo, make_llm, store, reply=slow_reply)
    b.step()  # B's insert of turn 1 (user) is lost to A's
    assert [(u.turn_no, u.side, u.actor) for u in b.record.utterances] == [(1, "user", "simulator")]
    assert b.record.utterances[0].content == store.load(a.record.run_id).utterances[0].content  # A's, reloaded
    asked = len(fake_b.requests)
    b.step()  # the next slot, not the lost one again
    assert len(fake_b.requests) == asked + 1 and [(u.turn_no, u.side) for u in b.record.utterances] == [
        (1, "user"), (1, "assistant")]
    assert llm_call_rows(store) == 3  # 2 utterances + the one lost answer, never a loop


def test_the_lease_keeps_a_second_driver_out_until_the_first_lets_go(demo, sim_env):
    make_llm, store = sim_env
    tab1, _ = open_tab(demo, make_llm, store, driver="tab:one")
    tab2, fake2 = open_tab(demo, make_llm, store, driver="tab:two")
    tab1.step()
    with pytest.raises(RunElsewhere, match="running elsewhere.*tab:one"):
        tab2.step()
    assert not fake2.requests and store.driver(tab1.record.run_id).holder == "tab:one"
    with pytest.raises(RunElsewhere):
        tab2.run()  # run() leaves another driver's run alone: not marked failed
    assert store.load(tab1.record.run_id).status == "running"
    tab1.stop()  # releases
    assert store.driver(tab1.record.run_id) is None
    tab2.record.status = "running"
    tab2.step()
    assert store.driver(tab2.record.run_id).holder == "tab:two" and len(store.load(tab2.record.run_id).utterances) == 2


def test_an_expired_lease_can_be_taken_over(sim_env):
    _, store = sim_env
    assert store.take_lease("r1", "gone", ttl_s=0.0)
    assert store.driver("r1") is None and store.take_lease("r1", "new")
    assert not store.take_lease("r1", "third") and store.take_lease("r1", "new")  # the holder renews
    store.release_lease("r1", "third")  # only the holder releases
    assert store.driver("r1").holder == "new"


def test_a_dead_processs_lease_is_free_at_once(sim_env):
    import subprocess
    import sys

    from backends.store.leases import holder_is_dead, process_holder

    _, store = sim_env
    child = subprocess.run([sys.executable, "-c", "import os, socket; print(os.getpid(), socket.gethostname())"],
                           capture_output=True, text=True, check=True).stdout.split()
    dead = f"pal simulate batch-x pid={child[0]}@{child[1]}"
    assert holder_is_dead(dead) and not holder_is_dead(process_holder("me")) and not holder_is_dead("tab:abc")
    assert store.take_lease("r2", dead)
    assert store.take_lease("r2", process_holder("pal simulate batch-y"))  # the killed batch blocks nothing
