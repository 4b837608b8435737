"""The Prefetcher's contract (chapter 09, §9.5), observed in the student's kernel and judged by
the grader: every promise at every item, in scenarios drawn from a seed.

A student's ``Prefetcher(source, depth)`` is an iterator with ``close()`` that loads ahead in a
thread. It promises: the source's items, in order; each item's loading begun by its loader
thread before the consumer asks for it; at most ``depth`` items held (one more in the loader's
hand, waiting for room); the source's exception raised in the consumer, after the items before
it; and, when ``close()`` returns, no thread of its own left running.

*Threats.* A class in the same process as the probe can call whatever the probe hands it, and
behaves well only where the probe looks: at item 1, at one exception type and one position,
while one item is held, or within a grace period after ``close()``.

*Defence.* :func:`plan` draws the scenarios from a seed and the depth (the hidden test draws
the seed at every grading, and drives depths 1, 3 or 4, and 5 to 8; the visible test's is 2):
sources that fail with each of :data:`ERRORS` at positions 0, ``depth``, ``depth + 1`` and
others; slow and fast consumers and sources; early stops at several points, with the loader
blocked on a full queue, inside a slow pull, or just started. :func:`drive_prefetcher` runs
them in the kernel and reports plain values; :func:`check_prefetcher`, in the grader (the test
cell runs in the judge), recomputes the plan from the seed and decides:

- **the items**: their values are drawn from the seed, so the grader knows them; the consumer
  must get exactly the source's items, in order;
- **who loads**: the source records ``threading.get_ident()`` at every pull; any item pulled in
  the consumer's own thread breaks the promise (a class without a thread, or one that falls
  back to loading in ``__next__``);
- **ahead, at every item**: a slow consumer holding item k waits for item k + 1's loading to
  begin (up to :data:`PATIENCE`), then asks; an item whose loading had not begun when it was
  asked for was not loaded ahead;
- **the bound, at every pull**: when the source is asked for item i, at most ``depth + 1``
  items may be pulled and not yet taken by the consumer (``depth + 2`` while the consumer is
  inside ``__next__``: the item it is taking is one of them; none once ``close()`` began, which
  may drop what was queued); checked on every pull, so a loader that runs away after the
  first items is seen;
- **the exception**: the consumer must get the source's own exception object (or one of its
  exact type), after all the items before it, for every type and position;
- **close()**: when it returns, no thread that ever pulled from the source, nor any other
  thread started since the prefetcher was made, may still run Python code
  (``sys._current_frames``, read by the probe at once: no grace period that a loader dying
  "later" could use, and no ``Thread.is_alive``, thread name or ``threading.enumerate`` entry
  that a class can change).

*Nothing to call, nothing to recognise.* The source handed to the class has the shape a
student's own source has, drawn for each scenario from :data:`SHAPES` (a generator, an iterator
class of a drawn name, a ``map``, a ``callable_iterator``), with nothing but the iterator
protocol to call; its items are drawn from :data:`ITEMS` (integers, or tuples, arrays and dicts
carrying one); its own exception class has a drawn name and module (:data:`ERROR_NAMES`,
:data:`ERROR_MODULES`); and the consumer runs in the caller's thread (the notebook's main
thread, stopped by ``SIGALRM`` if it hangs) or in a thread whose target looks like a notebook's,
drawn too. A class that keeps its promises only for what the probe looks like breaks them in
the scenarios that look otherwise. What the source observes lives
in closures and in the probe's frames, which a class reaches only through reflection that the
static review flags (``__closure__``, frames, ``gc.get_referrers``); the consumer's thread,
which the class can find (``threading.current_thread()``), runs its scenario once, however
often its target is called. The functions the observations rest on (``sys._current_frames``,
``threading.get_ident``, the clock and sleep) are read when this module is imported, before any
notebook code runs. The probe's clocks and waits decide nothing but pacing and the hints'
words: a wait that runs out only moves the scenario on (a loader that never loads ahead costs
the patience once per drive, not per item). A scenario that has not finished after
:data:`HANG_SECONDS` is reported as blocked and the drive ends there.
"""

from __future__ import annotations

import itertools
import random
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

# Read once, at import (before notebook code runs): what the observations rest on.
_running_threads = sys._current_frames
_thread_id = threading.get_ident
_sleep = time.sleep
_clock = time.monotonic

#: The exceptions a source raises; every drive raises each of them once, at its own position
#: ("SourceFailed" is a class of the probe's, made anew for each drive under a drawn name).
ERRORS = ("ValueError", "KeyError", "OSError", "RuntimeError", "ZeroDivisionError",
          "IndexError", "SourceFailed")
