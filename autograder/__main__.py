"""Command line: ``python -m autograder release`` and ``python -m autograder grade``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder",
                                     description="tinyprof course tooling (nbgrader)")
    commands = parser.add_subparsers(dest="command", required=True)
    rel = commands.add_parser("release", help="regenerate notebooks/ from solutions/")
    rel.add_argument("assignments", nargs="*", help="assignment ids (default: all)")
    grd = commands.add_parser("grade", help="autograde a folder of submissions")
    grd.add_argument("submissions", type=Path, help="folder of student/assignment/notebook.ipynb")
    grd.add_argument("--out", type=Path, required=True, help="folder for grades and feedback")
    args = parser.parse_args(argv)

    if args.command == "release":
        from .release import release

        for path in release(args.assignments or None):
            shown = path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path
            print(f"released {shown}")
        return 0

    from .grade import grade

    rows, problems = grade(args.submissions, args.out)
    print(f"graded {len(rows)} submission(s) into {args.out / 'grades.csv'}")
    for problem in problems:
        print(f"problem: {problem}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
