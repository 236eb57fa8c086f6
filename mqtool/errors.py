"""Exit codes as exceptions, in one place (the dbt-core way).

Every command raises one of these; `mqtool.cli.main` turns it into a one-line
message on stderr and the documented exit code.  Nothing else calls sys.exit.
"""

from __future__ import annotations

OK = 0
DATA_PROBLEM = 1
USAGE = 2
REFUSED = 3
NOT_A_STORE = 4

EXIT_CODES = {
    OK: "ok",
    DATA_PROBLEM: "problems found in the data (corruption, mismatch)",
    USAGE: "usage error (bad option or argument)",
    REFUSED: "refused: a broker holds the store's lock, or the action is unsafe",
    NOT_A_STORE: "not a store, or unreadable input",
}


class MqError(Exception):
    """Base of every error mqtool reports to the operator."""

    exit_code = DATA_PROBLEM

    def __init__(self, message: str, *, path: object = None, offset: int | None = None):
        super().__init__(message)
        self.message = message
        self.path = None if path is None else str(path)
        self.offset = offset

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path
            if self.offset is not None:
                where += f" at byte {self.offset}"
            where += ": "
        return where + self.message


class DataError(MqError):
    """The data is damaged or inconsistent (exit 1)."""

    exit_code = DATA_PROBLEM


class UsageError(MqError):
    """The command line asks for something impossible (exit 2)."""

    exit_code = USAGE


class RefusedError(MqError):
    """A broker holds the lock, or the action is unsafe (exit 3)."""

    exit_code = REFUSED


class NotAStoreError(MqError):
    """The path is not a store, or the input cannot be read at all (exit 4)."""

    exit_code = NOT_A_STORE


class ProblemsFound(MqError):
    """A command finished its report and found problems: exit 1, message optional."""

    exit_code = DATA_PROBLEM