#: Seconds a slow consumer waits for the next item's loading to begin before it asks anyway.
PATIENCE = 1.0
#: A scenario still running after this many seconds is reported as blocked; the drive ends.
HANG_SECONDS = 5.0
#: Seconds the slow pull takes in a "close while pulling" scenario.
SLOW_PULL = 0.06
#: Seconds a consumer lets its loader reach a full queue before it closes the prefetcher.
SETTLE = 0.015
#: Seconds the probe watches a thread left running after close(), for the hint only (once a
#: drive: a thread that outlives it is not waited for again).
GRACE = 0.3
#: A runaway loader (this many items beyond the bound) is slowed down, so that an endless
#: source cannot fill the kernel's memory.
RUNAWAY = 8
#: The most items a scenario's consumer takes (a fast consumer, before it stops).
LONGEST = 160
#: Version of the report :func:`drive_prefetcher` returns.
REPORT_VERSION = 1
#: The kinds of source a scenario hands the class, as students write them: a generator
#: function's generator, an instance of an iterator class (with ``__slots__`` or without),
#: ``map(f, ...)``, ``iter(f, end)``.
SHAPES = ("generator", "class", "slotted class", "map", "callable")
#: What a scenario's items are (drawn): the integers the grader checks, or objects carrying one
#: as a training loop's items are (a batch's (x, y) tuple, an array, a dict), told apart by the
#: probe by identity, never by a mark a class could read.
ITEMS = ("int", "tuple", "array", "dict")
#: The names and modules an exception class of the probe's is given (drawn at every drive): a
#: library's or the notebook's own, never tinyprof's.
ERROR_NAMES = ("SourceFailed", "ReadError", "DecodeError", "UnidentifiedImageError",
               "BadZipFile", "CorruptBatch", "LoaderError", "FetchError")
ERROR_MODULES = ("__main__", "PIL.Image", "zipfile", "urllib3.exceptions",
                 "requests.exceptions", "datasets.builder", "numpy.exceptions")
#: The qualified names a source's generator function or iterator class is given (drawn): a
#: student's own, and those of the chapter's sources (``Dataset.batches``, ...), so a class right
#: for every source so named is right for every source the chapter has.
SOURCE_NAMES = ("batches", "read_batches", "load", "items", "stream", "samples", "Batches",
                "Loader", "Reader", "FileStream", "Dataset.batches", "ImageFolder.batches",
                "Workers.batches", "Prefetcher.__next__")

# The promises, in the order the grader checks them (each a value of PromiseCheck.promise).
KEPT = "every promise kept"
BLOCKED = "blocked"
RAISED = "raised"
WRONG_ITEMS = "wrong items"
IN_CONSUMER = "loaded in the consumer's thread"
NOT_AHEAD = "loaded only when asked"
UNBOUNDED = "held more than depth + 1"
SWALLOWED = "exception swallowed"
EARLY = "exception before the items ahead of it"
REPLACED = "another exception"
LEFT_RUNNING = "loader left running"
MALFORMED = "no report"
PROMISES = (BLOCKED, RAISED, WRONG_ITEMS, IN_CONSUMER, NOT_AHEAD, UNBOUNDED, SWALLOWED, EARLY,
            REPLACED, LEFT_RUNNING)

#: Where a consumer was when its scenario blocked (a code the grader turns into words).
STAGES = {"init": "in Prefetcher(source, depth)", "next": "in __next__, waiting for item {k}",
          "close": "in close()", "wait": "waiting for the loader"}


# -- the plan: the same on both sides, from the seed ------------------------------------------

@dataclass(frozen=True)
class Scenario:
    """One run of the prefetcher: who consumes how, what the source does, where it stops.

    ``consumer``: "slow" (holds each item until the next one's loading began, then a few ms
    more) or "fast" (asks again at once); ``source``: "fast" or "slow" (each pull sleeps
    0.3–1.5 ms); ``fails_at``/``error``: the source raises ``error`` when asked for that item;
    ``stop_after``: the consumer stops after that many items (endless source) and closes
    ``close_while`` the loader is "blocked" on a full queue, "pulling" (inside the slow pull
    of item ``slow_at``) or "starting" (at once); ``shape``: the kind of source (one of
    :data:`SHAPES`), ``name`` its function's or class's name; ``item``: what its items are
    (one of :data:`ITEMS`); ``thread``: where the consumer runs, in a thread of its own
    ("own") or in the thread that called :func:`drive_prefetcher` ("caller": a notebook's
    main thread)."""

    number: int
    depth: int
    consumer: str
    source: str
    items: int | None = None
    fails_at: int | None = None
    error: str | None = None
    stop_after: int | None = None
    close_while: str | None = None
    slow_at: int | None = None
    shape: str = "class"
    name: str = "batches"
    item: str = "int"
    thread: str = "own"

    @property
    def received(self) -> int:
        """How many items the consumer should get."""
        for count in (self.stop_after, self.fails_at, self.items):
            if count is not None:
                return count
        raise ValueError("a scenario has an end, an error or a stop")

    def describe(self, total: int) -> str:
        """Which scenario, in words: "scenario 3 of 13 (depth 2; a slow consumer; ...)"."""
        pace = ("read at once" if self.source == "fast" else "each read in up to 1.5 ms") + \
            f", {SHAPE_WORDS[self.shape]}"
        if self.fails_at is not None:
            error = ("an exception of its own class (a library's or the notebook's)"
                     if self.error == "SourceFailed" else self.error)
            source = f"a source ({pace}) that raises {error} when asked for item {self.fails_at}"
        elif self.close_while == "starting":
            source = "an endless source; close() called at once, before any item"
        elif self.stop_after is not None:
            where = ("with its loader blocked on a full queue" if self.close_while == "blocked"
                     else f"while its loader is inside a {SLOW_PULL * 1e3:g} ms read of item "
                          f"{self.slow_at}")
            source = (f"an endless source ({pace}); the consumer stops after {self.stop_after} "
                      f"item(s) and calls close() {where}")
        else:
            source = f"a source of {self.items} items ({pace})"
        thread = "in the notebook's own thread" if self.thread == "caller" else "in a thread"
        return (f"scenario {self.number + 1} of {total} (depth {self.depth}; a {self.consumer} "
                f"consumer {thread}; {source}; items: {ITEM_WORDS[self.item]})")


