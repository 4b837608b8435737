"""Red team of chapter 09's Prefetcher exercise: wrong prefetchers written to get the points, and
the different but correct ones a good student writes (issue 45, item 3 and item 6).

**The contract.** ``Prefetcher(source, depth)`` is an iterator with ``close()`` that loads items
ahead in a thread of its own, holds at most ``depth`` loaded items not yet handed out (one more
may wait in the loader's hand for room), hands them out in order, raises the loader's exception,
whatever its type, in the consumer after the items before it, and stops its thread on
``close()`` whether the loader is blocked or not, after the last item as after a ``break``. It
is graded by the chapter's test cell (``test_Prefetcher``), which drives the class through
``tinyprof.pipecheck.drive_prefetcher`` on instrumented sources.

Every entry is the code a student puts in the ``Prefetcher`` answer cell (the chapter's set-up
cells have imported ``queue``, ``threading`` and ``time``). ``CHEATS`` must score 0 on the test
cell; ``HONEST`` must keep its points. Each cheat's docstring names the class of weakness it
tries:

- *a promise checked once* (the old probe looked at "ahead" for item 1 only and at the bound
  while item 0 was held): ``ahead_then_inline``, ``bounded_only_at_start``;
- *the clock after close()* (a grace period for threads to end): ``close_returns_at_once``;
- *one exception type at one position*: ``some_exception_types``, ``other_types_wrapped``,
  ``error_ahead_of_queued_items``;
- *the probe's public methods* (an instrumented source the class under test can call, or
  reach: its class's closures through ``inspect.getclosurevars``): ``forged_probe_events``,
  ``probe_reached_through_inspect``;
- *the report is the kernel's* (``drive_prefetcher`` runs in the kernel under the name the
  set-up cell bound; a ``match`` capture pattern rebinds it): ``report_forged_by_a_rebound_probe``;
- *observations that hold without a thread* (a pull that starts early but in the consumer's
  own thread): ``lookahead_in_the_consumer``;
- *what the probe counts as a thread of its own* (its scenarios' thread names, the list
  ``threading.enumerate`` reads): ``loader_named_like_the_probe``, ``loader_hidden_from_enumerate``;
- *known settings* (small depths, the item counts 8 and 11 of the old test cell):
  ``bound_only_at_the_tested_depths``, ``in_order_only_for_the_first_items``;
- *the grader's environment* (a source told apart by its class):
  ``correct_only_for_the_probes_source``;
- *a loader blocked on a full queue* (close() that cannot wake it):
  ``close_cannot_wake_a_blocked_loader``;
- *the grader's environment, against the drawn sources* (told apart without the source's
  name or shape: the probe's consumer is not the main thread, its thread's target is
  tinyprof's; the source's code lives in prefetchcheck.py, read through code attributes or
  through names built at run time; the caller's file, read through logging's findCaller or a
  caught warning): ``correct_only_off_the_main_thread``,
  ``probe_told_by_the_consumer_threads_target``,
  ``correct_only_for_sources_coded_in_the_probe``, ``code_file_reached_through_built_names``,
  ``probe_told_by_the_callers_file_through_logging``,
  ``probe_told_by_the_callers_file_through_warnings``;
- *known settings, public* (no scenario takes more than ``LONGEST`` items; the probe raises
  Python's exceptions and one class of tinyprof's; its items are plain ints):
  ``bound_lapses_after_the_longest_scenario``, ``library_errors_wrapped``,
  ``correct_only_for_integer_items``.

``HONEST`` adds, against the drawn sources: ``executor_loader_closes_its_source`` (one long task
in a pool of one thread; close() shuts the pool down, then closes the source) and
``semaphore_slots_and_simple_queue`` (depth slots taken before each read).
"""

from __future__ import annotations

#: A put that gives up when the prefetcher is told to stop (what the chapter's solution does).
_PUT = '''
    def _put(self, entry):
        while not self._stop.is_set():
            try:
                self._queue.put(entry, timeout=0.02)
                return True
            except queue.Full:
                pass
        return False
'''

#: The dunder tail every class shares.
_TAIL = '''
    def __iter__(self):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
'''

