"""Diagrams of tables: Graphviz and Mermaid renderers over a small drawing model."""