def plan(depth: int, seed: int) -> list[Scenario]:
    """The scenarios of a drive: two plain runs (a slow consumer of up to 40 items, a fast one
    of a slow source), one per exception of :data:`ERRORS` (at positions 0, depth, depth + 1
    and four drawn ones, the pairs shuffled, at least three consumers of each speed), and four
    early stops (blocked after a few items of a slow consumer and after up to :data:`LONGEST`
    of a fast one, pulling, starting); in an order drawn from the seed. The lengths are drawn
    too: a class that keeps a promise only for its first items must keep it for LONGEST of
    them."""
    depth = int(depth)
    rng = random.Random(f"prefetcher plan {depth} {int(seed)}")
    speed = ("slow", "fast")
    kinds: list[dict] = [
        dict(consumer="slow", source="fast", items=rng.randint(2 * depth + 3, 40)),
        dict(consumer="fast", source="slow", items=rng.randint(2 * depth + 3, 20)),
    ]
    positions = [0, depth, depth + 1, rng.randint(1, depth + 5), rng.randint(depth + 2,
                 depth + 6), rng.randint(0, depth + 6), rng.randint(1, 2 * depth + 4)]
    errors, consumers = list(ERRORS), ["slow", "fast"] * 4
    rng.shuffle(errors)
    rng.shuffle(consumers)
    for error, at, consumer in zip(errors, positions, consumers):
        kinds.append(dict(consumer=consumer, source=rng.choice(("fast", "fast", "slow")),
                          fails_at=at, error=error))
    pulling = rng.randint(0, depth + 2)
    kinds += [
        dict(consumer="slow", source="fast", stop_after=rng.randint(1, depth + 3),
             close_while="blocked"),
        dict(consumer="fast", source="fast", stop_after=rng.randint(depth + 4, LONGEST),
             close_while="blocked"),
        dict(consumer=rng.choice(speed), source="fast", stop_after=pulling,
             close_while="pulling", slow_at=pulling + rng.randint(0, depth - 1)),
        dict(consumer="fast", source="fast", stop_after=0, close_while="starting"),
    ]
    rng.shuffle(kinds)
    looks = random.Random(f"prefetcher shapes {depth} {int(seed)}")   # drawn apart: the rest
    return [Scenario(number, depth, **kind, shape=shape, name=looks.choice(SOURCE_NAMES),
                     item=item, thread=thread)                       # of the plan is as before
            for number, (kind, shape, item, thread) in enumerate(zip(
                kinds, _spread(SHAPES, len(kinds), looks), _spread(ITEMS, len(kinds), looks),
                _spread(("caller", "own"), len(kinds), looks)))]