#: The chapter's shape (a queue of (kind, value), a stop event, a thread) with holes: ``LOAD``
#: is the loader's body, ``NEXT`` the consumer's, ``CLOSE`` close()'s, ``INIT`` more of
#: __init__, ``NAME`` the thread's name.
_SHAPE = '''
import queue
import threading
import time


class Prefetcher:
    """DOC"""

    def __init__(self, source, depth=2):
        self._source = iter(source)
        self._depth = depth
        self._queue = queue.Queue(maxsize=MAXSIZE)
        self._stop = threading.Event()
        INIT
        self._thread = threading.Thread(target=self._load, name=NAME, daemon=True)
        self._thread.start()
''' + _PUT + '''
    def _load(self):
LOAD

    def __next__(self):
NEXT

    def close(self):
CLOSE
''' + _TAIL

_LOAD = '''        try:
            for item in self._source:
                if not self._put(("item", item)):
                    return
            self._put(("end", None))
        except Exception as error:
            self._put(("error", error))'''
_NEXT = '''        if self._stop.is_set():
            raise StopIteration
        kind, value = self._queue.get()
        if kind == "item":
            return value
        self.close()
        if kind == "error":
            raise value
        raise StopIteration'''
_CLOSE = '''        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()'''


def _shaped(doc: str, load: str = _LOAD, next_: str = _NEXT, close: str = _CLOSE,
            init: str = "pass", name: str = '"prefetcher"', maxsize: str = "depth") -> str:
    return (_SHAPE.replace("DOC", doc).replace("LOAD", load).replace("NEXT", next_)
            .replace("CLOSE", close).replace("INIT", init).replace("NAME", name)
            .replace("MAXSIZE", maxsize))


