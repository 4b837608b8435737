"""What grading expects of whoever grades its submissions (grade.py's one way to dispatch), and
the one rule for a grader lost mid-notebook.

A :class:`Dispatcher` grades ``records.Task`` lines somewhere (pool.Pool: worker processes on
this machine; cluster.Cluster: Dask workers) and, in the grading parent, calls ``done`` once per
task with its result, who graded it and the isolation its kernels ran under. Either way, a
grader that dies holding a task is replaced and the task tried once more (:func:`after_loss`),
and one that runs past the submission's limit is stopped (:func:`timed_out`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Protocol

from ..records import DIED_TWICE, Result, Task

#: ``done(task, result, worker, sandbox)``: called in the grading parent once per task, with
#: the name of who graded it and what isolated its kernels ("" when nothing graded it).
Done = Callable[[Task, Result, str, str], None]
#: ``started(task)``: a grader has begun the task (the progress bar).
Started = Callable[[Task], None]


class Dispatcher(Protocol):
    """Grades tasks and reports each one back through its ``done`` callback."""

    def run(self, tasks: list[Task]) -> list[str]:
        """Grade them all; return the problems for the summary (graders that refused, and
        why)."""
        ...


def after_loss(task: Task) -> Task | Result:
    """A grader died holding ``task`` (crashed, killed, out of memory): the task for a new
    grader, marked as retried; or, when it had been retried already, its result."""
    if not task.retried:
        return replace(task, retried=True)
    return Result(task.work, "not graded", [DIED_TWICE])


def timed_out(task: Task, limit_s: float) -> Result:
    """The result of a task whose grader ran past ``limit_s`` seconds and was stopped."""
    return Result(task.work, "timed out", [
        f"grading took longer than {limit_s:.0f} s in all and was stopped"])