def _spread(choices: tuple[str, ...], count: int, rng: random.Random) -> list[str]:
    """``count`` of ``choices``, each as often as the others (within one), in a drawn order."""
    spread = list(choices) * -(-count // len(choices))
    rng.shuffle(spread)
    return spread[:count]


def item_values(depth: int, seed: int, number: int):
    """The items of scenario ``number``'s source, in order (an endless generator): random
    integers drawn from the seed, which the class under test is never given."""
    rng = random.Random(f"prefetcher items {int(depth)} {int(seed)} {int(number)}")
    while True:
        yield rng.getrandbits(30)


def first_values(depth: int, seed: int, number: int, count: int) -> list[int]:
    values = item_values(depth, seed, number)
    return [next(values) for _ in range(count)]


# -- the kernel's side: run the scenarios, report what was seen --------------------------------

def drive_prefetcher(prefetcher: Callable, depth: int = 2, seed: int = 0) -> dict[str, Any]:
    """Run ``prefetcher(source, depth)`` (a class: an iterator with ``close()``) through the
    scenarios of :func:`plan`, in this process, and report what was seen as plain values, one
    record per scenario (:func:`check_prefetcher` decides). Stops after a scenario that
    blocked."""
    depth, seed = int(depth), int(seed)
    patience = (_Patience(PATIENCE), _Patience(PATIENCE), _Patience(GRACE))
    errors = _error_classes()
    seen = []
    for scenario in plan(depth, seed):
        record = _run(prefetcher, scenario, seed, patience, errors)
        seen.append(record)
        if record["hung"]:
            break
    return {"version": REPORT_VERSION, "depth": depth, "seed": seed, "scenarios": seen}


class _Patience:
    """How long the probe still waits for something of the class's: ``seconds`` until a wait
    first runs out, then nothing (a loader that does not load ahead, or a thread that outlives
    close(), costs the wait once a drive)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def wait(self, event: threading.Event) -> bool:
        if event.wait(self.seconds):
            return True
        self.seconds = 0.0
        return False


def _error_classes() -> dict[str, type]:
    """The exception classes of a drive by :data:`ERRORS` name: the built-in ones, and the
    probe's own for "SourceFailed", made anew under a drawn name and module (a library's or the
    notebook's), so no list of types or modules catches it."""
    import builtins

    draw = random.SystemRandom()
    name = draw.choice(ERROR_NAMES)
    own = type(name, (Exception,), {"__module__": draw.choice(ERROR_MODULES),
                                    "__qualname__": name})
    return {error: getattr(builtins, error, own) for error in ERRORS}


class _Watch:
    """What one scenario saw; lives in the probe's closures, never handed to the class."""

    def __init__(self, scenario: Scenario, seed: int):
        self.scenario = scenario
        self.lock = threading.Lock()
        self.values = item_values(scenario.depth, seed, scenario.number)
        self.made: list[int] = []
        self.items: list[Any] = []
        self.index_of: dict[int, int] = {}
        self.started: dict[int, threading.Event] = {}
        self.next_index = 0
        self.finished = False
        self.handed = 0
        self.asking = False
        self.closing = False
        self.consumer = -1
        self.loaders: set[int] = set()
        self.in_consumer: list[int] = []
        self.late: list[int] = []
        self.most_held = [0, -1]
        self.most_held_asking = [0, -1]
        self.got: list[int] = []
        self.ending = ""
        self.exception: dict[str, Any] | None = None
        self.failure: BaseException | None = None
        self.stage = ["init", 0]
        self.present: set[int] = set()
        self.left_running = 0
        self.others_left = 0
        self.ended_after: float | None = None

    def item(self, index: int) -> Any:
        """Item ``index`` of the source (made when first pulled; call with the lock held)."""
        while len(self.made) <= index:
            value = next(self.values)
            made = _item(self.scenario.item, value)
            self.index_of[id(made)] = len(self.made)
            self.made.append(value)
            self.items.append(made)
        return self.items[index]

    def value_of(self, item: Any) -> int:
        """The value the grader checks for an item the consumer got: its own when it is one
        of the source's items (an int equal to it; any other kind, that very object), else
        -1."""
        if self.scenario.item == "int":
            return item if type(item) is int else -1
        with self.lock:
            index = self.index_of.get(id(item))
            return self.made[index] if index is not None and self.items[index] is item else -1

    def event(self, index: int) -> threading.Event:
        with self.lock:
            return self.started.setdefault(index, threading.Event())

    def has_started(self, index: int) -> bool:
        with self.lock:
            event = self.started.get(index)
        return event is not None and event.is_set()

    def record(self) -> dict[str, Any]:
        return {"number": self.scenario.number, "hung": False, "got": list(self.got),
                "ending": self.ending, "exception": self.exception,
                "in_consumer": self.in_consumer[:8], "late": self.late[:8],
                "most_held": list(self.most_held),
                "most_held_asking": list(self.most_held_asking),
                "left_running": self.left_running, "others_left": self.others_left,
                "ended_after": self.ended_after,
                "loaders": len(self.loaders), "stage": list(self.stage)}


def _source(watch: _Watch, errors: dict[str, type]) -> Any:
    """The scenario's source, of its drawn shape (:func:`_shaped`); what it observes is all in
    this closure."""
    scenario = watch.scenario
    rng = random.Random(f"pulls {scenario.number} {scenario.depth}")
    stop_at = scenario.items

    def pull() -> int:
        with watch.lock:
            if watch.finished:
                raise StopIteration
            index = watch.next_index
            watch.next_index += 1
            me = _thread_id()
            if stop_at is not None and index >= stop_at:
                watch.finished = True
                raise StopIteration
            watch.started.setdefault(index, threading.Event()).set()
            if me == watch.consumer:
                watch.in_consumer.append(index)
            else:
                watch.loaders.add(me)
            held = index + 1 - watch.handed
            most = watch.most_held_asking if watch.asking else watch.most_held
            if held > most[0] and not watch.closing:   # close() may drop what is queued
                most[:] = [held, index]
            if index == scenario.fails_at:
                watch.finished = True
                watch.failure = errors[scenario.error](f"item {index} cannot be read")
                raise watch.failure
            value = watch.item(index)
        if index == scenario.slow_at:
            _sleep(SLOW_PULL)
        elif scenario.source == "slow":
            _sleep(rng.uniform(3e-4, 1.5e-3))
        if held > scenario.depth + RUNAWAY:
            _sleep(2e-3)
        return value

    return _shaped(pull, scenario.shape, scenario.name)


#: How a scenario's description names its kind of item.
ITEM_WORDS = {"int": "integers", "tuple": "(array, integer) tuples", "array": "arrays",
              "dict": "dicts"}


def _item(kind: str, value: int) -> Any:
    """An item of ``kind`` carrying ``value`` (the probe knows it by identity)."""
    if kind == "int":
        return value
    import numpy as np

    if kind == "tuple":
        return np.full(4, value & 0xFF, dtype=np.uint8), value
    if kind == "array":
        return np.array([value], dtype=np.int64)
    return {"x": np.full(2, value & 7, dtype=np.float32), "y": value}


#: How a scenario's description names its kind of source.
SHAPE_WORDS = {"generator": "a generator", "class": "an iterator class's instance",
               "slotted class": "an iterator class's instance", "map": "a map object",
               "callable": "iter(function, end)"}
#: The end ``iter(function, end)`` waits for: never returned, the source ends by StopIteration.
_NEVER = object()


def _shaped(pull: Callable[[], Any], shape: str, name: str) -> Any:
    """An iterator of ``shape`` whose every item is ``pull()`` (StopIteration ends it, any
    other exception is raised to its caller), made in ``__main__`` under ``name``, with no
    state or method beyond the iterator protocol."""
    def generate():
        while True:
            try:
                value = pull()
            except StopIteration:
                return
            yield value

    class Source:
        def __iter__(self):
            return self

        def __next__(self):
            return pull()

    def each(_):
        return pull()

    if shape == "slotted class":
        Source = type(name, (), {"__slots__": (), "__iter__": Source.__iter__,
                                 "__next__": Source.__next__})
    short = name.rsplit(".", 1)[-1]
    Source.__module__, Source.__name__, Source.__qualname__ = "__main__", short, name
    for function in (pull, generate, each):
        function.__module__, function.__name__, function.__qualname__ = "__main__", short, name
    for method in (Source.__iter__, Source.__next__):
        method.__module__, method.__qualname__ = "__main__", f"{name}.{method.__name__}"
    if shape == "generator":
        made = generate()
        made.__name__, made.__qualname__ = short, name
        return made
    if shape == "map":
        return map(each, itertools.repeat(None))
    if shape == "callable":
        return iter(pull, _NEVER)
    return Source()


class _Hung(BaseException):
    """Raised in the caller's thread when its scenario has run :data:`HANG_SECONDS`."""


def _run(prefetcher: Callable, scenario: Scenario, seed: int,
         patience: tuple[_Patience, ...], errors: dict[str, type]) -> dict[str, Any]:
    """One scenario, its consumer in the caller's thread (stopped by SIGALRM after
    HANG_SECONDS: a notebook's main thread, where a training loop runs) or in a thread of its
    own (which a prefetcher that blocks costs HANG_SECONDS, not the kernel); in a caller that is
    not the main thread, or where there is no timer signal (Windows), always the latter."""
    watch = _Watch(scenario, seed)
    source = _source(watch, errors)
    if scenario.thread == "caller" and _can_stop_the_caller():
        hung = _run_here(prefetcher, source, watch, patience)
    else:
        hung = _run_in_a_thread(prefetcher, source, watch, patience)
    record = watch.record()
    record["hung"] = hung
    with watch.lock:   # a loader left running gets no more items: its memory stays bounded
        watch.finished = True
    return record


def _can_stop_the_caller() -> bool:
    """Whether a scenario can run in this thread and be stopped if it hangs: the main thread,
    where a timer's signal lands (not on Windows, which has none)."""
    import signal

    return threading.current_thread() is threading.main_thread() and \
        hasattr(signal, "setitimer")


def _run_here(prefetcher: Callable, source: Any, watch: _Watch,
              patience: tuple[_Patience, ...]) -> bool:
    """The consumer in this (main) thread; whether it hung: SIGALRM after HANG_SECONDS raises
    :class:`_Hung` once, and only while the consumer runs (the timer is disarmed by one atomic
    step the moment it returns, so the signal can never land in the probe's own code after)."""
    import signal

    armed = {"armed": True}

    def stop(signum: int, frame: Any) -> None:
        if armed.pop("armed", False):
            raise _Hung

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, HANG_SECONDS)
    hung = False
    try:
        _consume(prefetcher, source, watch, patience)
        armed.pop("armed", None)
    except _Hung:
        hung = True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL if previous is None else previous)
    return hung


