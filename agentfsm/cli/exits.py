"""Exit statuses of every subcommand, and the error that means the second: kept apart from the
other shared pieces so that the entry point imports nothing else."""

EXIT_OK = 0
EXIT_FAILED = 1  # a check failed, a run did not end well
EXIT_BAD_INPUT = 2


class BadInput(Exception):
    """Raised by a subcommand for input it cannot use; the CLI prints it and exits 2."""
