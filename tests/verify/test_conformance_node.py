"""The independent TypeScript implementation of the Loom table passes the vectors (CI runs it).

The sources are compiled here, into a temporary directory, with the TypeScript compiler
that scripts/setup.sh installs (npm ci in examples/conformance), so the test always runs
the sources as they are, whatever the state of examples/conformance/dist/.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from agentfsm.spec import Table
from agentfsm.verify.conformance.conform import Runner
from agentfsm.verify.conformance.harness import ProcessTransport
from agentfsm.verify.conformance.vectors import generate
from conformance_helpers import LOOM, ROOT
from conftest import run_cli

NODE = shutil.which("node")
EXAMPLE = ROOT / "examples" / "conformance"
TSC = EXAMPLE / "node_modules" / ".bin" / "tsc"
SOURCES = ("loom.ts", "adapter.ts", "tsconfig.json", "package.json")

pytestmark = pytest.mark.skipif(NODE is None or shutil.which("npm") is None, reason="node or npm is not installed")


def copy_sources(to: Path) -> Path:
    """A copy of the example's sources, with its installed packages, to change and compile."""
    assert TSC.exists(), "TypeScript is not installed: run scripts/setup.sh (npm ci in examples/conformance)"
    to.mkdir()
    for name in SOURCES:
        shutil.copy(EXAMPLE / name, to / name)
    (to / "node_modules").symlink_to(EXAMPLE / "node_modules", target_is_directory=True)
    return to


def tsc(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert NODE is not None
    return subprocess.run([NODE, str(TSC), "-p", str(project), *args], capture_output=True, text=True,
                          timeout=120, check=False)


def build(project: Path) -> Path:
    """Compile PROJECT into its dist/ (the compiler type-checks first); the adapter's path."""
    proc = tsc(project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return project / "dist" / "adapter.js"


def conform(adapter: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code, out, err = run_cli(["conform", str(LOOM), "--adapter", f"{NODE} {adapter}", "--timeout", "10"], capsys)
    return code, out + err


@pytest.fixture(scope="module")
def adapter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(copy_sources(tmp_path_factory.mktemp("ts") / "loom"))


def test_the_typescript_sources_type_check_under_the_strict_settings() -> None:
    proc = tsc(EXAMPLE, "--noEmit")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_typescript_loom_agent_conforms(adapter: Path, loom: Table, capsys: pytest.CaptureFixture[str]) -> None:
    count = len(generate(loom)[1])
    code, out = conform(adapter, capsys)
    assert code == 0, out
    assert f"{count} vectors: {count} passed, 0 failed, 0 not implemented" in out


def test_the_typescript_adapter_refuses_every_invalid_request(adapter: Path, loom: Table) -> None:
    # Unknown events, missing, extra, ill-typed and out-of-range parameters: {"ok": false},
    # and the next valid event answered from the configuration as it was.
    assert NODE is not None
    invalid = generate(loom, sets=["invalid"])[1]
    report = Runner(loom, lambda: ProcessTransport([NODE, str(adapter)], 10.0)).run(invalid)
    assert report.ok and report.count("pass") == len(invalid) > 20, [r.message for r in report.results]


def test_every_reply_is_written_before_the_adapter_exits_at_end_of_input(adapter: Path) -> None:
    # Many requests, then end of input at once: the replies still queued for the pipe must
    # not be lost when the adapter exits (process.exit drops pending pipe writes).
    assert NODE is not None
    text = {"op": "event", "event": "TextDelta", "params": {}}
    requests = [{"op": "reset", "machine": "loom-agent"}, *[text] * 40000]
    data = "".join(json.dumps(r) + "\n" for r in requests)
    proc = subprocess.run([NODE, str(adapter)], input=data, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == len(requests)


def test_a_missing_state_in_the_switch_does_not_compile(tmp_path: Path) -> None:
    project = copy_sources(tmp_path / "loom")
    source = (project / "loom.ts").read_text()
    case = ('    case "PostToolsHook":\n'
            '      if (event.kind === "PostToolsHookCompleted") return accept({ kind: "CallingLlm", retries: 0 },'
            ' "SendLlmRequest");\n'
            '      if (event.kind === "PostToolsHookFailed") return hookFailed(state.retries);\n      break;\n')
    assert case in source
    (project / "loom.ts").write_text(source.replace(case, ""))
    proc = tsc(project)
    assert proc.returncode != 0
    assert "loom.ts" in proc.stdout and "'never'" in proc.stdout, proc.stdout
    assert not (project / "dist").exists()


def test_the_readme_bug_is_caught_by_the_shortest_vector(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = copy_sources(tmp_path / "loom")
    source = (project / "loom.ts").read_text()
    assert source.count("state.retries < MAX_RETRIES") == 1
    (project / "loom.ts").write_text(source.replace("state.retries < MAX_RETRIES", "state.retries <= MAX_RETRIES"))
    code, out = conform(build(project), capsys)
    assert code == 1
    assert "shortest failing vector:\nloom-agent/row-06  (8 steps;" in out
    assert "vars.retries: expected 0, got 4" in out


def test_the_typescript_adapter_refuses_what_it_cannot_serve(adapter: Path) -> None:
    assert NODE is not None
    transport = ProcessTransport([NODE, str(adapter)], 10.0)
    try:
        assert transport.request({"op": "reset", "machine": "other"})["ok"] is False
        assert transport.request({"op": "reset", "machine": "loom-agent"})["ok"] is True
        for event, params, error in [
            ("LlmCompleted", {"tool_calls": 7}, "bad or missing parameter tool_calls of LlmCompleted"),
            ("LlmCompleted", {}, "bad or missing parameter tool_calls of LlmCompleted"),
            ("ToolCompleted", {"mutating": 1}, "bad or missing parameter mutating of ToolCompleted"),
            ("UserInput", {"text": "hi"}, "event UserInput has no parameter text"),
            ("Teleport", {}, 'unknown event "Teleport"'),
        ]:
            assert transport.request({"op": "event", "event": event, "params": params}) == {"ok": False, "error": error}
        reply = transport.request({"op": "event", "event": "ShutdownRequested", "params": {}})
        assert reply == {"ok": True, "accepted": True, "state": "ShuttingDown", "actions": ["Shutdown"]}
    finally:
        transport.close()
