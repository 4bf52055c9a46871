"""Fault injection: crashes at every write boundary (in-process and with real SIGKILLs), agents
killed mid-run, chaos campaigns against real processes. The one part of the checker that drives
impl; imports spec, impl and verify."""
