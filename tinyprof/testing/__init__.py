"""Helpers for the chapters' test cells: failures that name the likely mistake, and hidden tests
that check the student's own code rather than tinyprof's, in a notebook the student controls.

Every name a test cell uses is here; each lives in the module of its job:

- :mod:`~tinyprof.testing.hints`: ``expect(got, want, what, hints)``, which fails with "what:
  expected W, got G. <hint>" (the hint looked up by the wrong value the student produced),
  ``same``, ``which`` and ``shown``;
- :mod:`~tinyprof.testing.handoff`: the hand-off to a grader that runs the test cells itself
  (``judged_by``, ``current_judge``, :class:`Judging`), and the two helpers it can take over:
  ``expect_faster(candidate, baseline, make_inputs, at_least)``, a speed-up graded by the lower
  bound of a 95 % interval on fresh inputs, every output checked; and
  ``reference_unavailable()``, which switches tinyprof off while the hidden tests run;
- :mod:`~tinyprof.testing.catalog`: what the switch turns off, found by walking the package
  (``routes``), and which modules are the grading machinery itself;
- :mod:`~tinyprof.testing.switch`: the switch (:class:`Switch`), its gates and its profile hook
  (``Watch``): a switched-off function raises ReferenceUnavailable under any alias, and any
  run of its code, however reached, unless tinyprof itself made the call;
- :mod:`~tinyprof.testing.integrity`: the runtime check, run as the switch opens: rebound
  helpers put back (announced with ``MARK``), and TamperingDetected when notebook code was
  planted in tinyprof, ``builtins``, ``sys.modules`` or IPython's hooks, or a set-up module was
  replaced. It runs after the student's code and can be lied to; the grader's static review of
  the submitted cells (autograder/intake/review.py) is the one an instructor relies on;
- :mod:`~tinyprof.testing.errors`: ReferenceUnavailable and TamperingDetected.

The package and each of its modules are sealed once loaded: ``tinyprof.testing.expect = ...``
or ``tinyprof.testing.hints._matches = ...`` raises AttributeError.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from . import catalog, errors, handoff, hints, integrity, switch
from .catalog import BUILDING_BLOCKS, OPEN_CLASSES, Route, routes
from .errors import ReferenceUnavailable, TamperingDetected, unavailable_message
from .handoff import (
    Judging,
    current_judge,
    expect_faster,
    judged_by,
    reference_unavailable,
)
from .hints import SHOWN_CHARS, expect, same, shown, which
from .integrity import MARK, tampering
from .switch import Switch

_MODULES = (errors, hints, catalog, integrity, switch, handoff)


class _Sealed(types.ModuleType):
    """A module whose attributes cannot be rebound or deleted: the hidden tests rely on them."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "__annotations__":  # type hints change nothing a test runs (Sphinx sets them)
            return super().__setattr__(name, value)
        raise AttributeError(f"{self.__name__}.{name} cannot be changed: the hidden tests "
                             "rely on it")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{self.__name__}.{name} cannot be deleted: the hidden tests "
                             "rely on it")


integrity.remember(sys.modules[__name__], {
    "expect": expect, "expect_faster": expect_faster, "same": same, "which": which,
    "reference_unavailable": reference_unavailable,
    "ReferenceUnavailable": ReferenceUnavailable, "TamperingDetected": TamperingDetected})
for _module in (*_MODULES, sys.modules[__name__]):
    types.ModuleType.__setattr__(_module, "__class__", _Sealed)

__all__ = ["BUILDING_BLOCKS", "MARK", "OPEN_CLASSES", "SHOWN_CHARS", "Judging",
           "ReferenceUnavailable", "Route", "Switch", "TamperingDetected", "current_judge",
           "expect", "expect_faster", "judged_by", "reference_unavailable", "routes", "same",
           "shown", "tampering", "unavailable_message", "which"]
