"""The reference runtime: a transitions-based engine, a durable journal and an async agent driver.
Imports spec only; never the checker or the command line (docs/layout.md orders its parts)."""
