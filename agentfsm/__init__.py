"""agentfsm: model-checked transition tables for LLM-agent state machines.

One declarative table per machine drives the runtime (``agentfsm.impl``), the verifier
(``agentfsm.verify``), fault injection (``agentfsm.faults``), the diagrams
(``agentfsm.diagrams``) and the conformance kit; the table language and its compiled model live
in ``agentfsm.spec``, the command line in ``agentfsm.cli`` (docs/layout.md). This module holds the
version and imports nothing.
"""

__version__ = "0.1.0"
