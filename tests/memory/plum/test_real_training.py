"""A real (tiny) PLUM run on CPU: the bundled SmolLM2-135M, two sessions of a demo user, scripted QA pairs.

Asserts the weighted loss falls, the adapter moves the greedy answer to a trained question towards
the trained answer (the base model does not know it), the adapter round-trips to disk, the provider
answers as of a session with the checkpoint before it, and a trained session is never trained again.
"""

from __future__ import annotations

import pytest

from backends.llm.types import ChatRequest, Message
from memory.plum.model import detach, load_base
from tests.memory.plum.conftest import qa_reply

pytestmark = [pytest.mark.slow(seconds=90), pytest.mark.local_model]
torch = pytest.importorskip("torch")

QUESTION = "What did I tell you about my brother's exam?"
ANSWER = "You told me Callum failed a maths module twice."
CONFIG = {"pairs_per_session": 1, "negatives_per_session": 1, "epochs": 6, "batch_size": 8, "max_length": 128,
          "lr": 3e-3, "rank": 8, "alpha": 16, "max_new_tokens": 24, "threads": 1}


def f1(pred: str, gold: str) -> float:
    p, g = pred.lower().split(), gold.lower().split()
    common = sum(min(p.count(w), g.count(w)) for w in set(g))
    return 0.0 if not common else 2 * common / (len(p) + len(g))


@pytest.fixture(scope="module")
def base():
    torch.set_num_threads(1)
    return load_base(None, threads=1)


def ask(provider, question: str) -> str:
    req = ChatRequest(model="x", messages=[Message(role="user", content=question)], temperature=0.0, max_tokens=24)
    return provider.complete(req).text


def test_tiny_training_run_learns_and_round_trips(build_memory, demo_user, base):
    reply = qa_reply(positives=[{"topic": "brother's exam", "question": QUESTION, "answer": ANSWER}],
                     negatives=["a car insurance renewal"])
    builder, _ = build_memory("plum", demo_user, reply, config=CONFIG, dataset="demo")
    builder.run(until_session=1)
    method = builder.impl
    ckpts = method.adapters.checkpoints()
    assert [c.record.sample_id for c in ckpts] == [s.sample_id for s in demo_user.sessions[:2]]
    first, second = (c.record for c in ckpts)
    assert first.pairs == 5 and first.steps == 6 and second.started_from == first.sample_id
    assert first.losses[-1] < first.losses[0] and first.losses[-1] < first.loss_before
    assert second.loss_before < first.loss_before  # the same question was already learnt in session 0
    assert first.hyper["weights"] == {"template": 0.1, "question": 0.5, "answer": 1.0} and first.hyper["lr"] == 3e-3
    assert first.trainable_params > 0 and first.adapter_bytes >= 4 * first.trainable_params
    assert first.tokens["answer"] > 0 and first.device == ("cuda" if torch.cuda.is_available() else "cpu")

    # the adapter (as of after session 1) answers the trained question; the base model does not know it
    provider = method.assistant_provider(demo_user.sessions[2])
    assert provider.checkpoint().record.sample_id == demo_user.sessions[1].sample_id
    assert provider.endpoint.endswith(f"@{second.sample_id}-{second.version}")
    adapted = ask(provider, QUESTION)
    base_answer = ask(method.assistant_provider(demo_user.sessions[0]), QUESTION)  # before any training
    assert method.assistant_provider(demo_user.sessions[0]).endpoint.endswith("@base")
    assert adapted != base_answer and f1(adapted, ANSWER) > f1(base_answer, ANSWER)
    assert "callum" in adapted.lower()

    # round trip: drop the loaded weights, load them again from disk → the same greedy answer
    detach(base, provider.checkpoint().adapter_name)
    assert ask(provider, QUESTION) == adapted

    # a session already trained is not trained again (resume after a crash between training and commit)
    from memory.plum.train import train_session

    again = train_session(base, method.adapters, sample_id=first.sample_id, session_index=first.session_index,
                          position=0, pairs=[("q", "a")], hyper=method.hyper)
    assert again.record.version == first.version and again.record.created_at == first.created_at
