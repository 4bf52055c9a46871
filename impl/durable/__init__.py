"""Durable runs: the run's fold over the journal, effects under started/completed, heartbeats.
Imports spec, the engine, the driver and the stores (with the journal and lease protocols)."""