def _run_in_a_thread(prefetcher: Callable, source: Any, watch: _Watch,
                     patience: tuple[_Patience, ...]) -> bool:
    """The consumer in a thread of its own, whose target looks like a notebook's function;
    whether it was still running after HANG_SECONDS."""
    once = threading.Lock()

    def train() -> None:
        if once.acquire(blocking=False):   # the thread's target, run again by the class: nothing
            _consume(prefetcher, source, watch, patience)

    train.__module__ = "__main__"
    train.__qualname__ = "train"
    consumer = threading.Thread(target=train, daemon=True)
    consumer.start()
    consumer.join(HANG_SECONDS)
    return consumer.is_alive()


def _consume(prefetcher: Callable, source: Any, watch: _Watch,
             patience: tuple[_Patience, ...]) -> None:
    """The consumer: build the prefetcher, take the scenario's items, close it, then look
    for threads still running. ``patience``: for the next item's loading (a wait that runs out
    there is a late item), before close() (a lazy but honest class may never fill its queue),
    and for threads left running (the hint says when they ended)."""
    scenario = watch.scenario
    watch.consumer = _thread_id()
    watch.present = set(_running_threads())
    try:
        loader = prefetcher(source, scenario.depth)
    except BaseException as error:   # noqa: BLE001 - reported, the grader decides
        _note(watch, "init", error)
        return
    try:
        _take(loader, watch, patience[0])
    except BaseException as error:   # noqa: BLE001 - the source's, or the prefetcher's own
        with watch.lock:
            watch.asking = False
        watch.ending = "exception"
        _note(watch, "next", error)
    _before_close(watch, patience[1])
    watch.stage = ["close", 0]
    with watch.lock:
        watch.closing = True
    try:
        loader.close()
    except BaseException as error:   # noqa: BLE001
        _note(watch, "close", error)
    _threads_left(watch, patience[2])
    watch.stage = ["done", 0]


