"""Item statistics of one exercise over a cohort, as PrairieLearn's question statistics give
them: the points' histogram, mean, SD, difficulty, discrimination and quintile scores.

- difficulty: the mean score over the exercise's points (1: everyone scored full marks);
- discrimination: Pearson's correlation of the exercise's score with the rest of the total
  (the total less this exercise), None ("n/a") when either has no variance;
- quintiles: the students sorted by total score, cut into five groups as equal as possible
  (the lowest first), and each group's mean score on the exercise over its points.

SD is the population SD (numpy's default, ddof=0) of the scores of everyone with a score.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

QUINTILES = 5


@dataclass(frozen=True)
class ExerciseStats:
    """One exercise's statistics over the ``count`` students who have a score on it."""

    grade_id: str
    name: str
    points: float
    count: int
    mean: float | None
    sd: float | None
    difficulty: float | None
    discrimination: float | None
    quintiles: tuple[float | None, ...]
    histogram: tuple[tuple[float, int], ...]   # (score, how many scored it), lowest first
    awaiting: int = 0   # students whose score on it awaits a manual grade


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def population_sd(values: list[float]) -> float | None:
    centre = mean(values)
    if centre is None:
        return None
    return math.sqrt(sum((v - centre) ** 2 for v in values) / len(values))


def pearson(xs: list[float], ys: list[float]) -> float | None:
    """Pearson's r of two equally long lists; None when either has no variance (or < 2)."""
    if len(xs) != len(ys) or len(xs) < 2:
        return None
    mx, my = mean(xs), mean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx <= 1e-12 * (1 + sum(x * x for x in xs)) or syy <= 1e-12 * (1 + sum(y * y for y in ys)):
        return None   # no variance (up to rounding)
    return sxy / math.sqrt(sxx * syy)


def quintile_groups(totals: dict[str, float]) -> list[list[str]]:
    """Students cut into QUINTILES groups by total score, lowest first (ties by name), the
    groups as equal as possible (the larger ones last); a group may be empty (< 5 students)."""
    ordered = sorted(totals, key=lambda student: (totals[student], student))
    base, extra = divmod(len(ordered), QUINTILES)
    groups, start = [], 0
    for index in range(QUINTILES):
        size = base + (1 if index >= QUINTILES - extra else 0)
        groups.append(ordered[start:start + size])
        start += size
    return groups


def exercise_stats(grade_id: str, name: str, points: float,
                   scores: dict[str, float | None], totals: dict[str, float]) -> ExerciseStats:
    """``scores``: student → their score on the exercise (None: awaiting a manual grade);
    ``totals``: student → their total score (the exercises' scores summed)."""
    scored = {s: v for s, v in scores.items() if v is not None and s in totals}
    values = [scored[s] for s in sorted(scored)]
    rest = [totals[s] - scored[s] for s in sorted(scored)]
    centre = mean(values)
    groups = quintile_groups({s: totals[s] for s in scored})
    quintiles = tuple(
        (mean([scored[s] for s in group]) / points if points else None) if group else None
        for group in groups)
    return ExerciseStats(
        grade_id=grade_id, name=name, points=points, count=len(values), mean=centre,
        sd=population_sd(values),
        difficulty=(centre / points) if centre is not None and points else None,
        discrimination=pearson(values, rest), quintiles=quintiles,
        histogram=tuple(sorted(Counter(values).items())),
        awaiting=sum(1 for s, v in scores.items() if v is None and s in totals))


def totals_of(table: dict[str, dict[str, float | None]]) -> dict[str, float]:
    """student → the sum of their scored exercises (``table``: student → grade id → score)."""
    return {student: sum(v for v in scores.values() if v is not None)
            for student, scores in table.items()}
