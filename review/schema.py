"""Tables of human review: accounts, batches, items, assignments, answers.

Applied by the composition root with every other domain's migrations (see :mod:`backends.store.schema`)."""

from __future__ import annotations

from backends.store.schema import Migration

MIGRATIONS: list[Migration] = [
    (
        5,
        'review accounts, batches, assignments and answers',
        """
        CREATE TABLE review_accounts (
            name TEXT PRIMARY KEY,
            role TEXT NOT NULL,
            password_hash TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE TABLE review_batches (
            batch_id TEXT PRIMARY KEY,
            title TEXT NOT NULL,
            task TEXT NOT NULL,
            dataset TEXT NOT NULL,
            seed INTEGER NOT NULL,
            overlap INTEGER NOT NULL,
            annotators TEXT NOT NULL,
            guidelines TEXT NOT NULL,
            data TEXT NOT NULL,
            created_by TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE TABLE review_items (
            batch_id TEXT NOT NULL REFERENCES review_batches(batch_id) ON DELETE CASCADE,
            item_no INTEGER NOT NULL,
            item_key TEXT NOT NULL,
            payload TEXT NOT NULL,
            PRIMARY KEY (batch_id, item_no)
        );
        CREATE TABLE review_assignments (
            batch_id TEXT NOT NULL REFERENCES review_batches(batch_id) ON DELETE CASCADE,
            item_no INTEGER NOT NULL,
            annotator TEXT NOT NULL,
            PRIMARY KEY (batch_id, item_no, annotator)
        );
        CREATE INDEX review_assignments_annotator ON review_assignments(annotator, batch_id, item_no);
        CREATE TABLE review_answers (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            batch_id TEXT NOT NULL REFERENCES review_batches(batch_id) ON DELETE CASCADE,
            item_no INTEGER NOT NULL,
            annotator TEXT NOT NULL,
            question TEXT NOT NULL,
            value TEXT NOT NULL,
            created_at REAL NOT NULL,
            UNIQUE (batch_id, item_no, annotator, question)
        )
        """,
    ),
    (
        10,
        'account e-mail for single sign-on',
        """
        ALTER TABLE review_accounts ADD COLUMN email TEXT;
        CREATE UNIQUE INDEX review_accounts_email ON review_accounts(email) WHERE email IS NOT NULL
        """,
    ),
]
