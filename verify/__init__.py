"""The verifier: the batched kernel, one table, systems, the Spin export, the conformance kit,
reports. Imports spec, and impl only for the conformance kit's reference adapter.

Its Python API (docs/verifier.md, "Python API") is what this module exports: explore a table and
run its checks, explore a system and run its checks (or both at once, as ``verify`` does), and the
verdicts they give."""

from agentfsm.verify.system.checks import SysCheck, SysVerdict, run_system_checks
from agentfsm.verify.system.explore import SystemExploration, explore_system
from agentfsm.verify.system.verify import verify_system
from agentfsm.verify.table.checks import CheckResult, Verdict, run_checks
from agentfsm.verify.table.explore import Exploration, ExplorationLimit, explore
from agentfsm.verify.table.verify import verify_table

__all__ = [
    "CheckResult", "Exploration", "ExplorationLimit", "SysCheck", "SysVerdict", "SystemExploration", "Verdict",
    "explore", "explore_system", "run_checks", "run_system_checks", "verify_system", "verify_table",
]
