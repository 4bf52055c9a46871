"""Systems and sequence charts the diagram tests draw: the counterexamples of the bundled
systems as they were, and a small system whose instances are named after Mermaid's keywords."""

from __future__ import annotations

from pathlib import Path

from agentfsm.spec.system_load import load_system
from agentfsm.spec.system_model import System
from agentfsm.spec.system_trace import Label, SystemTrace
from agentfsm.verify.system.paths import replay
from agentfsm.verify.system.step import Config, Effect, Stepper, initial_config
from agentfsm.verify.system.verify import verify_system
from conftest import ROOT

Steps = list[tuple[Label, Config, Effect]]
AS_WAS = sorted((ROOT / "spec" / "systems").glob("durable-run-as-it-was-*.yaml"))
PINGPONG = ROOT / "tests" / "systems" / "pingpong.yaml"
# Words Mermaid's flowchart and sequence grammars give meaning to (and a few a lexer reads as
# the start of an arrow or a direction): an instance may be named any of them.
KEYWORDS = ("call", "click", "href", "callback", "class", "classDef", "style", "linkStyle", "default", "end",
            "subgraph", "direction", "graph", "flowchart", "interpolate", "_self", "_blank", "TB", "LR", "TD",
            "o", "x", "accTitle", "accDescr", "participant", "actor", "as", "loop", "alt", "else", "opt", "par",
            "and", "rect", "note", "over", "left", "right", "of", "activate", "deactivate", "autonumber",
            "title", "critical", "option", "box", "links", "link", "properties", "details", "create", "destroy",
            "environment")


def counterexamples(path: Path) -> list[tuple[System, SystemTrace, Steps]]:
    """Every failing check's counterexample of the system at ``path``, replayed."""
    system = load_system(path)
    traces = [check.trace for check in verify_system(system).checks if check.trace is not None]
    return [(system, trace, replay(system, trace.steps)) for trace in traces]


def keyword_system(folder: Path, first: str, second: str) -> System:
    """Two ping-pong peers named ``first`` and ``second``."""
    path = folder / f"{first}-{second}.yaml"
    path.write_text(f"""format: 1
system: keywords
instances:
  {first}: {{table: {PINGPONG}}}
  {second}: {{table: {PINGPONG}}}
mailbox: {{capacity: 1}}
links:
  - {{from: {first}, action: SendPing, to: {second}, event: Ping}}
  - {{from: {second}, action: SendPong, to: {first}, event: Pong}}
environment:
  {first}: [Go]
""")
    return load_system(path)


def walk(system: System, length: int) -> Steps:
    """The first ``length`` steps of always taking the first possible step."""
    stepper = Stepper(system)
    config = initial_config(system)
    steps: Steps = []
    for _ in range(length):
        label, config, effect = next(stepper.successors(config))
        steps.append((label, config, effect))
    return steps
