"""The Spin export: a table or a system as a Promela model, and running Spin on it to cross-check
the explorers. Imports spec and the explorers' results."""
