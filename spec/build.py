"""The builder: a YAML document becomes a compiled, checked Table.

Three phases, each reporting every independent error it finds: the YAML reader
(syntax, duplicate keys, hostile input), the JSON Schema (shape, unknown fields), and
the builder proper (names, types, ranges, structural rules, expressions).
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import jsonschema
from agentfsm.spec import expr as ex
from agentfsm.spec.errors import Collector, Mark, shown
from agentfsm.spec.files import read_document
from agentfsm.spec.model import (
    PROPERTY_KINDS,
    WILDCARD,
    Action,
    Arg,
    Event,
    Fairness,
    Invariant,
    Param,
    Property,
    Row,
    State,
    Table,
    Unhandled,
    Update,
    Variable,
)
from agentfsm.spec.suggest import FOREIGN_FIELDS, did_you_mean
from agentfsm.spec.yamlio import Document, load_document
from agentfsm.spec.yamlio import Path as NodePath
from jsonschema.exceptions import ValidationError, best_match

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")
# Names an expression could not refer to: Python keywords parse as syntax, not names.
RESERVED = {"state", "true", "false", *keyword.kwlist}
_KINDS = {"var": "variable", "param": "parameter", "const": "constant"}
_BOOLEAN_LOOKALIKES = {"yes", "no", "on", "off", "TRUE", "FALSE"}


@cache
def schema() -> dict[str, Any]:
    text = resources.files("agentfsm.spec").joinpath("schema.json").read_text(encoding="utf-8")
    result: dict[str, Any] = json.loads(text)
    return result


def load_table(path: str | Path, overrides: Mapping[str, ex.Value] | None = None,
               doc: Document | None = None) -> Table:
    """Read (unless ``doc``, the file already parsed), validate and compile a table file; raise
    TableError listing every problem."""
    doc = read_document(path) if doc is None else doc
    validate_schema(doc)
    return compile_document(doc, str(path), overrides)


def load_table_bytes(raw: bytes, file: str, overrides: Mapping[str, ex.Value] | None = None) -> Table:
    doc = load_document(raw, file)
    validate_schema(doc)
    return compile_document(doc, file, overrides)


def compile_document(doc: Document, file: str, overrides: Mapping[str, ex.Value] | None = None) -> Table:
    """Compile a document that already passed the schema (tools that edit tables in memory
    use this to skip re-reading YAML); raise TableError on any semantic problem."""
    return _Builder(doc, file, dict(overrides or {})).build()


def validate_schema(doc: Document, against: dict[str, Any] | None = None) -> None:
    """Hold ``doc`` to the table schema (or ``against``, e.g. the system schema)."""
    errors = Collector()
    if not isinstance(doc.data, dict):
        errors.error(doc.mark(()), "a table must be a mapping with 'format: 1', 'machine', 'states', ...")
        errors.raise_if_any()
    validator = jsonschema.Draft202012Validator(against or schema())
    seen: set[tuple[NodePath, str]] = set()
    for error in sorted(validator.iter_errors(doc.data), key=lambda e: [str(p) for p in e.absolute_path]):
        if error.context:
            error = best_match(error.context) or error
        path: NodePath = tuple(error.absolute_path)
        if (path, str(error.validator)) in seen:
            continue
        seen.add((path, str(error.validator)))
        for mark, message in _describe(doc, error, path):
            errors.error(mark, message)
    errors.raise_if_any()


def _where(path: NodePath) -> str:
    if not path:
        return "the table"
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _NAME.match(part):
            text += f".{part}" if text else part
        else:
            text += f"[{shown(part)}]"
    return text


def _describe(doc: Document, error: ValidationError, path: NodePath) -> list[tuple[Mark, str]]:
    """The schema error in the table's own words, at the key or value it is about."""
    where = _where(path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        schema_node = error.schema if isinstance(error.schema, dict) else {}
        allowed = sorted(schema_node.get("properties", {}))
        extra = [k for k in error.instance if k not in allowed]
        if extra and allowed:
            return [(doc.key_mark(path + (key,)),
                     f"unknown field {shown(key)} in {where}{did_you_mean(key, allowed, FOREIGN_FIELDS)} "
                     f"(expected one of: {', '.join(allowed)})")
                    for key in extra]
    return [_describe_one(doc, error, path, where)]


def _describe_one(doc: Document, error: ValidationError, path: NodePath, where: str) -> tuple[Mark, str]:
    value: Any = error.validator_value
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = [k for k in value if k not in error.instance]
        return doc.mark(path), f"missing field {shown(missing[0])} in {where}"
    if error.validator == "const" and path == ("format",):
        return doc.mark(path), f"unsupported table format {shown(error.instance)}: this agentfsm reads format 1"
    if error.validator == "pattern" and "propertyNames" in error.schema_path:
        key = str(error.instance)
        return doc.key_mark(path + (key,)), f"{shown(key)} in {where} is not a name (letters, digits, '_')"
    if error.validator == "pattern":
        what = "a state name or '*'" if "\\*" in str(value) else "a name"
        return doc.mark(path), f"{where}: {shown(error.instance)} is not {what} (letters, digits, '_')"
    if error.validator == "type":
        names = [_TYPE_WORDS.get(str(t), str(t)) for t in (value if isinstance(value, list) else [value])]
        note = ""
        if "boolean" in value and str(error.instance).lower() in _YAML11_BOOLEANS:
            note = (f" ({shown(error.instance)} is a boolean only in YAML 1.1; write "
                    f"{_YAML11_BOOLEANS[str(error.instance).lower()]})")
        return doc.mark(path), f"{where} must be {' or '.join(names)}, found {_kind(error.instance)}{note}"
    if error.validator == "enum":
        choices = ", ".join(str(c) for c in value)
        hint = did_you_mean(error.instance, [str(c) for c in value]) if isinstance(error.instance, str) else ""
        return doc.mark(path), f"{where} must be one of: {choices} (found {shown(error.instance)}{hint})"
    if error.validator in ("minProperties", "maxProperties") and len(path) == 2 and path[0] == "properties":
        return doc.mark(path), f"{where}: {_PROPERTY_KINDS}"
    if error.validator == "minProperties":
        return doc.mark(path), f"{where} must not be empty"
    if error.validator == "minItems":
        return doc.mark(path), f"{where} must not be empty"
    return doc.mark(path), f"{where}: {error.message}"


_YAML11_BOOLEANS = {word: "true" for word in ("yes", "y", "on")} | {word: "false" for word in ("no", "n", "off")}
_TYPE_WORDS = {"object": "a mapping", "array": "a list", "string": "a string", "integer": "an integer",
               "boolean": "a boolean", "null": "null", "number": "a number"}
_PROPERTY_KINDS = "a property needs a name and exactly one of 'always-reachable', 'no-cycle-within'"


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {int: "an integer", float: "a number", str: "a string", list: "a list", dict: "a mapping"}.get(
        type(value), type(value).__name__)


def _reserved(name: str) -> str:
    return f"{shown(name)} is a reserved word: expressions could not refer to it"


def _expr_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class _Builder:
    def __init__(self, doc: Document, file: str, overrides: dict[str, ex.Value]) -> None:
        self.doc = doc
        self.data: dict[str, Any] = doc.data
        self.file = file
        self.overrides = overrides
        self.errors = Collector()
        self.symbols: dict[str, ex.Symbol] = {}
        self.state_index: dict[str, int] = {}
        self.hints: dict[str, str] = {word: "booleans are true and false" for word in _BOOLEAN_LOOKALIKES}
        # Names whose declaration was refused: expressions naming them are not checked again,
        # so one bad declaration is one error, not one per use.
        self.refused: set[str] = set()

    def mark(self, *path: str | int) -> Mark:
        return self.doc.mark(path)

    def key_mark(self, *path: str | int) -> Mark:
        return self.doc.key_mark(path)

    def expression(self, value: object, path: NodePath, scope: ex.Scope,
                   want: ex.Type | None) -> tuple[ex.Expr, ex.Type, str] | None:
        text = _expr_text(value)
        if self.refused and self.refused & set(_WORD.findall(text)):
            return None
        try:
            parsed, typ = ex.parse(text, scope, want)
        except ex.ExprError as err:
            mark, note = self.doc.text_mark(path, err.col)
            self.errors.error(mark, err.message + note)
            return None
        return parsed, typ, text

    def constant_scope(self) -> ex.Scope:
        """Bounds and initial values: constants only, fixed at load time."""
        hints = {name: f"a {_KINDS[s.kind]}: bounds and initial values may use only constants"
                 for name, s in self.symbols.items() if s.kind != "const"}
        return ex.Scope(self.const_symbols(), {}, allow_state=False, hints={**self.hints, **hints})

    def constant_int(self, value: object, path: NodePath) -> int | None:
        scope = self.constant_scope()
        result = self.expression(value, path, scope, "int")
        if result is None:
            return None
        folded = ex.constant_value(result[0])
        if folded is None:
            self.errors.error(self.doc.mark(path), "a bound must be an integer or an expression over constants")
            return None
        return int(folded)

    def const_symbols(self) -> dict[str, ex.Symbol]:
        return {k: s for k, s in self.symbols.items() if s.kind == "const"}

    def build(self) -> Table:
        constants = self.constants()
        variables = self.variables()
        states = self.states()
        actions = self.actions()
        events = self.events()
        state_index = dict(self.state_index)
        event_index = {e.name: e for e in events}
        action_index = {a.name: a for a in actions}
        rows = self.rows(states, event_index, action_index, len(variables))
        unhandled = self.unhandled(action_index, event_index)
        invariants = self.invariants(event_index)
        properties = self.properties(event_index)
        fairness = self.fairness(event_index)
        runtime = self.runtime_constants()
        for state in states:
            if state.transient and not any(spec["from"] == state.name for spec in self.data["transitions"]):
                self.errors.error(self.key_mark("states", state.name),
                                  f"transient state {shown(state.name)} has no eventless row to leave it by")
        self.errors.raise_if_any()
        by_state_event: dict[tuple[int, str], tuple[Row, ...]] = {}
        eventless: dict[int, tuple[Row, ...]] = {}
        for state in states:
            if state.final:
                continue
            if state.transient:
                eventless[state.index] = tuple(r for r in rows if r.source == state.name)
                continue
            for event in events:
                own = [r for r in rows if r.source == state.name and r.event == event.name]
                wild = [r for r in rows if r.wildcard and r.event == event.name]
                if own or wild:
                    by_state_event[(state.index, event.name)] = tuple(own + wild)
        return Table(
            file=self.file, machine=self.data["machine"], title=self.data.get("title", ""),
            source=self.data.get("source", ""), description=self.data.get("description", ""),
            constants=constants, variables=variables, states=states, events=events,
            actions=actions, rows=rows, unhandled=unhandled, invariants=invariants,
            properties=properties, state_index=state_index, event_index=event_index,
            action_index=action_index, rows_by_state_event=by_state_event, eventless_rows=eventless,
            fairness=fairness,
            runtime=runtime,
        )

    def runtime_constants(self) -> dict[str, ex.Value]:
        """``runtime:``: per declared constant, the value a runtime uses (same type)."""
        declared = self.data.get("constants") or {}
        runtime: dict[str, ex.Value] = dict(self.data.get("runtime") or {})
        for name, value in runtime.items():
            if name not in declared:
                self.errors.error(self.key_mark("runtime", name), f"the table has no constant {shown(name)}")
            elif isinstance(declared[name], bool) != isinstance(value, bool):
                self.errors.error(self.mark("runtime", name),
                                  f"expected {_kind(declared[name])} like the constant, got {_kind(value)}")
        return runtime

    def constants(self) -> dict[str, ex.Value]:
        constants: dict[str, ex.Value] = dict(self.data.get("constants") or {})
        for name, value in self.overrides.items():
            if name not in constants:
                self.errors.error(self.mark("constants") if "constants" in self.data else self.mark(),
                                  f"--set {name}: the table has no constant {shown(name)}"
                                  f"{did_you_mean(name, constants)}")
            elif isinstance(constants[name], bool) != isinstance(value, bool):
                self.errors.error(self.mark("constants", name),
                                  f"--set {name}: expected {_kind(constants[name])}, got {_kind(value)}")
            else:
                constants[name] = value
        for name, value in constants.items():
            if name in RESERVED:
                self.errors.error(self.key_mark("constants", name), _reserved(name))
                self.refused.add(name)
            typ: ex.Type = "bool" if isinstance(value, bool) else "int"
            self.symbols[name] = ex.Symbol("const", typ, value=value)
        return constants

    def declare(self, name: str, symbol: ex.Symbol, path: NodePath, what: str) -> None:
        if name in RESERVED:
            self.errors.error(self.doc.key_mark(path), _reserved(name))
            self.refused.add(name)
        elif name in self.symbols:
            self.errors.error(self.doc.key_mark(path),
                              f"{what} {shown(name)} shadows the {_KINDS[self.symbols[name].kind]} of the same name")
            self.refused.add(name)
        else:
            self.symbols[name] = symbol

    def int_range(self, spec: dict[str, Any], path: NodePath, typ: str) -> tuple[int, int] | None:
        """The declared ``min..max`` (0..1 for a bool); None when it is broken (reported)."""
        if typ == "bool":
            extra = [k for k in ("min", "max") if k in spec]
            for k in extra:
                self.errors.error(self.doc.key_mark(path + (k,)), f"a bool has no '{k}'")
            return None if extra else (0, 1)
        for k in ("min", "max"):
            if k not in spec:
                self.errors.error(self.doc.mark(path), f"an int needs '{k}'")
        lo = self.constant_int(spec["min"], path + ("min",)) if "min" in spec else None
        hi = self.constant_int(spec["max"], path + ("max",)) if "max" in spec else None
        if lo is None or hi is None:
            return None
        if lo > hi:
            self.errors.error(self.doc.mark(path + ("max",)), f"empty range: min {lo} is above max {hi}")
            return None
        return lo, hi

    def variables(self) -> tuple[Variable, ...]:
        result = []
        for slot, (name, spec) in enumerate((self.data.get("variables") or {}).items(), start=1):
            path: NodePath = ("variables", name)
            typ = spec["type"]
            bounds = self.int_range(spec, path, typ)
            lo, hi = bounds or (0, 0)
            init_value: ex.Value = False if typ == "bool" else lo
            parsed = self.expression(spec["init"], path + ("init",), self.constant_scope(), typ)
            if parsed is not None:
                folded = ex.constant_value(parsed[0])
                if folded is None:
                    self.errors.error(self.doc.mark(path + ("init",)), "'init' must be a constant expression")
                else:
                    init_value = folded
                    if typ == "int" and bounds is not None and not lo <= int(folded) <= hi:
                        self.errors.error(self.doc.mark(path + ("init",)),
                                          f"init {folded} is outside {name}'s range {lo}..{hi}")
            self.declare(name, ex.Symbol("var", typ, slot=slot), path, "variable")
            result.append(Variable(name, typ, lo, hi, init_value, spec.get("description", "")))
        return tuple(result)

    def states(self) -> tuple[State, ...]:
        result = []
        for index, (name, spec) in enumerate(self.data["states"].items()):
            spec = spec or {}
            state = State(name, index, bool(spec.get("initial")), bool(spec.get("final")),
                          bool(spec.get("transient")), spec.get("description", ""))
            if state.transient and (state.initial or state.final):
                self.errors.error(self.key_mark("states", name),
                                  f"state {shown(name)}: a transient state cannot be "
                                  f"{'initial' if state.initial else 'final'} (observable states are never transient)")
            if keyword.iskeyword(name):
                self.errors.error(self.key_mark("states", name), _reserved(name))
            if state.initial and state.final:
                self.errors.error(self.key_mark("states", name),
                                  f"state {shown(name)} cannot be both initial and final")
            self.state_index[name] = index
            result.append(state)
        initial = [s for s in result if s.initial]
        if not initial:
            self.errors.error(self.key_mark("states"), "no initial state: mark exactly one state 'initial: true'")
        for extra in initial[1:]:
            self.errors.error(self.key_mark("states", extra.name),
                              f"second initial state {shown(extra.name)} (first is {shown(initial[0].name)})")
        return tuple(result)

    def actions(self) -> tuple[Action, ...]:
        result = []
        for name, spec in (self.data.get("actions") or {}).items():
            spec = spec or {}
            effect = spec.get("effect", "internal")
            idempotent = spec.get("idempotent", effect == "internal")
            approval = spec.get("approval", False)
            lifetime = approval.get("lifetime") if isinstance(approval, dict) else None
            result.append(Action(name, effect, idempotent, spec.get("description", ""), approval is not False,
                                 None if lifetime is None else float(lifetime),
                                 self.params(spec.get("params") or {}, ("actions", name, "params"), check_names=False)))
        return tuple(result)

    def params(self, specs: Mapping[str, Any], base: NodePath, check_names: bool = True) -> tuple[Param, ...]:
        """Declared parameters (of an event or an action): type and range each."""
        params = []
        for pname, pspec in specs.items():
            path: NodePath = base + (pname,)
            if check_names and pname in RESERVED:
                self.errors.error(self.doc.key_mark(path), _reserved(pname))
                self.refused.add(pname)
            elif check_names and pname in self.symbols:
                self.errors.error(self.doc.key_mark(path), f"parameter {shown(pname)} of {base[1]} shadows the "
                                  f"{_KINDS[self.symbols[pname].kind]} of the same name")
            lo, hi = self.int_range(pspec, path, pspec["type"]) or (0, 0)
            params.append(Param(pname, pspec["type"], lo, hi))
        return tuple(params)

    def events(self) -> tuple[Event, ...]:
        result = []
        for name, spec in self.data["events"].items():
            spec = spec or {}
            params = self.params(spec.get("params") or {}, ("events", name, "params"))
            result.append(Event(name, params, spec.get("description", "")))
        return tuple(result)

    def check_actions(self, items: list[Any], path: NodePath, actions: Mapping[str, Action],
                      scope: ex.Scope | None = None) -> tuple[tuple[str, ...], tuple[tuple[Arg, ...], ...]]:
        """The names of an emit list and, per entry, its compiled args (``scope`` None: no row to read)."""
        names: list[str] = []
        all_args: list[tuple[Arg, ...]] = []
        for i, item in enumerate(items):
            name = item if isinstance(item, str) else item["action"]
            given: dict[str, Any] = {} if isinstance(item, str) else dict(item.get("args") or {})
            names.append(name)
            action = actions.get(name)
            if action is None:
                self.errors.error(self.doc.mark(path + (i,)),
                                  f"unknown action {shown(name)}{did_you_mean(name, actions)}")
                continue
            args = []
            for param in action.params:
                if param.name not in given:
                    self.errors.error(self.doc.mark(path + (i,)), f"action {shown(name)} needs arg {shown(param.name)}")
                    continue
                where: NodePath = path + (i, "args", param.name)
                if scope is None:
                    self.errors.error(self.doc.mark(where), "only a row's emit can compute args")
                    continue
                parsed = self.expression(given.pop(param.name), where, scope, param.type)
                if parsed is not None:
                    args.append(Arg(param.name, parsed[0], parsed[2], ex.compile_expr(parsed[0])))
            for extra in given:
                self.errors.error(self.doc.key_mark(path + (i, "args", extra)),
                                  f"action {shown(name)} has no parameter {shown(extra)}")
            all_args.append(tuple(args))
        return tuple(names), tuple(all_args)

    def rows(self, states: tuple[State, ...], events: Mapping[str, Event],
             actions: Mapping[str, Action], nvars: int) -> tuple[Row, ...]:
        result = []
        for i, spec in enumerate(self.data["transitions"]):
            row = self.row(i, spec, states, events, actions, nvars)
            if row is not None:
                result.append(row)
        return tuple(result)

    def row(self, i: int, spec: dict[str, Any], states: tuple[State, ...], events: Mapping[str, Event],
            actions: Mapping[str, Action], nvars: int) -> Row | None:
        path: NodePath = ("transitions", i)
        ok = True
        source, target, event_name = spec["from"], spec["to"], spec.get("on")
        if source != WILDCARD and source not in self.state_index:
            self.errors.error(self.doc.mark(path + ("from",)),
                              f"unknown state {shown(source)}{did_you_mean(source, self.state_index)}")
            ok = False
        if target not in self.state_index:
            self.errors.error(self.doc.mark(path + ("to",)),
                              f"unknown state {shown(target)}{did_you_mean(target, self.state_index)}")
            ok = False
        event = None
        if event_name is not None:
            event = events.get(event_name)
            if event is None:
                self.errors.error(self.doc.mark(path + ("on",)),
                                  f"unknown event {shown(event_name)}{did_you_mean(event_name, events)}")
                ok = False
        if ok:
            self.row_structure(path, source, event_name, states)
        symbols = dict(self.symbols)
        for slot, param in enumerate(event.params if event else (), start=nvars + 1):
            if param.name not in self.symbols:  # a shadowing parameter is reported, not used
                symbols[param.name] = ex.Symbol("param", param.type, slot=slot)
        hints = {**self.hints, **{p: f"a parameter of {', '.join(owners)}, not of this row's event"
                                  for p, owners in self.param_owners(events).items()}}
        scope = ex.Scope(symbols, self.state_index, hints=hints)
        guard = guard_text = None
        if "when" in spec:
            parsed = self.expression(spec["when"], path + ("when",), scope, "bool")
            if parsed is None:
                ok = False
            else:
                guard, _, guard_text = parsed
        updates = []
        for var, value in (spec.get("set") or {}).items():
            symbol = symbols.get(var)
            if symbol is None or symbol.kind != "var":
                variables = [n for n, sym in symbols.items() if sym.kind == "var"]
                what = (f"it is a {_KINDS[symbol.kind]}" if symbol is not None
                        else "no such variable" + did_you_mean(var, variables))
                self.errors.error(self.doc.key_mark(path + ("set", var)), f"cannot set {shown(var)}: {what}")
                ok = False
                continue
            parsed = self.expression(value, path + ("set", var), scope, symbol.type)
            if parsed is None:
                ok = False
                continue
            updates.append(Update(var, symbol.slot, parsed[0], parsed[2], ex.compile_expr(parsed[0])))
        emit, emit_args = self.check_actions(spec.get("emit", []), path + ("emit",), actions, scope)
        if not ok:
            return None
        return Row(i + 1, self.doc.mark(path), source, event_name, target, guard, guard_text,
                   tuple(updates), emit, spec.get("description", ""),
                   ex.compile_expr(guard) if guard is not None else None,
                   emit_args if any(emit_args) else ())

    def row_structure(self, path: NodePath, source: str, event: str | None, states: tuple[State, ...]) -> None:
        if source == WILDCARD:
            if event is None:
                self.errors.error(self.doc.mark(path + ("from",)), "a wildcard row needs an event ('on')")
            return
        state = states[self.state_index[source]]
        if state.final:
            self.errors.error(self.doc.mark(path + ("from",)), f"final state {shown(source)} cannot have outgoing rows")
        elif state.transient and event is not None:
            self.errors.error(self.doc.mark(path + ("on",)),
                              f"transient state {shown(source)} is left only by eventless rows (drop 'on')")
        elif not state.transient and event is None:
            self.errors.error(self.doc.mark(path), f"row from {shown(source)} needs an event ('on'): "
                              "only transient states have eventless rows")

    @staticmethod
    def param_owners(events: Mapping[str, Event]) -> dict[str, list[str]]:
        owners: dict[str, list[str]] = {}
        for event in events.values():
            for param in event.params:
                owners.setdefault(param.name, []).append(event.name)
        return owners

    def unhandled(self, actions: Mapping[str, Action], events: Mapping[str, Event]) -> Unhandled:
        spec = self.data.get("unhandled")
        if spec is None:
            return Unhandled()
        policy: Literal["reject", "ignore"] = spec["policy"]
        anomaly: Literal["halt", "log"] = spec.get("anomaly", "halt")
        feed = spec.get("feed")
        if feed is not None:
            mark = self.doc.mark(("unhandled", "feed"))
            if policy != "reject":
                self.errors.error(mark, "feed needs policy reject (only a rejected event is an anomaly)")
            elif feed not in events:
                self.errors.error(mark, f"unknown event {shown(feed)}{did_you_mean(feed, events)}")
            elif events[feed].params:
                self.errors.error(mark, f"the fed event {shown(feed)} must take no parameters")
        return Unhandled(policy, self.check_actions(spec.get("emit", []), ("unhandled", "emit"), actions)[0],
                         anomaly, feed)

    def invariants(self, events: Mapping[str, Event]) -> tuple[Invariant, ...]:
        result = []
        hints = {**self.hints, **{p: "an event parameter: invariants read variables, constants and the state"
                                  for p in self.param_owners(events)}}
        scope = ex.Scope(self.symbols, self.state_index, hints=hints)
        names: set[str] = set()
        for i, spec in enumerate(self.data.get("invariants") or []):
            path: NodePath = ("invariants", i)
            if spec["name"] in names:
                self.errors.error(self.doc.mark(path + ("name",)), f"duplicate invariant name {shown(spec['name'])}")
            names.add(spec["name"])
            parsed = self.expression(spec["expr"], path + ("expr",), scope, "bool")
            if parsed is not None:
                result.append(Invariant(spec["name"], parsed[0], parsed[2], self.doc.mark(path),
                                        ex.compile_expr(parsed[0])))
        return tuple(result)

    def state_scope(self, events: Mapping[str, Event]) -> ex.Scope:
        """Invariants and properties: variables, constants and the state, no event parameters."""
        hints = {**self.hints, **{p: "an event parameter: invariants and properties read variables, constants "
                                  "and the state" for p in self.param_owners(events)}}
        return ex.Scope(self.symbols, self.state_index, hints=hints)

    def condition(self, value: object, path: NodePath, events: Mapping[str, Event]) -> tuple[ex.Expr, str] | None:
        """A set of configurations: a state name, a list of state names, or a bool expression."""
        if isinstance(value, str) and _IDENT.match(value) and value not in self.symbols:
            value = [value]   # a bare name that is no variable or constant names a state
        if isinstance(value, list) or (isinstance(value, str) and value in self.state_index):
            names = value if isinstance(value, list) else [value]
            unknown = False
            for j, name in enumerate(names):
                if name not in self.state_index:
                    self.errors.error(self.doc.mark(path + (j,)),
                                      f"unknown state {shown(name)}{did_you_mean(name, self.state_index)}")
                    unknown = True
            if unknown:
                return None
            transient = [n for n in names if self.data["states"][n] and self.data["states"][n].get("transient")]
            if transient:
                self.errors.error(self.doc.mark(path), f"{shown(transient[0])} is transient, so no configuration "
                                  "is ever in it: name a stable state")
                return None
            text = " or ".join(names)
            return ex.InStates(tuple(names), frozenset(self.state_index[n] for n in names)), text
        parsed = self.expression(value, path, self.state_scope(events), "bool")
        return None if parsed is None else (parsed[0], parsed[2])

    def fairness(self, events: Mapping[str, Event]) -> dict[str, Fairness]:
        result: dict[str, Fairness] = {}
        spec = self.data.get("fairness") or {}
        for kind in ("weak", "strong"):
            for j, name in enumerate(spec.get(kind) or []):
                path: NodePath = ("fairness", kind, j)
                if name not in events:
                    self.errors.error(self.doc.mark(path), f"unknown event {shown(name)}")
                elif name in result:
                    self.errors.error(self.doc.mark(path), f"event {shown(name)} is already {result[name]}ly fair")
                else:
                    result[name] = kind
        return result

    def properties(self, events: Mapping[str, Event]) -> tuple[Property, ...]:
        result = []
        names: set[str] = set()
        for i, spec in enumerate(self.data.get("properties") or []):
            path: NodePath = ("properties", i)
            mark = self.doc.mark(path)
            if spec["name"] in names:
                self.errors.error(self.doc.mark(path + ("name",)), f"duplicate property name {shown(spec['name'])}")
            names.add(spec["name"])
            kinds = [k for k in PROPERTY_KINDS if k in spec]
            if len(kinds) != 1:
                self.errors.error(mark, f"a property needs exactly one of {', '.join(map(repr, PROPERTY_KINDS))}")
                continue
            kind = kinds[0]
            if kind == "no-cycle-within":
                listed = spec["no-cycle-within"]["events"]
                for j, name in enumerate(listed):
                    if name not in events:
                        self.errors.error(self.doc.mark(path + ("no-cycle-within", "events", j)),
                                          f"unknown event {shown(name)}{did_you_mean(name, events)}")
                result.append(Property(spec["name"], "no-cycle-within", mark, events=tuple(listed)))
                continue
            where = path + (kind,)
            if kind == "leads-to":
                source = self.condition(spec[kind]["from"], where + ("from",), events)
                goal = self.condition(spec[kind]["to"], where + ("to",), events)
                if source is not None and goal is not None:
                    result.append(Property(spec["name"], kind, mark, goal=goal[0], goal_text=goal[1],
                                           source=source[0], source_text=source[1]))
                continue
            goal = self.condition(spec[kind], where, events)
            if goal is not None:
                target = spec[kind] if kind == "always-reachable" and isinstance(spec[kind], str) \
                    and spec[kind] in self.state_index else None
                result.append(Property(spec["name"], kind, mark, target=target, goal=goal[0], goal_text=goal[1]))
        return tuple(result)
