"""SQLite stores under PAL_HOME: the run store (one versioned schema) and the response cache."""