def _take(loader: Any, watch: _Watch, patience: _Patience) -> None:
    """Take the scenario's items from ``loader`` as a ``for`` loop does (``iter`` once, then
    ``next``), a slow consumer waiting for the next item's loading to begin before it asks;
    records the items, the end and late loads."""
    scenario = watch.scenario
    items = iter(loader)
    slow = scenario.consumer == "slow"
    rng = random.Random(f"holds {scenario.number}")
    last = scenario.received
    asks = last if scenario.stop_after is not None else last + 1
    for k in range(asks):
        exists = k < last or scenario.fails_at is not None
        if slow and k >= 1 and exists:
            watch.stage = ["wait", k]
            patience.wait(watch.event(k))
        watch.stage = ["next", k]
        with watch.lock:
            watch.asking = True
        if slow and k >= 1 and exists and not watch.has_started(k):
            watch.late.append(k)
        try:
            item = next(items)
        except StopIteration:
            with watch.lock:
                watch.asking = False
            watch.ending = "end"
            return
        with watch.lock:
            watch.handed += 1
            watch.asking = False
        watch.got.append(watch.value_of(item))
        if slow:
            _sleep(rng.uniform(5e-4, 3e-3))
    watch.ending = "stopped" if scenario.stop_after is not None else "more"


def _before_close(watch: _Watch, patience: _Patience) -> None:
    """Bring the loader where the scenario closes it: blocked on a full queue (the items up to
    ``depth`` ahead pulled, then SETTLE), or inside the slow pull."""
    scenario = watch.scenario
    watch.stage = ["wait", watch.handed]
    if scenario.close_while == "blocked":
        patience.wait(watch.event(watch.handed + scenario.depth - 1))
        _sleep(SETTLE)
    elif scenario.close_while == "pulling" and scenario.slow_at is not None:
        patience.wait(watch.event(scenario.slow_at))


def _note(watch: _Watch, where: str, error: BaseException) -> None:
    if watch.exception is not None:
        return
    if isinstance(error, (_Hung, KeyboardInterrupt)):   # the drive's end, or the student's
        raise error
    failure = watch.failure
    same = failure is not None and type(error) is type(failure)
    watch.exception = {"where": where,
                       "type": watch.scenario.error if same else type(error).__name__,
                       "original": failure is not None and error is failure,
                       "source_type": failure is not None and type(error) is type(failure)}


def _threads_left(watch: _Watch, grace: _Patience) -> None:
    """How many threads that pulled from the source (loaders), and how many other threads
    started since the prefetcher was made, still run Python code now that close() returned;
    for the hint only, how long until they end (up to GRACE)."""
    with watch.lock:
        loaders = set(watch.loaders)

    def left() -> tuple[set[int], set[int]]:
        running = set(_running_threads())
        return running & loaders, running - loaders - watch.present

    running, others = left()
    watch.left_running, watch.others_left = len(running), len(others)
    returned = _clock()
    while (running or others) and _clock() - returned < grace.seconds:
        _sleep(0.005)
        running, others = left()
        if not running and not others:
            watch.ended_after = round(_clock() - returned, 3)
    if running or others:
        grace.seconds = 0.0


# -- the grader's side: the promises, decided from the report --------------------------------

