"""From a table (and an optional overlay) to the bytes of one picture in one format."""

from __future__ import annotations

from agentfsm.diagrams.dot import to_dot
from agentfsm.diagrams.explored import ConfigGraph, explored_dot, explored_mermaid
from agentfsm.diagrams.mermaid import to_mermaid
from agentfsm.diagrams.model import Diagram
from agentfsm.diagrams.render import RenderError, run_dot, svg, svg_size
from agentfsm.diagrams.sequence import structure_dot, structure_mermaid
from agentfsm.spec.system_model import System

FORMATS = ("svg", "png", "dot", "mermaid")
SUFFIXES = {".svg": "svg", ".png": "png", ".dot": "dot", ".gv": "dot", ".mmd": "mermaid", ".mermaid": "mermaid"}


def picture(diagram: Diagram | ConfigGraph, fmt: str, compact: bool = False) -> bytes:
    """``compact`` draws the numbered-rows view (Graphviz formats only: :func:`to_dot`)."""
    if isinstance(diagram, ConfigGraph):
        if fmt == "mermaid":
            return explored_mermaid(diagram).encode()
        source = explored_dot(diagram)
    elif fmt == "mermaid":
        return to_mermaid(diagram).encode()
    elif compact:
        source = to_dot(diagram, "TB", compact=True)
    else:
        source = dot_source(diagram)
    if fmt == "dot":
        return source.encode()
    if fmt == "svg":
        return svg(source, diagram.machine)
    return run_dot(source, fmt)


def dot_source(diagram: Diagram) -> str:
    """The DOT source of the narrower of the two layouts, top to bottom or left to right.

    At a page's width a narrower picture is drawn larger. Which layout is narrower depends on
    the table (edges from every state into a few sinks favour left to right) and on the
    font metrics of the machine that draws it.
    """
    sources = [to_dot(diagram, rankdir) for rankdir in ("TB", "LR")]
    try:
        return min(sources, key=lambda source: svg_size(run_dot(source, "svg"))[0])
    except RenderError:  # without Graphviz to compare, the DOT text (--format dot) is still wanted
        return sources[0]


def committed_dot_sources(diagram: Diagram) -> dict[str, str]:
    """The DOT source of each SVG ``make diagrams`` writes for a bundled table, by file name:
    the full picture, and the compact view that fits a README column."""
    return {f"{diagram.machine}.svg": dot_source(diagram),
            f"{diagram.machine}.compact.svg": to_dot(diagram, "TB", compact=True)}


def committed_pictures(diagram: Diagram) -> dict[str, bytes]:
    """The files ``make diagrams`` writes for a bundled table, by file name."""
    pictures = {name: svg(source, diagram.machine) for name, source in committed_dot_sources(diagram).items()}
    return {**pictures, f"{diagram.machine}.mmd": picture(diagram, "mermaid")}


def committed_system_pictures(system: System) -> dict[str, bytes]:
    """The files ``make diagrams`` writes for a bundled system (its instances and links), by file name."""
    return {f"{system.name}.svg": svg(structure_dot(system), system.name),
            f"{system.name}.mmd": structure_mermaid(system).encode()}
