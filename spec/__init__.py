"""The specification: table format 1, its loader and compiled model, and the bundled tables."""

from agentfsm.spec.build import load_table, load_table_bytes
from agentfsm.spec.bundled import bundled_tables
from agentfsm.spec.errors import Diagnostic, Mark, TableError
from agentfsm.spec.model import Action, Event, Invariant, Param, Property, Row, State, Table, Variable

__all__ = [
    "Action", "Diagnostic", "Event", "Invariant", "Mark", "Param", "Property", "Row", "State",
    "Table", "TableError", "Variable", "bundled_tables", "load_table", "load_table_bytes",
]
