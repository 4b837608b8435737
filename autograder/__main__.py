"""Command line: ``python -m autograder release | publish | grade | export | report | demo``."""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

from .grade import Settings


def _limits(parser: argparse.ArgumentParser, jobs: int = 1, timeout: int | None = None) -> None:
    defaults = Settings()
    timeout = timeout or defaults.timeout
    parser.add_argument("--jobs", type=int, default=jobs,
                        help=f"submissions graded at once, a worker process each (default {jobs})")
    parser.add_argument("--timeout", type=int, default=timeout,
                        help=f"seconds of CPU time a cell may use, all its processes together "
                             f"(default {timeout})")
    parser.add_argument("--wall-timeout", type=int, default=None, metavar="SECONDS",
                        help="wall-clock seconds after which a cell is stopped whatever its CPU "
                             "time (default: 3 x --timeout + 30); a cell stopped by it while "
                             "using little CPU is run again with longer limits, then flagged")
    parser.add_argument("--memory", type=int, default=defaults.memory_mb, metavar="MB",
                        help=f"memory limit of each student kernel in MB (default "
                             f"{defaults.memory_mb}; 0: none)")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="run student kernels WITHOUT the bubblewrap sandbox (only for code "
                             "you trust; marked in grades.csv and the summary)")
    parser.add_argument("--scheduler", metavar="ADDRESS", default=None,
                        help="grade on a Dask cluster: the scheduler's address (tcp://HOST:PORT), "
                             "or local:N for N Dask workers on this machine; --jobs is then per "
                             "worker (book/instructors.md)")


def parser() -> argparse.ArgumentParser:
    main = argparse.ArgumentParser(prog="python -m autograder",
                                   description="tinyprof course tooling (nbgrader)")
    commands = main.add_subparsers(dest="command", required=True)
    rel = commands.add_parser("release", help="regenerate notebooks/ from solutions/")
    rel.add_argument("assignments", nargs="*", help="assignment ids (default: all)")
    pub = commands.add_parser("publish", help="write the student repository (for Binder and "
                                             "Colab) into a folder, refusing any leak")
    pub.add_argument("out", type=Path, help="an empty folder, or one an earlier publish wrote")
    commands.add_parser("home", help="show the course's home (repository in _config.yml) and "
                                     "warn if students must not launch from it")
    grd = commands.add_parser("grade", help="autograde a cohort's submissions")
    grd.add_argument("submissions", type=Path,
                     help="a folder (student/assignment/notebook.ipynb, or LMS downloads) or an "
                          "LMS zip")
    grd.add_argument("--out", type=Path, required=True,
                     help="folder for the gradebook, grades.csv and feedback (re-run to resume)")
    _limits(grd)
    grd.add_argument("--student", action="append", metavar="NAME",
                     help="grade only this student (again), keeping everyone else's grades; "
                          "repeatable")
    _export_parser(commands)
    rep = commands.add_parser("report", help="after grade: the cohort report (statistics per "
                                             "exercise, named mistakes, what needs a look, "
                                             "similar answers), offline, into DIR/report")
    rep.add_argument("graded", type=Path, metavar="DIR", help="a folder `grade` wrote")
    demo = commands.add_parser("demo", help="grade the shipped sample submissions, then export")
    demo.add_argument("--out", type=Path, default=None,
                      help="folder for the demo (default: grading/demo in the repository)")
    _limits(demo, jobs=2, timeout=10)  # the endless loops cost a timeout each: keep it short
    return main


def _export_parser(commands) -> None:
    exp = commands.add_parser("export", help="grades and feedback of a graded folder back into "
                                             "the LMS: Canvas gradebook, Moodle worksheet, or CSV")
    exp.add_argument("graded", type=Path, metavar="DIR", help="a folder `grade` wrote")
    exp.add_argument("--chapter", required=True, metavar="NN_topic", help="the assignment id")
    exp.add_argument("--out", type=Path, required=True, metavar="FOLDER",
                     help="folder for the filled LMS file(s) and export_summary.txt")
    lms = exp.add_mutually_exclusive_group()
    lms.add_argument("--canvas", type=Path, metavar="GRADEBOOK.csv",
                     help="the gradebook CSV exported from Canvas (Grades > Export)")
    lms.add_argument("--moodle", type=Path, metavar="WORKSHEET.csv",
                     help="Moodle's offline grading worksheet of the assignment")
    exp.add_argument("--assignment", metavar="NAME",
                     help="with --canvas: the start of the assignment column's name")
    exp.add_argument("--include-flagged", action="store_true",
                     help="also export flagged and unreadable submissions' scores")


def _export(args: argparse.Namespace) -> int:
    from .results.export import export
    from .results.lms import SheetError

    try:
        report = export(args.graded, args.chapter, args.out, canvas=args.canvas,
                        assignment=args.assignment, moodle=args.moodle,
                        include_flagged=args.include_flagged)
    except (OSError, SheetError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(report.text(), end="")
    return 0


def _report(args: argparse.Namespace) -> int:
    from .results.cohort_report.build import write_report
    from .results.cohort_report.graded import ReportError

    try:
        pages = write_report(args.graded)
    except (OSError, ReportError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"cohort report: {pages[0]} ({len(pages) - 1} assignment page(s); private: keep it "
          "off the web and out of git)")
    return 0


def warn_about_home() -> bool:
    """Print, on stderr, why the course's home is the wrong place for students (if it is)."""
    from .release.home import home_warning

    warning = home_warning()
    if warning:
        print(textwrap.fill(f"WARNING: {warning}", width=100, break_on_hyphens=False,
                            break_long_words=False), file=sys.stderr)
    return warning is not None


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "home":
        from .release.home import read_home

        home = read_home()
        print(f"course home: {home.url} (branch {home.branch})")
        warn_about_home()
        return 0  # a warning, not a failure: CI builds the book from this repository

    if args.command == "release":
        from .release.notebooks import release

        for path in release(args.assignments or None):
            shown = path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path
            print(f"released {shown}")
        warn_about_home()
        return 0

    if args.command == "publish":
        from .release.publish import PublishLeakError, publish

        try:
            written = publish(args.out)
        except (PublishLeakError, FileExistsError, ValueError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        print(f"published {len(written)} files into {args.out}")
        warn_about_home()
        return 0

    if args.command == "export":
        return _export(args)

    if args.command == "report":
        return _report(args)

    from .grade import GradingInterrupted, grade

    settings = Settings(timeout=args.timeout, memory_mb=args.memory, sandbox=not args.no_sandbox,
                        wall_timeout=args.wall_timeout)
    try:
        if args.command == "demo":
            from .demo import demo

            out = demo(args.out, jobs=args.jobs, settings=settings, scheduler=args.scheduler)
        else:
            out = args.out
            grade(args.submissions, out, jobs=args.jobs, settings=settings,
                  students=args.student, scheduler=args.scheduler)
    except GradingInterrupted as stop:
        print(f"interrupted: {stop}", file=sys.stderr)
        return 130
    except (OSError, ValueError, RuntimeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print((Path(out) / "summary.txt").read_text(encoding="utf-8"), end="")
    print(f"grades: {Path(out) / 'grades.csv'}\nfeedback: {Path(out) / 'feedback'}")
    if args.command == "demo":   # demo.py exported the grades into a Canvas gradebook
        print((Path(out).parent / "export" / "export_summary.txt").read_text(encoding="utf-8"),
              end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
