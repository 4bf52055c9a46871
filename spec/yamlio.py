"""A safe YAML 1.2 reader that keeps the line and column of every node.

PyYAML's default resolver follows YAML 1.1, where the bare key ``on`` (and ``yes``,
``no``, ``off``) is a boolean: every row's ``on:`` would silently become ``True:``.
This reader installs the YAML 1.2 core-schema resolvers instead, composes the document
into nodes (never constructing arbitrary Python objects), rejects duplicate keys and
unknown tags, and bounds the work that aliases, nesting and size may cost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml
from agentfsm.spec.errors import Collector, Diagnostic, Mark, TableError

Path = tuple[str | int, ...]

MAX_BYTES = 4 * 1024 * 1024
MAX_NODES = 100_000
MAX_DEPTH = 64

_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)

_STR = "tag:yaml.org,2002:str"
_INT_TAG = "tag:yaml.org,2002:int"
_BOOL_TAG = "tag:yaml.org,2002:bool"
_NULL_TAG = "tag:yaml.org,2002:null"
_FLOAT_TAG = "tag:yaml.org,2002:float"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"


class Yaml12Loader(yaml.SafeLoader):
    """SafeLoader with the YAML 1.2 core schema's implicit resolvers only."""

    yaml_implicit_resolvers: dict[Any, Any] = {}  # noqa: RUF012 (PyYAML's own idiom)


for _tag, _regexp, _first in (
    (_BOOL_TAG, _BOOL, list("tTfF")),
    (_NULL_TAG, _NULL, ["~", "n", "N", ""]),
    (_INT_TAG, _INT, list("-+0123456789")),
    (_FLOAT_TAG, _FLOAT, list("-+.0123456789")),
):
    Yaml12Loader.add_implicit_resolver(_tag, _regexp, _first)


@dataclass(frozen=True)
class Document:
    """Plain data (dicts, lists, str, int, bool, float, None) plus where each part was."""

    data: Any
    marks: dict[Path, Mark]
    key_marks: dict[Path, Mark]

    def mark(self, path: Path) -> Mark:
        """The mark of the node at ``path``, or of its nearest ancestor that has one."""
        while path not in self.marks and path:
            path = path[:-1]
        return self.marks[path]

    def key_mark(self, path: Path) -> Mark:
        return self.key_marks.get(path) or self.mark(path)


def _mark(file: str, m: yaml.Mark) -> Mark:
    return Mark(file, m.line + 1, m.column + 1)


def _scalar(node: yaml.ScalarNode) -> Any:
    value: str = node.value
    if node.tag == _STR:
        return value
    if node.tag == _BOOL_TAG:
        return value.lower() == "true"
    if node.tag == _NULL_TAG:
        return None
    if node.tag == _INT_TAG:
        if value.startswith(("0o", "0x")):
            return int(value, 0)
        return int(value, 10)
    if node.tag == _FLOAT_TAG:
        return float(value.replace(".inf", "inf").replace(".Inf", "inf").replace(".INF", "inf"))
    raise ValueError(f"unsupported YAML tag {node.tag!r}")


class _Converter:
    def __init__(self, file: str, errors: Collector) -> None:
        self.file = file
        self.errors = errors
        self.nodes = 0
        self.marks: dict[Path, Mark] = {}
        self.key_marks: dict[Path, Mark] = {}

    def convert(self, node: yaml.Node, path: Path) -> Any:
        self.nodes += 1
        mark = _mark(self.file, node.start_mark)
        if self.nodes > MAX_NODES:
            raise TableError([Diagnostic(mark, f"document too large: more than {MAX_NODES} nodes "
                                                "(after alias expansion)")])
        if len(path) > MAX_DEPTH:
            raise TableError([Diagnostic(mark, f"document nested deeper than {MAX_DEPTH} levels")])
        if isinstance(node, yaml.ScalarNode) and node.style in ("'", '"'):
            mark = mark.shifted(1)  # point at the content, where expression columns count from
        self.marks[path] = mark
        if isinstance(node, yaml.ScalarNode):
            try:
                return _scalar(node)
            except ValueError as exc:
                self.errors.error(mark, str(exc))
                return None
        if isinstance(node, yaml.SequenceNode):
            if node.tag != _SEQ:
                self.errors.error(mark, f"unsupported YAML tag {node.tag!r}")
            return [self.convert(item, path + (i,)) for i, item in enumerate(node.value)]
        assert isinstance(node, yaml.MappingNode)
        if node.tag != _MAP:
            self.errors.error(mark, f"unsupported YAML tag {node.tag!r}")
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key_mark = _mark(self.file, key_node.start_mark)
            self.nodes += 1
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != _STR:
                self.errors.error(key_mark, "mapping keys must be plain strings")
                continue
            key = key_node.value
            if key in result:
                first = self.key_marks[path + (key,)]
                self.errors.error(key_mark, f"duplicate key {key!r} (first defined at line {first.line})")
                continue
            self.key_marks[path + (key,)] = key_mark
            result[key] = self.convert(value_node, path + (key,))
        return result


def load_document(raw: bytes, file: str) -> Document:
    """Parse one YAML document from bytes; raise TableError with marks on any problem."""
    start = Mark(file, 1, 1)
    if len(raw) > MAX_BYTES:
        raise TableError([Diagnostic(start, f"file larger than {MAX_BYTES} bytes")])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = raw[: exc.start]
        line = before.count(b"\n") + 1
        col = exc.start - (before.rfind(b"\n") + 1) + 1
        raise TableError([Diagnostic(Mark(file, line, col), "file is not valid UTF-8")]) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        nodes = list(yaml.compose_all(text, Loader=Yaml12Loader))
    except yaml.MarkedYAMLError as exc:
        m = exc.problem_mark or exc.context_mark
        mark = _mark(file, m) if m is not None else start
        problem = exc.problem or exc.context or "invalid YAML"
        raise TableError([Diagnostic(mark, f"YAML syntax: {problem}")]) from None
    except yaml.YAMLError as exc:
        raise TableError([Diagnostic(start, f"YAML: {exc}")]) from None
    except RecursionError:
        raise TableError([Diagnostic(start, "document nested too deeply")]) from None
    if not nodes or nodes[0] is None:
        raise TableError([Diagnostic(start, "empty document: expected a table (a mapping with 'format: 1')")])
    if len(nodes) > 1:
        second = nodes[1]
        where = _mark(file, second.start_mark) if second is not None else start
        raise TableError([Diagnostic(where, "expected one YAML document, found several")])
    errors = Collector()
    converter = _Converter(file, errors)
    data = converter.convert(nodes[0], ())
    errors.raise_if_any()
    return Document(data, converter.marks, converter.key_marks)
