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
    (
        75,
        "sign-in sessions (hashed ids, idle and absolute expiry, bound to the password and role); single sign-on "
        "identities bound to issuer + subject; the time before which an account's sign-ins are ended",
        """
        CREATE TABLE auth_sessions (
            id_hash TEXT PRIMARY KEY,
            account TEXT NOT NULL REFERENCES review_accounts(name) ON DELETE CASCADE ON UPDATE CASCADE,
            binding TEXT NOT NULL,
            via TEXT NOT NULL,
            created_at REAL NOT NULL,
            last_seen REAL NOT NULL,
            expires_at REAL NOT NULL,
            idle_s REAL NOT NULL,
            client TEXT,
            user_agent TEXT
        );
        CREATE INDEX auth_sessions_account ON auth_sessions(account);
        ALTER TABLE review_accounts ADD COLUMN sso_issuer TEXT;
        ALTER TABLE review_accounts ADD COLUMN sso_subject TEXT;
        ALTER TABLE review_accounts ADD COLUMN sessions_after REAL NOT NULL DEFAULT 0;
        CREATE UNIQUE INDEX review_accounts_sso ON review_accounts(sso_issuer, sso_subject)
            WHERE sso_subject IS NOT NULL
        """,
    ),
    (
        111,
        "sign-in sessions bound to the page that signed in: the digest of the token its websocket presents and "
        "the origin it signed in from",
        """
        ALTER TABLE auth_sessions ADD COLUMN page_token TEXT;
        ALTER TABLE auth_sessions ADD COLUMN origin TEXT
        """,
    ),
]
