"""Errors a user can cause.

A ``UserError`` carries a message that says what is wrong and how to fix it; the CLI prints
it on one line and exits 2 instead of showing a traceback.
"""


class UserError(Exception):
    """Bad input or a missing prerequisite: the message tells the user what to change."""
