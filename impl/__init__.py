"""The reference runtime: a transitions-based engine, a durable journal and an async agent driver."""
