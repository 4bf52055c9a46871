"""Journal stores: in memory (crashable), SQLite, PostgreSQL, and opening one by URL. Imports only
the journal and lease protocols they implement (impl/durable/journal.py, leases.py)."""
