"""Workers serving many queued runs from one shared store, under leases."""
