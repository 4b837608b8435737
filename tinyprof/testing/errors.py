"""The two exceptions of the hidden tests, and the sentence a refused route gets.

Everything else in :mod:`tinyprof.testing` raises these; a grader that receives only a
refused route's name (autograder/run/judge.py) says the same sentence with
:func:`unavailable_message`.
"""

from __future__ import annotations


class ReferenceUnavailable(RuntimeError):
    """Raised when an exercise calls the tinyprof function it is meant to re-implement.

    ``route`` is the dotted name that was refused and ``kind`` what it is ("function",
    "method" or "constructor"); the message is :func:`unavailable_message` of the two, so a
    grader that receives only the name can say the same sentence."""

    def __init__(self, route: str, kind: str = "function"):
        self.route, self.kind = route, kind
        super().__init__(unavailable_message(route, kind))


def unavailable_message(route: str, kind: str = "function") -> str:
    """What a student is told when ``route`` (a dotted name of kind ``kind``) is refused."""
    if kind == "constructor":
        return (f"building a {route} is switched off while your function is checked: compute "
                "the answer from the formula yourself instead of building a tinyprof object "
                "and asking it")
    return (f"{route} is switched off while your function is checked: the exercise asks you to "
            "compute this yourself rather than call tinyprof's own implementation")


class TamperingDetected(RuntimeError):
    """The notebook changed what the hidden tests rely on: their result cannot be trusted."""
