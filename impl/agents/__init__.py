"""The bundled tables' agents on the driver: Loom, vibework, explorer/evaluator, tool-call, and their tools.
Imports spec, llm, the engine and driver, and durable; ``play`` also the scripts and play."""