@dataclass(frozen=True)
class PromiseCheck:
    """The verdict on a report: ``promise`` is :data:`KEPT` or the first broken promise (of
    :data:`PROMISES`, or :data:`MALFORMED`); ``what`` says where and what was seen."""

    promise: str
    what: str

    @property
    def kept(self) -> bool:
        return self.promise == KEPT


def check_prefetcher(report: Any, depth: int, seed: int) -> PromiseCheck:
    """Judge :func:`drive_prefetcher`'s report against the plan of ``depth`` and ``seed``
    (computed here): the first promise of :data:`PROMISES` that some scenario broke, in the
    order they are listed, else :data:`KEPT`. Every value of the report is checked for its
    type; a report that is not the probe's is :data:`MALFORMED`."""
    scenarios = plan(depth, seed)
    try:
        records = _records(report, scenarios, int(depth), int(seed))
    except (TypeError, ValueError, KeyError, IndexError) as wrong:
        return PromiseCheck(MALFORMED, f"the probe's report of your Prefetcher is not one the "
                                       f"probe makes ({wrong}): was drive_prefetcher changed?")
    for promise in PROMISES:
        for scenario, record in records:
            broken = _BROKEN[promise](scenario, record, seed)
            if broken:
                return PromiseCheck(promise, f"{scenario.describe(len(scenarios))}: {broken}")
    return PromiseCheck(KEPT, f"your Prefetcher in {len(scenarios)} scenarios (depth {depth}): "
                              "items, loading ahead, the bound, exceptions, close()")


def _records(report: Any, scenarios: list[Scenario], depth: int,
             seed: int) -> list[tuple[Scenario, dict]]:
    """The report's records beside their scenarios, each field's type checked."""
    if type(report) is not dict or report.get("version") != REPORT_VERSION:
        raise ValueError("not a report of this version")
    if report.get("depth") != depth or report.get("seed") != seed:
        raise ValueError("a report of another plan")
    records = report["scenarios"]
    if type(records) is not list or not records or len(records) > len(scenarios):
        raise ValueError("the wrong number of scenarios")
    pairs = []
    for position, record in enumerate(records):
        _typed(record)
        if record["number"] != position:
            raise ValueError("scenarios out of order")
        if record["hung"] is not True and position == len(records) - 1 and \
                len(records) < len(scenarios):
            raise ValueError("scenarios missing")
        pairs.append((scenarios[position], record))
    return pairs


_FIELDS = {"number": int, "hung": bool, "got": list, "ending": str, "exception": (dict, type(None)),
           "in_consumer": list, "late": list, "most_held": list, "most_held_asking": list,
           "left_running": int, "others_left": int, "ended_after": (float, int, type(None)),
           "loaders": int,
           "stage": list}


def _typed(record: Any) -> None:
    if type(record) is not dict:
        raise TypeError("a scenario's record is not a dict")
    for name, kind in _FIELDS.items():
        if not isinstance(record[name], kind):
            raise TypeError(f"{name} is a {type(record[name]).__name__}")
    for name in ("got", "in_consumer", "late"):
        if not all(type(v) is int for v in record[name]):
            raise TypeError(f"{name} holds something other than integers")
    stage = record["stage"]
    if len(stage) != 2 or type(stage[0]) is not str or type(stage[1]) is not int:
        raise TypeError("stage is not a place and an item")
    for name in ("most_held", "most_held_asking"):
        if len(record[name]) != 2 or not all(type(v) is int for v in record[name]):
            raise TypeError(f"{name} is not two integers")
    if record["exception"] is not None:
        exception = record["exception"]
        if not (isinstance(exception.get("where"), str) and isinstance(exception.get("type"), str)
                and type(exception.get("original")) is bool
                and type(exception.get("source_type")) is bool):
            raise TypeError("exception is not the probe's")


def _named(type_name: str) -> str:
    """An exception class's name as the message shows it: the name when Python or the probe
    defines it, else "an exception of your own class" (a name the kernel chose is never shown)."""
    import builtins

    known = getattr(builtins, type_name, None)
    if type_name in ERRORS or type_name == "ReferenceUnavailable" or (
            isinstance(known, type) and issubclass(known, BaseException)):
        return type_name
    return "an exception of your own class"


def _blocked(scenario: Scenario, record: dict, seed: int) -> str:
    if not record["hung"]:
        return ""
    stage, k = record["stage"]
    where = STAGES.get(stage, "somewhere").format(k=k)
    return (f"it had not finished after {HANG_SECONDS:g} s: the consumer was still {where}, "
            f"after {len(record['got'])} item(s)")


def _raised(scenario: Scenario, record: dict, seed: int) -> str:
    exception = record["exception"]
    if exception is None:
        return ""
    where = exception["where"]
    if where == "next" and scenario.fails_at is not None:
        return ""   # judged by the exception's own promises
    name = _named(exception["type"])
    if name == "ReferenceUnavailable":
        return ("your Prefetcher called tinyprof's own, which this test switches off: write "
                "your own class")
    place = {"init": "when it was made", "next": f"in __next__ (item {len(record['got'])})",
             "close": "in close()"}.get(where, "")
    return f"your Prefetcher raised {name} {place}, where the source raised nothing"


