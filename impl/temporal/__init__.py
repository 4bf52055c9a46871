"""Runs on Temporal: one workflow type for every table, its external effects as activities,
under the same started/unknown/decided protocol as the SQLite and PostgreSQL runtimes."""
