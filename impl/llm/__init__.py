"""LLM clients the driver talks to: the protocol, a scripted client, an OpenAI-compatible one.
Imports nothing else of the package."""
