"""PLUM (Magister et al., 2025): a user's past conversations as a per-user LoRA adapter.

QA pairs are written per session (:mod:`memory.plum.qa`), a LoRA adapter on a small causal LM is
trained on them session by session with a weighted cross-entropy (:mod:`memory.plum.train`),
checkpointed per session under ``PAL_HOME`` (:mod:`memory.plum.adapter`), and the assistant role
answers with base model + adapter (:mod:`memory.plum.provider`).
"""
