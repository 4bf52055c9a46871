"""The bundled tables' agents on the driver: Loom, vibework, explorer/evaluator, tool-call, and their tools."""