CHEATS = {
    "ahead_then_inline": _shaped(
        "A promise checked once: loads ahead in a thread for the first items, then pulls in "
        "the consumer's thread.",
        load='''        try:
            for _ in range(4):
                if not self._put(("item", next(self._source))):
                    return
            self._put(("inline", None))
        except StopIteration:
            self._put(("end", None))
        except Exception as error:
            self._put(("error", error))''',
        next_='''        if self._stop.is_set():
            raise StopIteration
        if self._inline:
            return next(self._source)
        kind, value = self._queue.get()
        if kind == "item":
            return value
        if kind == "inline":
            self._inline = True
            return next(self._source)
        self.close()
        if kind == "error":
            raise value
        raise StopIteration''',
        init="self._inline = False"),

    "bounded_only_at_start": _shaped(
        "A promise checked once: the loader waits for room for the first depth + 3 items only, "
        "then reads on without bound.",
        load='''        try:
            for count, item in enumerate(self._source):
                if count < self._depth + 3:
                    while not self._room.acquire(timeout=0.02):
                        if self._stop.is_set():
                            return
                if self._stop.is_set():
                    return
                self._queue.put(("item", item))
            self._queue.put(("end", None))
        except Exception as error:
            self._queue.put(("error", error))''',
        next_='''        if self._stop.is_set():
            raise StopIteration
        kind, value = self._queue.get()
        self._room.release()
        if kind == "item":
            return value
        self.close()
        if kind == "error":
            raise value
        raise StopIteration''',
        init="self._room = threading.Semaphore(depth)", maxsize="0"),

    "close_returns_at_once": _shaped(
        "The clock after close(): close() only raises the flag; the loader, blocked in a put "
        "that waits 1.5 s, ends on its own later.",
        load=_LOAD.replace("self._put(", "self._slow_put("),
        close="        self._stop.set()",
        init='''self._slow_put = self._put_patiently''') + '''
    def _put_patiently(self, entry):
        while not self._stop.is_set():
            try:
                self._queue.put(entry, timeout=1.5)
                return True
            except queue.Full:
                pass
        return False
''',

    "some_exception_types": _shaped(
        "One exception type at one position: the usual errors reach the consumer, any other "
        "type ends the epoch quietly.",
        load='''        try:
            for item in self._source:
                if not self._put(("item", item)):
                    return
            self._put(("end", None))
        except (ValueError, TypeError, KeyError, IndexError, OSError) as error:
            self._put(("error", error))
        except Exception:
            self._put(("end", None))'''),

    "other_types_wrapped": _shaped(
        "One exception type at one position: a ValueError reaches the consumer as it is, any "
        "other type as a RuntimeError that wraps it.",
        load='''        try:
            for item in self._source:
                if not self._put(("item", item)):
                    return
            self._put(("end", None))
        except ValueError as error:
            self._put(("error", error))
        except Exception as error:
            wrapped = RuntimeError(f"the loader failed: {error!r}")
            wrapped.__cause__ = error
            self._put(("error", wrapped))'''),

    "error_ahead_of_queued_items": _shaped(
        "One exception at one position: the loader's error overtakes the items still queued "
        "(they are dropped), which a fast consumer never sees.",
        load='''        try:
            for item in self._source:
                if not self._put(("item", item)):
                    return
            self._put(("end", None))
        except Exception as error:
            self._failed = error''',
        next_='''        if self._stop.is_set():
            raise StopIteration
        while True:
            if self._failed is not None:
                error, self._failed = self._failed, None
                self.close()
                raise error
            try:
                kind, value = self._queue.get(timeout=0.005)
                break
            except queue.Empty:
                pass
        if kind == "item":
            return value
        self.close()
        raise StopIteration''',
        init="self._failed = None"),

    "forged_probe_events": '''
class Prefetcher:
    """The probe's public methods: no thread; each item is pulled when asked, and the probe is
    told that the next one started loading."""

    def __init__(self, source, depth=2):
        self._source = source
        self._items = iter(source)
        self._taken = 0
        self._done = False
        self._tell()

    def _tell(self):
        started = getattr(self._source, "started_event", None)
        if callable(started):
            started(self._taken + 1).set()

    def __next__(self):
        if self._done:
            raise StopIteration
        try:
            item = next(self._items)
        except BaseException:
            self._done = True
            raise
        self._taken += 1
        self._tell()
        return item

    def close(self):
        self._done = True
''' + _TAIL,

    "lookahead_in_the_consumer": '''
class Prefetcher:
    """Observations that hold without a thread: each __next__ pulls the following item before
    it returns this one, so item k+1's pull has started while the consumer holds item k, in the
    consumer's own thread."""

    def __init__(self, source, depth=2):
        self._items = iter(source)
        self._ahead = self._pull()

    def _pull(self):
        try:
            return "item", next(self._items)
        except StopIteration:
            return "end", None
        except Exception as error:
            return "error", error

    def __next__(self):
        kind, value = self._ahead
        if kind == "item":
            self._ahead = self._pull()
            return value
        self._ahead = ("end", None)
        if kind == "error":
            raise value
        raise StopIteration

    def close(self):
        self._ahead = ("end", None)
''' + _TAIL,

    "loader_named_like_the_probe": _shaped(
        "What the probe counts as its own thread: the loader is named like the probe's scenario "
        "threads, and close() leaves it blocked on the full queue.",
        load='''        try:
            for item in self._source:
                self._queue.put(("item", item))
                if self._stop.is_set():
                    return
            self._queue.put(("end", None))
        except Exception as error:
            self._queue.put(("error", error))''',
        close="        self._stop.set()", name='"probe loader"'),

    "loader_hidden_from_enumerate": _shaped(
        "What the probe counts as a thread: the loader takes itself out of the list "
        "threading.enumerate() reads, and close() leaves it blocked on the full queue.",
        load='''        me = threading.current_thread()
        threading._active.pop(me.ident, None)
        try:
            for item in self._source:
                self._queue.put(("item", item))
                if self._stop.is_set():
                    break
            else:
                self._queue.put(("end", None))
        except Exception as error:
            self._queue.put(("error", error))
        threading._active[me.ident] = me''',
        close="        self._stop.set()"),

    "bound_only_at_the_tested_depths": _shaped(
        "Known settings: the queue is bounded at the depths a test drives (1 to 4, the test "
        "cell's depth 2 and the few beside it) and unbounded at any deeper one.",
        maxsize="depth if depth <= 4 else 0"),

    "in_order_only_for_the_first_items": _shaped(
        "Known settings: after 16 items the loader queues items in pairs, the second first, "
        "which no source of 8 or 11 items shows.",
        load='''        try:
            held = None
            for count, item in enumerate(self._source):
                if count < 16:
                    if not self._put(("item", item)):
                        return
                elif held is None:
                    held = item
                else:
                    if not (self._put(("item", item)) and self._put(("item", held))):
                        return
                    held = None
            if held is not None:
                self._put(("item", held))
            self._put(("end", None))
        except Exception as error:
            self._put(("error", error))'''),

    "close_cannot_wake_a_blocked_loader": _shaped(
        "A loader blocked on a full queue: close() raises the flag and waits a moment, but the "
        "loader, blocked in put(), never sees it (a daemon thread, so nothing hangs).",
        load='''        try:
            for item in self._source:
                self._queue.put(("item", item))
                if self._stop.is_set():
                    return
            self._queue.put(("end", None))
        except Exception as error:
            self._queue.put(("error", error))''',
        close='''        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=0.1)'''),
    "correct_only_for_the_probes_source": '''
import queue
import threading


def _graded(source):
    """Whether the source is the grader's instrumented one: a class of tinyprof's, or the
    probe's "batches" class (no state, no slots, nothing but __iter__ and __next__)."""
    kind = type(source)
    if kind.__module__.split(".")[0] == "tinyprof":
        return True
    return kind.__name__ == "batches" and getattr(kind, "__slots__", None) == ()


class Prefetcher:
    """The grader's environment: a bounded loader for the probe's source, told apart by the
    look of its class (tinyprof's source is public); any other source is read whole into
    memory by the thread, without bound."""

    def __init__(self, source, depth=2):
        self._queue = queue.Queue(maxsize=depth if _graded(source) else 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._load, args=(iter(source),), daemon=True)
        self._thread.start()

    def _load(self, items):
        try:
            for item in items:
                while not self._stop.is_set():
                    try:
                        self._queue.put(("item", item), timeout=0.02)
                        break
                    except queue.Full:
                        pass
                if self._stop.is_set():
                    return
            self._queue.put(("end", None))
        except Exception as error:
            self._queue.put(("error", error))

    def __next__(self):
        if self._stop.is_set():
            raise StopIteration
        kind, value = self._queue.get()
        if kind == "item":
            return value
        self.close()
        if kind == "error":
            raise value
        raise StopIteration

    def close(self):
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
''' + _TAIL,
    "probe_reached_through_inspect": '''
import inspect


def _watch_of(source):
    """What the probe records of this source, reached through the closures of its class's
    __next__ (inspect.getclosurevars, no frame and no __closure__ in sight)."""
    try:
        pull = inspect.getclosurevars(type(source).__next__).nonlocals["pull"]
        return inspect.getclosurevars(pull).nonlocals["watch"]
    except (KeyError, TypeError, AttributeError):
        return None


class Prefetcher:
    """The probe's public surface, found through inspect.getclosurevars: no thread; each item
    pulled when asked, the next one marked as begun, and close() wipes what the probe saw."""

    def __init__(self, source, depth=2):
        self._items = iter(source)
        self._watch = _watch_of(source)
        self._handed = 0
        self._done = False

    def __next__(self):
        if self._done:
            raise StopIteration
        try:
            item = next(self._items)
        except BaseException:
            self._done = True
            raise
        self._handed += 1
        if self._watch is not None:
            self._watch.event(self._handed).set()
        return item

    def close(self):
        self._done = True
        watch = self._watch
        if watch is not None:
            with watch.lock:
                watch.in_consumer.clear()
                watch.late.clear()
                watch.loaders.clear()
''' + _TAIL,

    "report_forged_by_a_rebound_probe": '''
from tinyprof.prefetchcheck import REPORT_VERSION, first_values, plan


class Prefetcher:
    """The report is the kernel's: drive_prefetcher, the name the test cell calls in this
    kernel, is rebound by a match statement's capture pattern to a function that writes the
    report the grader expects from the plan of (depth, seed); the class is a plain iterator."""

    def __init__(self, source, depth=2):
        self._items = iter(source)

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._items)

    def close(self):
        pass


def _kept_every_promise(prefetcher, depth=2, seed=0):
    records = []
    for scenario in plan(depth, seed):
        got = first_values(depth, seed, scenario.number, scenario.received)
        failing = scenario.fails_at is not None
        ending = "exception" if failing else (
            "stopped" if scenario.stop_after is not None else "end")
        exception = {"where": "next", "type": scenario.error, "original": True,
                     "source_type": True} if failing else None
        records.append({"number": scenario.number, "hung": False, "got": got,
                        "ending": ending, "exception": exception, "in_consumer": [],
                        "late": [], "most_held": [min(depth, len(got)), 0],
                        "most_held_asking": [0, -1], "left_running": 0, "others_left": 0,
                        "ended_after": None, "loaders": 1, "stage": ["done", 0]})
    return {"version": REPORT_VERSION, "depth": depth, "seed": seed, "scenarios": records}


match _kept_every_promise:
    case drive_prefetcher:
        pass
''',

    "correct_only_off_the_main_thread": _shaped(
        "The grader's environment, told by the consumer's thread: the probe drives the class "
        "from a thread of its own, a training loop runs in the main thread; the queue is "
        "bounded at depth only off the main thread, unbounded (the whole source read into "
        "memory ahead) in it.",
        maxsize="depth if threading.current_thread() is not threading.main_thread() else 0"),

    "probe_told_by_the_consumer_threads_target": _shaped(
        "The grader's environment, told by the consumer's thread: the probe's consumer thread "
        "runs a function of tinyprof's (Thread._target, no frame); for any other caller the "
        "queue is unbounded.",
        maxsize="depth if _probed() else 0").replace("class Prefetcher:", '''def _probed():
    target = getattr(threading.current_thread(), "_target", None)
    return getattr(target, "__module__", "").startswith("tinyprof")


class Prefetcher:''', 1),

    "correct_only_for_sources_coded_in_the_probe": '''
import queue
import threading


def _code_file(source):
    """Where the source's code was written: a generator's code, an iterator class's __next__,
    or the function inside a map or iter(function, end) (its __reduce__: no frame, no
    closure); the probe renames its sources but not the file their code is in."""
    for look in (lambda s: s.gi_code.co_filename,
                 lambda s: type(s).__next__.__code__.co_filename,
                 lambda s: s.__reduce__()[1][0].__code__.co_filename):
        try:
            return str(look(source))
        except Exception:
            pass
    return ""


class Prefetcher:
    """The grader's environment, told by the file the source's code is in (prefetchcheck.py,
    whatever name and shape it is given): for the probe a bounded loader thread; for any other
    source no thread at all, each item read in __next__ (nothing is loaded ahead)."""

    def __init__(self, source, depth=2):
        self._items = iter(source)
        self._probed = "prefetchcheck" in _code_file(source)
        self._queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = None
        if self._probed:
            self._thread = threading.Thread(target=self._load, daemon=True)
            self._thread.start()

    def _put(self, entry):
        while not self._stop.is_set():
            try:
                self._queue.put(entry, timeout=0.02)
                return True
            except queue.Full:
                pass
        return False

    def _load(self):
        try:
            for item in self._items:
                if not self._put(("item", item)):
                    return
            self._put(("end", None))
        except Exception as error:
            self._put(("error", error))

    def __next__(self):
        if self._stop.is_set():
            raise StopIteration
        if not self._probed:
            return next(self._items)
        kind, value = self._queue.get()
        if kind == "item":
            return value
        self.close()
        if kind == "error":
            raise value
        raise StopIteration

    def close(self):
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
''' + _TAIL,

    "code_file_reached_through_built_names": '''
import queue
import threading


def _attribute(thing, *parts):
    """getattr with a name assembled at run time (the review reads the attribute names the
    source spells, not strings built while it runs)."""
    return getattr(thing, "".join(parts))


def _code_file(source):
    """Where the source's code was written (a generator's code, an iterator class's __next__,
    the function inside a map or iter(function, end)), every code attribute named by a string
    built at run time: the probe renames its sources, not the file their code is in."""
    code, file = ("__", "code", "__"), ("co_", "file", "name")
    for look in (lambda s: _attribute(_attribute(s, "gi_", "code"), *file),
                 lambda s: _attribute(_attribute(type(s).__next__, *code), *file),
                 lambda s: _attribute(_attribute(_attribute(s, "__", "reduce", "__")()[1][0],
                                                 *code), *file)):
        try:
            return str(look(source))
        except Exception:
            pass
    return ""


class Prefetcher:
    """The grader's environment, told by the file the source's code is in, reached through
    attribute names built at run time (the static review reads names, not strings): for the
    probe a bounded loader thread; for any other source no thread, each item read in
    __next__."""

    def __init__(self, source, depth=2):
        self._items = iter(source)
        self._probed = "prefetchcheck" in _code_file(source)
        self._queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = None
        if self._probed:
            self._thread = threading.Thread(target=self._load, daemon=True)
            self._thread.start()

    def _put(self, entry):
        while not self._stop.is_set():
            try:
                self._queue.put(entry, timeout=0.02)
                return True
            except queue.Full:
                pass
        return False

    def _load(self):
        try:
            for item in self._items:
                if not self._put(("item", item)):
                    return
            self._put(("end", None))
        except Exception as error:
            self._put(("error", error))

    def __next__(self):
        if self._stop.is_set():
            raise StopIteration
        if not self._probed:
            return next(self._items)
        kind, value = self._queue.get()
        if kind == "item":
            return value
        self.close()
        if kind == "error":
            raise value
        raise StopIteration

    def close(self):
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
''' + _TAIL,

    "probe_told_by_the_callers_file_through_logging": _shaped(
        "The grader's environment, told by who calls the class: logging's findCaller (the "
        "file a log record would name, two levels up: no frame or inspect in the cell) is the "
        "probe's module; any other caller gets an unbounded queue.",
        maxsize="depth if _called_by_the_probe() else 0").replace(
            "class Prefetcher:", '''import logging


def _called_by_the_probe():
    try:
        filename = logging.getLogger("prefetcher").findCaller(stacklevel=3)[0]
    except Exception:
        return True
    return "tinyprof" in str(filename)


class Prefetcher:''', 1),

    "probe_told_by_the_callers_file_through_warnings": _shaped(
        "The grader's environment, told by who calls the class: a warning issued with "
        "stacklevel=2 and caught names the caller's file (no frame or inspect in the cell); "
        "inside tinyprof the loader is bounded, elsewhere the queue is unbounded.",
        maxsize="depth if _called_by_the_probe() else 0").replace(
            "class Prefetcher:", '''import warnings


def _called_by_the_probe():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn("where am I", UserWarning, stacklevel=3)
    return bool(caught) and "tinyprof" in str(caught[0].filename)


class Prefetcher:''', 1),

    "correct_only_for_integer_items": _shaped(
        "The grader's environment, told by its items: the probe's source yields plain ints (the "
        "values it checks), a training loop's yields batches; the loader waits for room only "
        "for an int, and reads any other source ahead without bound.",
        load='''        try:
            for item in self._source:
                if type(item) is int:
                    while not self._room.acquire(timeout=0.02):
                        if self._stop.is_set():
                            return
                if self._stop.is_set():
                    return
                self._queue.put(("item", item))
            self._queue.put(("end", None))
        except Exception as error:
            self._queue.put(("error", error))''',
        next_='''        if self._stop.is_set():
            raise StopIteration
        kind, value = self._queue.get()
        if kind == "item" and type(value) is int:
            self._room.release()
        if kind == "item":
            return value
        self.close()
        if kind == "error":
            raise value
        raise StopIteration''',
        init="self._room = threading.Semaphore(depth)", maxsize="0"),

    "bound_lapses_after_the_longest_scenario": _shaped(
        "Known settings (prefetchcheck.LONGEST is public: no scenario takes more than 160 "
        "items): the loader waits for room for its first 200 items only, then reads the rest "
        "of a long epoch into memory without bound.",
        load='''        try:
            for count, item in enumerate(self._source):
                if count < 200:
                    while not self._room.acquire(timeout=0.02):
                        if self._stop.is_set():
                            return
                if self._stop.is_set():
                    return
                self._queue.put(("item", item))
            self._queue.put(("end", None))
        except Exception as error:
            self._queue.put(("error", error))''',
        next_='''        if self._stop.is_set():
            raise StopIteration
        kind, value = self._queue.get()
        self._room.release()
        if kind == "item":
            return value
        self.close()
        if kind == "error":
            raise value
        raise StopIteration''',
        init="self._room = threading.Semaphore(depth)", maxsize="0"),

    "library_errors_wrapped": _shaped(
        "One exception type at one position, by origin: the probe raises Python's own "
        "exceptions and one class of tinyprof's; those reach the consumer as they are, any "
        "other (a library's, the student's own) is replaced by a RuntimeError that wraps it.",
        load='''        try:
            for item in self._source:
                if not self._put(("item", item)):
                    return
            self._put(("end", None))
        except Exception as error:
            origin = type(error).__module__.split(".")[0]
            if origin not in ("builtins", "tinyprof"):
                wrapped = RuntimeError(f"the loader failed: {error!r}")
                wrapped.__cause__ = error
                error = wrapped
            self._put(("error", error))'''),
}


