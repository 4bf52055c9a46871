"""Diagrams of tables and systems: Graphviz and Mermaid renderers over a small drawing model.
Imports spec and the verifier's results; never the command line."""
