"""Workers serving many queued runs from one shared store, under leases. Imports spec and durable
(the store comes in opened)."""
