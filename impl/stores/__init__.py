"""Journal stores: in memory (crashable), SQLite, PostgreSQL, and opening one by URL."""
