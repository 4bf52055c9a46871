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
from agentfsm.spec.errors import Collector, Diagnostic, Mark, TableError, shown

Path = tuple[str | int, ...]

MAX_BYTES = 512 * 1024
MAX_NODES = 50_000
MAX_DEPTH = 64

_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)

MAX_DIGITS = 100

_YAML_TAG = "tag:yaml.org,2002:"
_STR = "tag:yaml.org,2002:str"
_INT_TAG = "tag:yaml.org,2002:int"
_BOOL_TAG = "tag:yaml.org,2002:bool"
_NULL_TAG = "tag:yaml.org,2002:null"
_FLOAT_TAG = "tag:yaml.org,2002:float"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"


class LimitExceeded(yaml.YAMLError):
    """The document is bigger or deeper than any table needs; stop before it costs more."""

    def __init__(self, mark: yaml.Mark, message: str) -> None:
        super().__init__(message)
        self.mark = mark
        self.message = message


class Yaml12Loader(yaml.SafeLoader):
    """SafeLoader with the YAML 1.2 core schema's implicit resolvers only.

    It also counts nodes and nesting while composing, so a document that is too large or
    too deep is refused early (PyYAML's composer recurses once per level).
    """

    yaml_implicit_resolvers: dict[Any, Any] = {}  # noqa: RUF012 (PyYAML's own idiom)

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.composed = 0
        self.depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        self.composed += 1
        if self.composed > MAX_NODES:
            raise LimitExceeded(self.next_mark(), f"document too large: more than {MAX_NODES} nodes")
        if self.depth >= MAX_DEPTH:
            raise LimitExceeded(self.next_mark(), f"document nested deeper than {MAX_DEPTH} levels")
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def next_mark(self) -> yaml.Mark:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        mark: yaml.Mark = event.start_mark
        return mark


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
    inexact: frozenset[Path] = frozenset()

    def mark(self, path: Path) -> Mark:
        """The mark of the node at ``path``, or of its nearest ancestor that has one."""
        while path not in self.marks and path:
            path = path[:-1]
        return self.marks[path]

    def key_mark(self, path: Path) -> Mark:
        return self.key_marks.get(path) or self.mark(path)

    def text_mark(self, path: Path, offset: int) -> tuple[Mark, str]:
        """Where character ``offset`` of the string at ``path`` is, and a note if unknown.

        Columns are exact for a scalar copied verbatim from one line; for a folded,
        block or escaped scalar the mark is the scalar's start and the note says where.
        """
        if path in self.inexact:
            return self.mark(path), f" (at character {offset + 1} of the text)"
        return self.mark(path).shifted(offset), ""


def _mark(file: str, m: yaml.Mark) -> Mark:
    return Mark(file, m.line + 1, m.column + 1)


def _tag_text(tag: str) -> str:
    return "!!" + tag.removeprefix(_YAML_TAG) if tag.startswith(_YAML_TAG) else tag


def _unsupported_tag(tag: str) -> str:
    return (f"unsupported YAML tag {shown(_tag_text(tag))}: a table holds only mappings, lists, "
            "strings, integers and booleans")


def _scalar(node: yaml.ScalarNode) -> Any:
    """The value of a scalar under the YAML 1.2 core schema; ValueError says what is wrong."""
    value: str = node.value
    if node.tag == _STR:
        return value
    if node.tag == _BOOL_TAG:
        if not _BOOL.match(value):
            raise ValueError(f"{shown(value)} is not a boolean: YAML 1.2 booleans are true and false")
        return value.lower() == "true"
    if node.tag == _NULL_TAG:
        if not _NULL.match(value):
            raise ValueError(f"{shown(value)} is not null")
        return None
    if node.tag == _INT_TAG:
        if not _INT.match(value):
            raise ValueError(f"{shown(value)} is not an integer")
        if len(value) > MAX_DIGITS:
            raise ValueError(f"integer with more than {MAX_DIGITS} digits")
        return int(value, 0) if value.startswith(("0o", "0x")) else int(value, 10)
    if node.tag == _FLOAT_TAG:
        if not _FLOAT.match(value):
            raise ValueError(f"{shown(value)} is not a number")
        return float(re.sub(r"\.(inf|Inf|INF|nan|NaN|NAN)$", lambda m: m.group(1).lower(), value))
    raise ValueError(_unsupported_tag(node.tag))


def _key_problem(node: yaml.Node) -> str:
    if not isinstance(node, yaml.ScalarNode):
        return "mapping keys must be strings, not lists or mappings"
    kind = {_INT_TAG: "an integer", _BOOL_TAG: "a boolean", _NULL_TAG: "null", _FLOAT_TAG: "a number"}.get(
        node.tag, f"tagged {_tag_text(node.tag)}")
    return f"mapping key {shown(node.value)} is read as {kind}: quote it to use it as a name"