def _wrong_items(scenario: Scenario, record: dict, seed: int) -> str:
    got = record["got"]
    want = first_values(scenario.depth, seed, scenario.number, scenario.received)
    for k, value in enumerate(got):
        if k >= len(want):
            return (f"the consumer got {len(got)} items; the source had only {len(want)} "
                    "before its end")
        if value != want[k]:
            return (f"item {k} was {value}, the source's item {k} is {want[k]} (every item, "
                    "once, in order)")
    short = len(got) < len(want)
    if record["ending"] == "end" and short and scenario.fails_at is None:
        return (f"the iteration ended after {len(got)} item(s); the source gave "
                f"{len(want)}")
    if record["ending"] == "more":
        return "the iteration did not end with the source: more items came after its end"
    if record["ending"] == "end" and short:
        return (f"the iteration ended after {len(got)} item(s), before the {len(want)} the "
                f"source gave before it raised")
    return ""


def _in_consumer(scenario: Scenario, record: dict, seed: int) -> str:
    if not record["in_consumer"]:
        return ""
    k = record["in_consumer"][0]
    return f"item {k} was pulled from the source in the consumer's own thread"


def _not_ahead(scenario: Scenario, record: dict, seed: int) -> str:
    if not record["late"]:
        return ""
    k = record["late"][0]
    return (f"item {k}'s loading had not begun when the consumer, after holding item {k - 1} "
            "for a while, asked for it")


def _unbounded(scenario: Scenario, record: dict, seed: int) -> str:
    d = scenario.depth
    (held, at), (held_asking, at_asking) = record["most_held"], record["most_held_asking"]
    if held > d + 1:
        return (f"when item {at} was pulled, {held} items had been pulled and not taken by the "
                f"consumer, which held its item: at most depth + 1 = {d + 1}")
    if held_asking > d + 2:
        return (f"when item {at_asking} was pulled, {held_asking} items had been pulled and "
                f"not taken by the consumer, which was asking for one: at most depth + 2 = "
                f"{d + 2}")
    return ""


def _swallowed(scenario: Scenario, record: dict, seed: int) -> str:
    if scenario.fails_at is None or record["ending"] != "end" or \
            len(record["got"]) != scenario.fails_at:
        return ""
    return (f"the consumer got the {scenario.fails_at} item(s) before it, then the end of the "
            f"iteration: no {scenario.error}")


def _early(scenario: Scenario, record: dict, seed: int) -> str:
    exception = record["exception"]
    if scenario.fails_at is None or exception is None or exception["where"] != "next" or \
            not exception["source_type"] or len(record["got"]) >= scenario.fails_at:
        return ""
    return (f"the consumer got {scenario.error} after {len(record['got'])} of the "
            f"{scenario.fails_at} item(s) before it")


def _replaced(scenario: Scenario, record: dict, seed: int) -> str:
    exception = record["exception"]
    if scenario.fails_at is None or exception is None or exception["where"] != "next" or \
            exception["source_type"]:
        return ""
    return (f"the consumer got {_named(exception['type'])} instead of the source's "
            f"{scenario.error}")


def _left_running(scenario: Scenario, record: dict, seed: int) -> str:
    left, others = record["left_running"], record["others_left"]
    if not left and not others:
        return ""
    after = record["ended_after"]
    later = (f"they ended {after * 1e3:.0f} ms later" if isinstance(after, (int, float)) else
             "they went on running")
    which = (f"{left} loader thread(s)" if left else "") + (" and " if left and others else "") \
        + (f"{others} other thread(s) it started" if others else "")
    return f"{which} still running when close() returned ({later})"


_BROKEN: dict[str, Callable[[Scenario, dict, int], str]] = {
    BLOCKED: _blocked, RAISED: _raised, WRONG_ITEMS: _wrong_items, IN_CONSUMER: _in_consumer,
    NOT_AHEAD: _not_ahead, UNBOUNDED: _unbounded, SWALLOWED: _swallowed, EARLY: _early,
    REPLACED: _replaced, LEFT_RUNNING: _left_running}


__all__ = ["BLOCKED", "EARLY", "ERRORS", "ERROR_MODULES", "ERROR_NAMES", "GRACE",
           "HANG_SECONDS", "IN_CONSUMER", "ITEMS", "KEPT", "LEFT_RUNNING", "LONGEST",
           "MALFORMED", "NOT_AHEAD", "PATIENCE", "PROMISES", "RAISED", "REPLACED",
           "REPORT_VERSION", "SHAPES", "SOURCE_NAMES", "SWALLOWED", "UNBOUNDED", "WRONG_ITEMS",
           "PromiseCheck", "Scenario", "check_prefetcher", "drive_prefetcher", "first_values",
           "item_values", "plan"]
