"""Pairs of submissions whose answer cells are unusually alike: a list to look at, never a
verdict.

Each student's answer cells (the solution cells' code, as handed in) are fingerprinted with
copydetect (MIT; Stanford MOSS's winnowing, run here, offline): its tokenizer replaces every
variable, function and class name with one letter, so renaming variables changes nothing, and
every k-gram of the released notebook's code (the stubs, signatures and docstrings every
student starts from) is boilerplate, removed before comparing. A pair's similarity is the
mean of copydetect's two shares (the part of each student's own code found in the other's).
Short answers share little that is not boilerplate; a pair of independent correct solutions
of the same exercise scores low, a copy with renamed variables close to 1.
"""

from __future__ import annotations

import io
import itertools
from dataclasses import dataclass

from ...cells import is_answer, source

#: copydetect's defaults: k-grams of 25 filtered characters, every match of 30 found.
NOISE = 25
GUARANTEE = 30


@dataclass(frozen=True)
class SimilarPair:
    """Two students, their similarity (0 to 1) and each one's share found in the other."""

    first: str
    second: str
    similarity: float
    shares: tuple[float, float]


def answer_code(notebook: dict) -> str:
    """The code of a notebook's answer cells, one after the other."""
    return "\n\n".join(source(cell) for cell in notebook.get("cells", [])
                       if cell.get("cell_type") == "code" and is_answer(cell))


def release_code(notebook: dict) -> str:
    """Every code cell of the released notebook: what every student starts from."""
    return "\n\n".join(source(cell) for cell in notebook.get("cells", [])
                       if cell.get("cell_type") == "code")


def _fingerprint(code: str, boilerplate=None):
    from copydetect import CodeFingerprint

    return CodeFingerprint("answers.py", NOISE, GUARANTEE - NOISE + 1, boilerplate=boilerplate,
                           language="python", fp=io.StringIO(code))


def boilerplate_hashes(code: str):
    """Every k-gram hash of ``code`` (copydetect's boilerplate: window 1)."""
    import numpy as np
    from copydetect import CodeFingerprint

    whole = CodeFingerprint("release.py", NOISE, 1, language="python", fp=io.StringIO(code))
    return np.unique(np.array(sorted(whole.hashes), dtype=np.int64))


def similar_pairs(codes: dict[str, str], boilerplate: str) -> list[SimilarPair]:
    """Every pair of students that shares any fingerprint, most similar first."""
    from copydetect import compare_files

    hashes = boilerplate_hashes(boilerplate) if boilerplate.strip() else None
    prints = {student: _fingerprint(code, hashes) for student, code in sorted(codes.items())
              if code.strip()}
    pairs = []
    for first, second in itertools.combinations(sorted(prints), 2):
        a, b = prints[first], prints[second]
        if not a.hashes or not b.hashes or a.hashes.isdisjoint(b.hashes):
            continue
        _, shares, _ = compare_files(a, b)
        shares = (min(1.0, float(shares[0])), min(1.0, float(shares[1])))
        pairs.append(SimilarPair(first, second, (shares[0] + shares[1]) / 2, shares))
    return sorted(pairs, key=lambda p: (-p.similarity, p.first, p.second))
