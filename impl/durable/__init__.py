"""Durable runs: the journal protocol, the run's fold over it, effects under started/completed, leases.
The journal and lease protocols import spec only (the stores implement them); the rest also the
engine, the driver and the stores."""
