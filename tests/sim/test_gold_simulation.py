"""The gold memory (oracle upper bound) as a simulated assistant's memory: a fixed run over a query topic retrieves
gold situations of the session being answered and earlier topics only, and never shows the query topic's answers."""

from tests.sim.conftest import (
    sim_env,  # noqa: F401 - the fixture
    sim_for,
)


def test_a_run_with_the_gold_memory(demo, sim_env, monkeypatch):  # noqa: F811
    monkeypatch.setenv("PAL_EMBEDDER", "hash")
    make_llm, store = sim_env
    sim, fake = sim_for(demo, make_llm, store, method="gold")
    record = sim.run()
    assert record.status == "finished"
    assistant = [u for u in record.utterances if u.side == "assistant"]
    layers = {i["layer"] for u in assistant for i in u.trace["items"]}
    assert {"situation", "topic_outline"} <= layers
    for u in assistant:
        for item in u.trace["items"]:
            if item["layer"] == "situation":  # the logs of the session being answered
                assert item["session"] == "1000_sample7"
            elif item["layer"] == "background":  # as updated by those logs at the latest
                assert item["session"] <= "1000_sample7"
            else:
                assert item["session"] < "1000_sample7", item
    topic = demo.users["1000"].session("1000_sample7").topics[0].topic
    answers = [topic.requirement, *topic.implicit_needs, *(c.solution for c in topic.candidate_solutions)]
    prompts = "\n".join(u.prompt for u in assistant)
    assert not [a for a in answers if a in prompts]
