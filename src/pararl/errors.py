"""Errors that the command line turns into one line and exit code 2."""

from __future__ import annotations


class UsageError(ValueError):
    """Bad input from the user: the message says what was wrong and what to do."""