class _Converter:
    """Nodes to plain data, recording marks; aliases are expanded, so count what they cost."""

    def __init__(self, file: str, text: str, errors: Collector) -> None:
        self.file = file
        self.text = text
        self.errors = errors
        self.nodes = 0
        self.marks: dict[Path, Mark] = {}
        self.key_marks: dict[Path, Mark] = {}
        self.inexact: set[Path] = set()

    def verbatim(self, node: yaml.ScalarNode) -> bool:
        """Whether the scalar's value is its source text, on one line (so columns map)."""
        start, end = node.start_mark, node.end_mark
        if start.line != end.line or node.style not in (None, "'", '"'):
            return False
        source = self.text[start.index:end.index]
        return not (node.style == "'" and "''" in source) and not (node.style == '"' and "\\" in source)

    def split_by_comma(self, node: yaml.MappingNode, previous: yaml.Node | None, key: yaml.Node,
                       value: yaml.Node) -> str | None:
        """A key with no value right after a plain scalar in ``{...}``: an unquoted comma cut
        that scalar in two (``{expr: state in (A, B) or ok}`` reads a key ``B) or ok``)."""
        if not node.flow_style or not isinstance(previous, yaml.ScalarNode) or previous.style is not None:
            return None
        if not isinstance(key, yaml.ScalarNode) or key.style is not None:
            return None
        if not (isinstance(value, yaml.ScalarNode) and value.tag == _NULL_TAG and value.value == ""):
            return None
        whole = self.text[previous.start_mark.index:key.end_mark.index]
        quoted = '"' + whole.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return (f"the unquoted ',' in {shown(whole)} ends the value inside {{...}}, so {shown(key.value)} "
                f"reads as a key: quote it: {quoted}")

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
            if not self.verbatim(node):
                self.inexact.add(path)
            try:
                return _scalar(node)
            except ValueError as exc:
                self.errors.error(mark, str(exc))
                return None
        if isinstance(node, yaml.SequenceNode):
            if node.tag != _SEQ:
                self.errors.error(mark, _unsupported_tag(node.tag))
            return [self.convert(item, path + (i,)) for i, item in enumerate(node.value)]
        assert isinstance(node, yaml.MappingNode)
        if node.tag != _MAP:
            self.errors.error(mark, _unsupported_tag(node.tag))
        result: dict[str, Any] = {}
        previous: yaml.Node | None = None
        for key_node, value_node in node.value:
            key_mark = _mark(self.file, key_node.start_mark)
            self.nodes += 1
            split = self.split_by_comma(node, previous, key_node, value_node)
            previous = value_node
            if split:
                self.errors.error(key_mark, split)
                continue
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != _STR:
                self.errors.error(key_mark, _key_problem(key_node))
                continue
            key = key_node.value
            if key in result:
                first = self.key_marks[path + (key,)]
                self.errors.error(key_mark, f"duplicate key {shown(key)} (first defined at line {first.line})")
                continue
            self.key_marks[path + (key,)] = key_mark
            result[key] = self.convert(value_node, path + (key,))
        return result


_INDICATORS = {"*": "an alias", "&": "an anchor", "@": "a reserved character", "`": "a reserved character",
               "%": "a directive"}


def _quote_hint(text: str, exc: yaml.MarkedYAMLError) -> str:
    """For a plain value YAML reads as syntax (a bare ``*``, a ``: `` inside it), say "quote it"
    and show the quoted form."""
    if "'\\t'" in (exc.problem or ""):
        return "; indent with spaces: YAML does not allow tabs there"
    lines = text.splitlines()
    context = exc.context or ""
    mark = exc.context_mark if "alias" in context or "anchor" in context else exc.problem_mark
    if mark is None or mark.line >= len(lines):
        return ""
    line = lines[mark.line]
    colon = "mapping values are not allowed" in (exc.problem or "")
    if colon and ": " in line:
        start = line.index(": ") + 2
    elif not colon and mark.column < len(line) and line[mark.column] in _INDICATORS:
        start = mark.column
    else:
        return ""
    value = re.split(r"\s#|[,}\]]", line[start:])[0].strip()
    if not value:
        return ""
    quoted = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if colon:
        return f"; a ': ' inside a plain value starts a mapping: quote it: {quoted}"
    return f"; a bare {value[0]!r} starts {_INDICATORS[value[0]]} in YAML: quote it: {quoted}"


def load_document(raw: bytes, file: str) -> Document:
    """Parse one YAML document from bytes; raise TableError with marks on any problem."""
    start = Mark(file, 1, 1)
    if len(raw) > MAX_BYTES:
        raise TableError([Diagnostic(start, f"file larger than {MAX_BYTES} bytes: too large for a table")])
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
    except LimitExceeded as exc:
        raise TableError([Diagnostic(_mark(file, exc.mark), exc.message)]) from None
    except yaml.MarkedYAMLError as exc:
        m = exc.problem_mark or exc.context_mark
        mark = _mark(file, m) if m is not None else start
        problem = exc.problem or exc.context or "invalid YAML"
        if exc.problem and exc.context and exc.context_mark is not None:
            problem += f" ({exc.context} started at line {exc.context_mark.line + 1})"
        problem += _quote_hint(text, exc)
        raise TableError([Diagnostic(mark, f"YAML syntax: {problem}")]) from None
    except yaml.reader.ReaderError as exc:
        prefix = text[: exc.position]
        mark = Mark(file, prefix.count("\n") + 1, exc.position - (prefix.rfind("\n") + 1) + 1)
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        raise TableError([Diagnostic(mark, f"character U+{code:04X} is not allowed in YAML")]) from None
    except yaml.YAMLError as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else "invalid YAML"
        raise TableError([Diagnostic(start, f"YAML: {first_line}")]) from None
    if not nodes or nodes[0] is None:
        raise TableError([Diagnostic(start, "empty document: expected a table (a mapping with 'format: 1')")])
    if len(nodes) > 1:
        second = nodes[1]
        where = _mark(file, second.start_mark) if second is not None else start
        raise TableError([Diagnostic(where, "expected one YAML document, found several")])
    errors = Collector()
    converter = _Converter(file, text, errors)
    data = converter.convert(nodes[0], ())
    errors.raise_if_any()
    return Document(data, converter.marks, converter.key_marks, frozenset(converter.inexact))
