"""The specification: every format and its loader (tables, systems, traces, vector files), the
compiled model, the step semantics, and the bundled tables. Imports nothing else of the package."""

from agentfsm.spec.build import load_table, load_table_bytes
from agentfsm.spec.bundled import bundled_tables
from agentfsm.spec.errors import Diagnostic, Mark, TableError
from agentfsm.spec.model import Action, Event, Invariant, Param, Property, Row, State, Table, Variable

__all__ = [
    "Action", "Diagnostic", "Event", "Invariant", "Mark", "Param", "Property", "Row", "State",
    "Table", "TableError", "Variable", "bundled_tables", "load_table", "load_table_bytes",
]
