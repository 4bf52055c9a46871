"""Journal stores: the journal and lease protocols (journal.py, leases.py, which import nothing of
the package), the stores that implement them, in memory (crashable), SQLite, PostgreSQL, and
opening one by URL. Imports nothing of the package but itself."""
