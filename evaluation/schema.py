"""Tables of FairEval judgments, single-turn bench results and PersonaMem-v2 answer records.

Applied by the composition root with every other domain's migrations (see :mod:`backends.store.schema`)."""

from __future__ import annotations

from backends.store.schema import Migration

MIGRATIONS: list[Migration] = [
    (
        4,
        'evaluation judgments and single-turn bench results',
        """
        CREATE TABLE judgments (
            judgment_key TEXT PRIMARY KEY,
            dataset TEXT NOT NULL,
            user_id TEXT NOT NULL,
            sample_id TEXT NOT NULL,
            topic_key TEXT NOT NULL,
            aspect TEXT NOT NULL,
            method_a TEXT NOT NULL,
            method_b TEXT NOT NULL,
            run_a TEXT NOT NULL,
            run_b TEXT NOT NULL,
            k INTEGER NOT NULL,
            judge_model TEXT NOT NULL,
            prompt_version TEXT NOT NULL,
            data TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX judgments_pair ON judgments(dataset, method_a, method_b, aspect);
        CREATE TABLE bench_results (
            result_key TEXT PRIMARY KEY,
            dataset TEXT NOT NULL,
            user_id TEXT NOT NULL,
            sample_id TEXT NOT NULL,
            topic_key TEXT NOT NULL,
            method TEXT NOT NULL,
            task TEXT NOT NULL,
            model TEXT NOT NULL,
            prompt_version TEXT NOT NULL,
            data TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX bench_results_method ON bench_results(dataset, method, task)
        """,
    ),
    (
        6,
        'PersonaMem-v2 answer records',
        """
        CREATE TABLE personamem_records (
            history_key TEXT NOT NULL,
            method TEXT NOT NULL,
            item_id TEXT NOT NULL,
            form TEXT NOT NULL,
            seed INTEGER,
            data TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (history_key, method, item_id, form)
        )
        """,
    ),
    (
        20,
        "memory fidelity against the gold memory",
        """
        CREATE TABLE memory_fidelity (
            fidelity_key TEXT PRIMARY KEY,
            dataset TEXT NOT NULL,
            user_id TEXT NOT NULL,
            method TEXT NOT NULL,
            build_id TEXT NOT NULL,
            embedder TEXT NOT NULL,
            threshold REAL NOT NULL,
            data TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX memory_fidelity_user ON memory_fidelity(dataset, user_id, method)
        """,
    ),
    (
        27,
        "simulator fidelity: per-turn checks of simulated users and their figures",
        """
        CREATE TABLE sim_fidelity (
            key TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            dataset TEXT NOT NULL,
            user_id TEXT NOT NULL,
            method TEXT NOT NULL,
            simulator TEXT NOT NULL,
            embedder TEXT NOT NULL,
            data TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX sim_fidelity_run ON sim_fidelity(dataset, run_id)
        """,
    ),
    (
        151,
        "instrument scores: a stance or persona instrument (the rules, a judge model) measured on the labelled corpora",
        """
        CREATE TABLE instrument_scores (
            key TEXT PRIMARY KEY,
            instrument TEXT NOT NULL,
            model TEXT NOT NULL,
            version TEXT NOT NULL,
            data TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX instrument_scores_by ON instrument_scores(instrument, model, created_at)
        """,
    ),
]
