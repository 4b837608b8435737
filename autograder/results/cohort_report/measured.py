"""What the speed, busy-device and leak tests measured, per test cell, with their tiers.

The grader keeps each measurement in the test cell's verdict record
(``metadata.tinyprof.verdict.measured``, run/judge.py: ``speed``, the speed-up; ``busy``, the
share of the run the device was busy; ``leak``, bytes of growth per step beyond the slack
the test allows its runs, the number it holds to its tolerance). The tiers are the
thresholds the instructor's test cells pass to ``expect_faster`` (``at_least``),
``expect_busy_device`` (``at_least``) and ``expect_leak_free`` (``tolerance``), read from their
source; the cells of one kind that test the same function share their tiers (chapter 08's
2×, 4× and 6× cells).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ...cells import grade_id, is_test, source

#: kind → (the helper that measures it, its threshold's keyword, that keyword's default, unit)
CHECKS = {"speed": ("expect_faster", "at_least", 2.0, "speed-up (×)"),
          "busy": ("expect_busy_device", "at_least", 0.8, "share of the run the device was busy"),
          "leak": ("expect_leak_free", "tolerance", 1024.0,
                   "bytes of growth per step beyond the slack of its runs")}


@dataclass(frozen=True)
class MeasuredTest:
    """One test cell's measurements over the cohort (student → value) and the tiers drawn;
    ``graded``: student → the number a tier is decided by (a speed-up's 95 % interval's lower
    bound; the value itself for the others)."""

    grade_id: str
    kind: str
    values: dict[str, float]
    tiers: tuple[float, ...]
    graded: dict[str, float] | None = None

    def decided(self) -> list[float]:
        """The numbers the tiers are decided by, one per student."""
        return list((self.graded or self.values).values())

    @property
    def unit(self) -> str:
        return CHECKS[self.kind][3]


#: kind → which of a cell's measurements it is graded by at worst (a cell may check twice:
#: chapter 10's leak test runs at 400 steps and at 150)
WORST = {"speed": min, "busy": min, "leak": max}


def measurements_in(notebook: dict) -> dict[str, tuple[str, float, float]]:
    """Grade id → (kind, value, the number its tier is decided by) of each test cell that
    recorded a measurement: the worst of its measurements (the lowest speed-up or busy share,
    the highest growth); a speed-up's tier is decided by its interval's lower bound."""
    found = {}
    for cell in notebook.get("cells", []):
        record = cell.get("metadata", {}).get("tinyprof", {})
        verdict = record.get("verdict") if isinstance(record, dict) else None
        measured = verdict.get("measured") if isinstance(verdict, dict) else None
        if not is_test(cell) or not isinstance(measured, list):
            continue
        values: dict[str, list[tuple[float, float]]] = {}
        for item in measured:
            try:
                if isinstance(item, dict) and item.get("kind") in CHECKS:
                    value = float(item["value"])
                    decided = float(item.get("low", value)) if item["kind"] == "speed" else value
                    values.setdefault(item["kind"], []).append((value, decided))
            except (KeyError, TypeError, ValueError):
                continue
        if values:
            kind = next(iter(values))
            value, decided = WORST[kind](values[kind], key=lambda pair: pair[1])
            found[grade_id(cell)] = (kind, value, decided)
    return found


def thresholds(cell_source: str) -> list[tuple[str, str, float]]:
    """(kind, the function tested, threshold) of each check a test cell's source calls."""
    try:
        tree = ast.parse(cell_source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called = node.func.attr if isinstance(node.func, ast.Attribute) else \
            getattr(node.func, "id", "")
        for kind, (helper, keyword, default, _) in CHECKS.items():
            if called != helper:
                continue
            value = default
            for given in node.keywords:
                if given.arg == keyword and isinstance(given.value, ast.Constant) \
                        and isinstance(given.value.value, (int, float)):
                    value = float(given.value.value)
            tested = ast.unparse(node.args[0]) if node.args else ""
            found.append((kind, tested, value))
    return found


def tiers_by_cell(instructor: dict[str, dict]) -> dict[str, tuple[str, tuple[float, ...]]]:
    """Grade id → (kind, the tiers of every cell that checks the same function the same way)."""
    checks = {gid: thresholds(source(cell)) for gid, cell in instructor.items()}
    shared: dict[tuple[str, str], set[float]] = {}
    for found in checks.values():
        for kind, tested, value in found:
            shared.setdefault((kind, tested), set()).add(value)
    return {gid: (found[0][0], tuple(sorted(shared[found[0][0], found[0][1]])))
            for gid, found in checks.items() if found}


def measured_tests(per_student: dict[str, dict[str, tuple[str, float, float]]],
                   instructor: dict[str, dict]) -> list[MeasuredTest]:
    """The cohort's measurements per test cell (``per_student``: student → grade id → (kind,
    value, decided by)), in the order of ``instructor`` (grade id → cell)."""
    tiers = tiers_by_cell(instructor)
    found = []
    for gid in list(instructor) + sorted({g for m in per_student.values() for g in m}
                                         - set(instructor)):
        mine = {s: m[gid] for s, m in per_student.items() if gid in m}
        if mine:
            kind = next(iter(mine.values()))[0]
            found.append(MeasuredTest(gid, kind, {s: v[1] for s, v in mine.items()},
                                      tiers.get(gid, (kind, ()))[1],
                                      {s: v[2] for s, v in mine.items()}))
    return found


def tier_counts(kind: str, values: list[float], tiers: tuple[float, ...]) -> list[str]:
    """How many students each tier holds, in words: a speed-up or busy share reaches a tier
    at or above it; growth per step above the tolerance is a leak."""
    if kind == "leak":
        return [f"{sum(v > t for v in values)} above the tolerance of {t:g} bytes a step"
                for t in tiers]
    if kind == "speed":
        return [f"{sum(v >= t for v in values)} reach {t:g}× (the 95% interval's lower bound)"
                for t in tiers]
    return [f"{sum(v >= t for v in values)} at or above {t:g}" for t in tiers]
