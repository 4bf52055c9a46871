"""Durable runs: the journal protocol, the run's fold over it, effects under started/completed, leases."""
