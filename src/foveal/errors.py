"""foveal's error types: one base class, a ``ValueError``, so ``except ValueError`` catches them all.

The command line prints a foveal error as one line (what is wrong, what to do) and exits 2; the
same words reach a Python caller in the exception.
"""

from __future__ import annotations


class FovealError(ValueError):
    """Something a user can fix: a bad argument, a file that is not what it should be, missing data."""


class CheckpointError(FovealError):
    """A checkpoint that cannot be read, or that does not fit the model it is loaded into."""


class NonFiniteError(FovealError):
    """A training step produced a NaN or infinite loss or gradient; nothing was saved from it."""

    def __init__(self, message: str, step: int) -> None:
        super().__init__(message)
        self.step = step


class DataUnavailableError(FovealError):
    """A data set is not on this machine and cannot be fetched; the message says how to get it."""
