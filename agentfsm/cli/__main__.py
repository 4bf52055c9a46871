"""``python -m agentfsm.cli``: the same command line as ``agentfsm``."""

import sys

from agentfsm.cli.main import main

sys.exit(main())