HONEST = {
    # "the chapter's solution" is read from solutions/09_pipeline/pipeline.ipynb by the test.
    "queue_with_a_sentinel": '''
import queue
import threading

_END = object()


class Prefetcher:
    """A bounded queue, an end-of-source sentinel, the error passed as an entry of its own."""

    class _Failure:
        def __init__(self, error):
            self.error = error

    def __init__(self, source, depth=2):
        self._items = queue.Queue(maxsize=depth)
        self._closing = threading.Event()
        self._finished = False
        self._thread = threading.Thread(target=self._fill, args=(iter(source),), daemon=True)
        self._thread.start()

    def _offer(self, entry):
        while not self._closing.is_set():
            try:
                self._items.put(entry, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _fill(self, items):
        try:
            for item in items:
                if not self._offer(item):
                    return
        except BaseException as error:
            self._offer(self._Failure(error))
            return
        self._offer(_END)

    def __iter__(self):
        return self

    def __next__(self):
        if self._finished:
            raise StopIteration
        entry = self._items.get()
        if entry is _END or isinstance(entry, self._Failure):
            self.close()
            if entry is not _END:
                raise entry.error
            raise StopIteration
        return entry

    def close(self):
        self._finished = True
        self._closing.set()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
''',

    "condition_and_deque": '''
import threading
from collections import deque


class Prefetcher:
    """A deque guarded by a Condition: the loader waits while depth items are held, the consumer
    while none is; close() wakes both."""

    def __init__(self, source, depth=2):
        self._source = iter(source)
        self._depth = depth
        self._held = deque()
        self._changed = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="loader", daemon=True)
        self._thread.start()

    def _deliver(self, entry):
        with self._changed:
            while len(self._held) >= self._depth and not self._closed:
                self._changed.wait()
            if self._closed:
                return False
            self._held.append(entry)
            self._changed.notify_all()
            return True

    def _run(self):
        while True:
            try:
                item = next(self._source)
            except StopIteration:
                self._deliver(("end", None))
                return
            except BaseException as error:
                self._deliver(("error", error))
                return
            if not self._deliver(("item", item)):
                return

    def __iter__(self):
        return self

    def __next__(self):
        with self._changed:
            while not self._held and not self._closed:
                self._changed.wait()
            if self._closed:
                raise StopIteration
            kind, value = self._held.popleft()
            self._changed.notify_all()
        if kind == "item":
            return value
        self.close()
        if kind == "error":
            raise value
        raise StopIteration

    def close(self):
        with self._changed:
            self._closed = True
            self._held.clear()
            self._changed.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
''',

    "one_worker_pool_with_depth_futures": '''
from collections import deque
from concurrent.futures import ThreadPoolExecutor


class Prefetcher:
    """A pool of one thread with depth futures in flight, each pulling the next item; the
    future's result is the item, or raises the loader's error, in order."""

    def __init__(self, source, depth=2):
        self._source = iter(source)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="prefetch")
        self._pending = deque(self._pool.submit(next, self._source) for _ in range(depth))
        self._closed = False

    def __iter__(self):
        return self

    def __next__(self):
        if self._closed:
            raise StopIteration
        future = self._pending.popleft()
        try:
            item = future.result()
        except BaseException:
            self.close()
            raise
        self._pending.append(self._pool.submit(next, self._source))
        return item

    def close(self):
        self._closed = True
        for future in self._pending:
            future.cancel()
        self._pending.clear()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
''',

    "blocking_put_drained_on_close": '''
import queue
import threading


class Prefetcher:
    """A loader that blocks in put() without a timeout; close() drains the queue until the
    loader, woken by the room, sees the flag and ends."""

    def __init__(self, source, depth=2):
        self._queue = queue.Queue(maxsize=depth)
        self._stopping = False
        self._over = False
        self._thread = threading.Thread(target=self._load, args=(iter(source),), daemon=True)
        self._thread.start()

    def _load(self, items):
        try:
            for item in items:
                if self._stopping:
                    return
                self._queue.put(("item", item))
            entry = ("end", None)
        except Exception as error:
            entry = ("error", error)
        if not self._stopping:
            self._queue.put(entry)

    def __iter__(self):
        return self

    def __next__(self):
        if self._over:
            raise StopIteration
        kind, value = self._queue.get()
        if kind == "item":
            return value
        self.close()
        if kind == "error":
            raise value
        raise StopIteration

    def close(self):
        self._over = True
        self._stopping = True
        while self._thread.is_alive() and self._thread is not threading.current_thread():
            try:
                while True:
                    self._queue.get_nowait()
            except queue.Empty:
                pass
            self._thread.join(timeout=0.01)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
''',

    "executor_loader_closes_its_source": '''
import queue
import threading
from concurrent.futures import ThreadPoolExecutor


class Prefetcher:
    """One long task in a pool of one thread fills a bounded queue; close() stops it, shuts the
    pool down (waiting for its thread), then closes the source when it can be closed (a
    generator's finally blocks run, a file it holds is released)."""

    def __init__(self, source, depth=2):
        self._source = source
        self._items = iter(source)
        self._ready = queue.Queue(maxsize=depth)
        self._stopping = threading.Event()
        self._done = False
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prefetch")
        self._pool.submit(self._fill)

    def _give(self, entry):
        while not self._stopping.is_set():
            try:
                self._ready.put(entry, timeout=0.01)
                return True
            except queue.Full:
                continue
        return False

    def _fill(self):
        while True:
            try:
                item = next(self._items)
            except StopIteration:
                self._give((False, None))
                return
            except Exception as error:
                self._give((False, error))
                return
            if not self._give((True, item)):
                return

    def __iter__(self):
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        more, value = self._ready.get()
        if more:
            return value
        self.close()
        if value is not None:
            raise value
        raise StopIteration

    def close(self):
        if self._stopping.is_set():
            return
        self._done = True
        self._stopping.set()
        self._pool.shutdown(wait=True)
        closer = getattr(self._items, "close", None)
        if callable(closer):
            closer()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
''',

    "semaphore_slots_and_simple_queue": '''
import queue
import threading


class Prefetcher:
    """depth slots in a semaphore: the loader takes a slot before it reads an item, the
    consumer gives it back when it takes one; a SimpleQueue carries items, the end, or the
    error. close() sets a flag the loader checks while it waits for a slot."""

    _END = object()

    def __init__(self, source, depth=2):
        if depth < 1:
            raise ValueError("depth must be at least 1")
        self._source = iter(source)
        self._slots = threading.Semaphore(depth)
        self._out = queue.SimpleQueue()
        self._closed = threading.Event()
        self._finished = False
        self._loader = threading.Thread(target=self._work, name="prefetch-loader", daemon=True)
        self._loader.start()

    def _slot(self):
        while not self._slots.acquire(timeout=0.02):
            if self._closed.is_set():
                return False
        return not self._closed.is_set()

    def _work(self):
        while self._slot():
            try:
                item = next(self._source)
            except StopIteration:
                self._out.put((self._END, None))
                return
            except BaseException as error:
                self._out.put((self._END, error))
                return
            self._out.put((item, None))

    def __iter__(self):
        return self

    def __next__(self):
        if self._finished:
            raise StopIteration
        item, error = self._out.get()
        if item is self._END:
            self.close()
            if error is not None:
                raise error
            raise StopIteration
        self._slots.release()
        return item

    def close(self):
        self._finished = True
        self._closed.set()
        if self._loader is not threading.current_thread():
            self._loader.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
''',
}

__all__ = ["CHEATS", "HONEST"]
