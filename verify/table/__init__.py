"""One table: exploration (scalar and batched), the named checks, the graph passes, liveness under
fairness, replay of a trace. Imports spec and the kernel."""
