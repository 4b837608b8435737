"""Two measurements of the same two functions: do they agree, and when not, what moved.

Chapter 08 measures each fix twice (issue 46): ``tp.ab_test``'s default blocks (each side's own
short blocks, each output dropped, one input reused) and the speed tests' way
(``blocks="speed test"``: calls from the baseline, every output kept, fresh inputs). Their
intervals need not overlap, and a student told only "they differ" learns nothing. From the two
results alone (:class:`~tinyprof.timing.abtest.ABResult`, each with its per-call medians and the
minor page faults a call of each side), :class:`Agreement` says

- whether the two 95 % intervals overlap;
- when they do not, how each side's time a call moved from the first to the second, and which
  moved more (the one whose move makes the ratios differ);
- and the cause the numbers point to: that side touched at least :data:`FAULT_GAP` more fresh
  pages a call where it was slower (kept outputs that outgrew what the allocator keeps: a page
  fault costs both sides alike, so it weighs most on the faster one); or the slow side moved
  more (the machine changed between the two); or neither (how the two were fed: one input
  reused stays in the caches, fresh ones need not).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..units import format_seconds
from .abtest import ABResult

#: More page faults a call than this, on the side whose time moved, is named as the cause (a
#: minor fault costs about 0.5–3 µs; ten of them are within the noise of a call of 100 µs).
FAULT_GAP = 10.0

PAGE_FAULTS, MACHINE, FEEDING, AGREE = ("page faults", "the machine", "inputs and blocks",
                                        "agree")


@dataclass(frozen=True)
class Agreement:
    """``first`` and ``second`` measured the same baseline and candidate; ``labels`` name them
    in the sentence (``str(agreement)``)."""

    first: ABResult
    second: ABResult
    labels: tuple[str, str] = ("the first", "the second")

    @property
    def agree(self) -> bool:
        """Whether the two 95 % intervals of the speedup overlap."""
        (a_low, a_high), (b_low, b_high) = self.first.ci, self.second.ci
        return a_low <= b_high and b_low <= a_high

    @property
    def moved(self) -> tuple[float, float]:
        """Second ÷ first, per-call median of the baseline and of the candidate."""
        return (self.second.baseline.median / self.first.baseline.median,
                self.second.candidate.median / self.first.candidate.median)

    @property
    def extra_faults(self) -> tuple[float, float] | None:
        """Second − first, page faults a call of the baseline and of the candidate (None where
        either measurement did not count them)."""
        counted = (*self.first.faults, *self.second.faults)
        if any(f is None for f in counted):
            return None
        a_base, a_cand, b_base, b_cand = counted
        return b_base - a_base, b_cand - a_cand

    @property
    def mover(self) -> int:
        """0 when the baseline's time moved more (in log terms) than the candidate's, else 1."""
        base, cand = (abs(math.log(m)) for m in self.moved)
        return 0 if base > cand else 1

    @property
    def cause(self) -> str:
        """AGREE, or what the numbers point to (module docstring): PAGE_FAULTS, MACHINE or
        FEEDING."""
        if self.agree:
            return AGREE
        side = self.mover
        extra = self.extra_faults
        if extra is not None:
            slower_by = extra[side] if self.moved[side] > 1 else -extra[side]
            if slower_by >= FAULT_GAP:
                return PAGE_FAULTS
        return MACHINE if side == 0 else FEEDING

    def __str__(self) -> str:
        first, second = self.labels
        if self.agree:
            return (f"{first} and {second} agree within their intervals "
                    f"({self.first.speedup:.1f}× and {self.second.speedup:.1f}×).")
        names = (self.first.baseline.name or "the baseline",
                 self.first.candidate.name or "the candidate")
        sides = [(self.first.baseline.median, self.second.baseline.median),
                 (self.first.candidate.median, self.second.candidate.median)]
        times = ", ".join(f"{name} {format_seconds(a)} and {format_seconds(b)} ({b / a:.2f}×)"
                          for name, (a, b) in zip(names, sides))
        line = (f"{first} and {second} do NOT agree within their intervals "
                f"({self.first.speedup:.1f}× and {self.second.speedup:.1f}×). A call took, "
                f"{first} then {second}: {times}. ")
        return line + self._because(names, sides)

    def _because(self, names: tuple[str, str], sides: list[tuple[float, float]]) -> str:
        cause, side = self.cause, self.mover
        if cause == PAGE_FAULTS:
            extra = self.extra_faults
            slower, faster = (self.labels[1], self.labels[0]) if self.moved[side] > 1 else \
                self.labels
            more = [abs(e) for e in extra]
            cost = abs(sides[side][1] - sides[side][0])
            return (f"{slower.capitalize()} touched more fresh pages a call than {faster}: "
                    f"{more[side]:,.0f} more page faults for {names[side]} "
                    f"({format_seconds(cost)} more a call), {more[1 - side]:,.0f} for "
                    f"{names[1 - side]}. Outputs kept until a block is timed pile up, and once "
                    "they outgrow what the memory allocator keeps each lands on fresh pages; "
                    "the same cost a call weighs most on the faster function.")
        if cause == MACHINE:
            return (f"{names[0]}'s time moved more than {names[1]}'s: most likely the machine "
                    "changed between the two measurements, which were taken at different times.")
        return (f"{names[1]}'s time moved more than {names[0]}'s, without more page faults: "
                "what else differs is how each was fed (one input reused stays in the caches; "
                "fresh inputs need not), how long its blocks were, and when each was measured.")


__all__ = ["AGREE", "Agreement", "FAULT_GAP", "FEEDING", "MACHINE", "PAGE_FAULTS"]
