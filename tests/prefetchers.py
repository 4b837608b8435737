"""Prefetchers as students hand them in (chapter 09, §9.5), as the source of the answer cell:
honest alternatives that must keep every point of ``test_Prefetcher``, and cheats written
against the probe's old weaknesses (issue 45: each promise checked once, at item 1, one
exception type at one position, 2 s for threads to end, a probe with public methods) that
must score 0 on it. Each cheat names the promise (``tinyprof.prefetchcheck.PROMISES``) the
grader must find broken.

Used by tests/test_pipecheck.py, in this process and through the grader (the test cell run by
the judge, the class in a sandboxed kernel).
"""

from __future__ import annotations

import json

from chapters import SOLUTIONS


def solution() -> str:
    """The chapter's own Prefetcher: the answer cell of the solutions notebook, as graded."""
    notebook = json.loads((SOLUTIONS / "09_pipeline" / "pipeline.ipynb").read_text("utf-8"))
    for cell in notebook["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == "Prefetcher":
            return "import queue\nimport threading\n\n" + "".join(
                line for line in cell["source"] if "### " not in line)
    raise LookupError("the solutions notebook has no Prefetcher cell")


#: Honest alternatives, each another way a good student writes it.
HONEST = {
    "a queue with a sentinel, drained by close()": '''
import queue
import threading

_END = object()


class _Failed:
    def __init__(self, error):
        self.error = error


class Prefetcher:
    def __init__(self, source, depth=2):
        self._items = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._load, args=(iter(source),), daemon=True)
        self._thread.start()

    def _load(self, source):
        try:
            for item in source:
                if self._stop.is_set():
                    return
                self._items.put(item)
        except Exception as error:
            self._items.put(_Failed(error))
            return
        self._items.put(_END)

    def __iter__(self):
        return self

    def __next__(self):
        if self._stop.is_set():
            raise StopIteration
        item = self._items.get()
        if item is _END:
            self.close()
            raise StopIteration
        if isinstance(item, _Failed):
            self.close()
            raise item.error
        return item

    def close(self):
        self._stop.set()
        while self._thread.is_alive():
            try:                       # make room, so that a loader blocked in put() goes on
                while True:
                    self._items.get_nowait()
            except queue.Empty:
                pass
            self._thread.join(timeout=0.01)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
''',
    "a deque, a Condition and a Semaphore of depth slots": '''
import collections
import threading


class Prefetcher:
    def __init__(self, source, depth=2):
        self._source = iter(source)
        self._ready = collections.deque()
        self._changed = threading.Condition()
        self._slots = threading.Semaphore(depth)
        self._closed = False
        self._finished = False
        self._thread = threading.Thread(target=self._load, daemon=True)
        self._thread.start()

    def _load(self):
        while True:
            while not self._slots.acquire(timeout=0.01):
                if self._closed:
                    return
            if self._closed:
                return
            try:
                entry = ("item", next(self._source))
            except StopIteration:
                entry = ("end", None)
            except Exception as error:
                entry = ("error", error)
            with self._changed:
                self._ready.append(entry)
                self._changed.notify()
            if entry[0] != "item":
                return

    def __iter__(self):
        return self

    def __next__(self):
        if self._finished:
            raise StopIteration
        with self._changed:
            while not self._ready:
                self._changed.wait()
            kind, value = self._ready.popleft()
        if kind == "item":
            self._slots.release()
            return value
        self._finished = True
        self.close()
        if kind == "error":
            raise value
        raise StopIteration

    def close(self):
        self._closed = True
        self._slots.release()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
''',
    "a ThreadPoolExecutor(1) keeping depth futures in flight": '''
import collections
from concurrent.futures import ThreadPoolExecutor


class Prefetcher:
    def __init__(self, source, depth=2):
        self._source = iter(source)
        self._pool = ThreadPoolExecutor(max_workers=1)
        self._ahead = collections.deque(self._pool.submit(self._pull) for _ in range(depth))
        self._finished = False

    def _pull(self):
        try:
            return True, next(self._source)
        except StopIteration:
            return False, None

    def __iter__(self):
        return self

    def __next__(self):
        if self._finished:
            raise StopIteration
        future = self._ahead.popleft()
        try:
            more, item = future.result()
        except BaseException:
            self.close()
            raise
        if not more:
            self.close()
            raise StopIteration
        self._ahead.append(self._pool.submit(self._pull))
        return item

    def close(self):
        self._finished = True
        for future in self._ahead:
            future.cancel()
        self._pool.shutdown(wait=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
''',
    "the original exception object re-raised with its traceback": '''
import sys
import threading


class Prefetcher:
    """A list guarded by a Condition; the loader passes on whatever it raised (any type)."""

    def __init__(self, source, depth=2):
        self._source, self._depth = iter(source), depth
        self._held = []
        self._changed = threading.Condition()
        self._end = None          # ("end",) or ("error", exception)
        self._stopping = False
        self._thread = threading.Thread(target=self._load, daemon=True)
        self._thread.start()

    def _load(self):
        while True:
            with self._changed:
                while len(self._held) >= self._depth and not self._stopping:
                    self._changed.wait(0.05)
                if self._stopping:
                    return
            try:
                item = next(self._source)
            except StopIteration:
                outcome = ("end",)
            except BaseException:
                outcome = ("error", sys.exc_info()[1])
            else:
                with self._changed:
                    self._held.append(item)
                    self._changed.notify_all()
                continue
            with self._changed:
                self._end = outcome
                self._changed.notify_all()
            return

    def __iter__(self):
        return self

    def __next__(self):
        with self._changed:
            while not self._held and self._end is None:
                self._changed.wait()
            if self._held:
                item = self._held.pop(0)
                self._changed.notify_all()
                return item
            outcome = self._end
        if outcome[0] == "error":
            error = outcome[1]
            raise error.with_traceback(error.__traceback__)
        raise StopIteration

    def close(self):
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        self._thread.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
''',
    "a loader thread started at the first next()": '''
import queue
import threading


class Prefetcher:
    def __init__(self, source, depth=2):
        self._source = iter(source)
        self._queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = None

    def _load(self):
        try:
            for item in self._source:
                while not self._stop.is_set():
                    try:
                        self._queue.put(("item", item), timeout=0.01)
                        break
                    except queue.Full:
                        pass
                else:
                    return
            self._queue.put(("end", None))
        except Exception as error:
            self._queue.put(("error", error))

    def __iter__(self):
        return self

    def __next__(self):
        if self._thread is None:
            self._thread = threading.Thread(target=self._load, daemon=True)
            self._thread.start()
        if self._stop.is_set():
            raise StopIteration
        kind, value = self._queue.get()
        if kind == "item":
            return value
        self._stop.set()
        if kind == "error":
            raise value
        raise StopIteration

    def close(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
''',
}

#: The chapter's solution, written as the cheats below start from it (a thread, a bounded
#: queue, the end and the error through it); each cheat changes what its name says.
BASE = '''
import queue
import threading


class Prefetcher:
    def __init__(self, source, depth=2):
        self._source = iter(source)
        self._queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._load, daemon=True)
        self._thread.start()

    def _put(self, item):
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.02)
                return True
            except queue.Full:
                pass
        return False

    def _load(self):
        try:
            for item in self._source:
                if not self._put(("item", item)):
                    return
            self._put(("end", None))
        except Exception as error:
            self._put(("error", error))

    def __iter__(self):
        return self

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

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
'''


def changed(old: str, new: str, base: str = BASE) -> str:
    assert old in base, old
    return base.replace(old, new)


#: Cheats: ``{name: (answer, the promise the grader finds broken)}``; (a)–(e) are issue 45's
#: five that kept 4/4 on the old probe.
CHEATS = {
    # (a) of issue 45: the first items come from a thread, the rest from the consumer's.
    "(a) loads ahead for the first items, then in the consumer's thread": ('''
import queue
import threading


class Prefetcher:
    """Loads the first items ahead (an epoch's slow start), then reads on demand."""

    WARM = 4

    def __init__(self, source, depth=2):
        self._source = iter(source)
        self._queue = queue.Queue(maxsize=depth)
        self._warm = True
        self._thread = threading.Thread(target=self._load, daemon=True)
        self._thread.start()

    def _load(self):
        try:
            for _ in range(self.WARM):
                self._queue.put(("item", next(self._source)))
            self._queue.put(("warm", None))
        except StopIteration:
            self._queue.put(("end", None))
        except Exception as error:
            self._queue.put(("error", error))

    def __iter__(self):
        return self

    def __next__(self):
        if self._warm:
            kind, value = self._queue.get()
            if kind == "item":
                return value
            self._warm = False
            if kind != "warm":
                self._source = iter(())
                raise StopIteration if kind == "end" else value
        return next(self._source)

    def close(self):
        while self._thread.is_alive():
            try:
                self._queue.get_nowait()
            except queue.Empty:
                pass
            self._thread.join(timeout=0.01)
''', "loaded in the consumer's thread"),
    # (b): maxsize lifted once the first items went through.
    "(b) bounded only at the start": (changed(
        '''            for item in self._source:
                if not self._put(("item", item)):''',
        '''            for count, item in enumerate(self._source):
                if count == 2 * self._queue.maxsize + 4:
                    self._queue.maxsize = 0        # warmed up: no more waiting for room
                if not self._put(("item", item)):'''), "held more than depth + 1"),
    # (c): the loader notices the flag within its put's 20 ms and ends by itself.
    "(c) close() returns at once, the loader dies later": (changed(
        '''        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()''',
        '''        self._stop.set()                           # the loader sees it within 20 ms'''),
        "loader left running"),
    # (d): the errors a data loader expects are passed on; anything else ends the epoch.
    "(d) passes on only ValueError": (changed(
        '''        except Exception as error:
            self._put(("error", error))''',
        '''        except Exception as error:
            self._put(("error", error) if isinstance(error, ValueError) else ("end", None))'''),
        "exception swallowed"),
    # (e): no thread; each __next__ reads the following item before it returns (ahead in
    # time, as the old probe saw it).
    "(e) no thread, reads one item ahead in __next__": ('''
class Prefetcher:
    def __init__(self, source, depth=2):
        self._source = iter(source)
        self._next = self._read()

    def _read(self):
        try:
            return ("item", next(self._source))
        except StopIteration:
            return ("end", None)
        except Exception as error:
            return ("error", error)

    def __iter__(self):
        return self

    def __next__(self):
        kind, value = self._next
        if kind != "item":
            raise StopIteration if kind == "end" else value
        self._next = self._read()          # the next item is loading "ahead" of the consumer
        return value

    def close(self):
        pass
''', "loaded in the consumer's thread"),
    "(f) a loader thread that loads each item when asked": ('''
import queue
import threading


class Prefetcher:
    def __init__(self, source, depth=2):
        self._source = iter(source)
        self._asked, self._answers = queue.Queue(), queue.Queue()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        self._asked.put(True)              # items 0 and 1 at once: the start looks ahead
        self._asked.put(True)
        self._count = 0

    def _serve(self):
        while self._asked.get():
            try:
                self._answers.put(("item", next(self._source)))
            except StopIteration:
                self._answers.put(("end", None))
                return
            except Exception as error:
                self._answers.put(("error", error))
                return

    def __iter__(self):
        return self

    def __next__(self):
        self._count += 1
        if self._count > 2:
            self._asked.put(True)          # then one item per request
        kind, value = self._answers.get()
        if kind == "item":
            return value
        if kind == "error":
            raise value
        raise StopIteration

    def close(self):
        self._asked.put(False)
        self._thread.join()
''', "loaded only when asked"),
    "(g) the loader's exception raised before the items queued ahead of it": (changed(
        '''        except Exception as error:
            self._put(("error", error))''',
        '''        except Exception as error:
            self._error = error                # raised at the consumer's next call
            self._put(("end", None))''').replace(
        '''        if self._stop.is_set():
            raise StopIteration
        kind''', '''        if getattr(self, "_error", None) is not None:
            error, self._error = self._error, None
            raise error
        if self._stop.is_set():
            raise StopIteration
        kind'''), "exception before the items ahead of it"),
    "(h) the loader's exception wrapped in a RuntimeError": (changed(
        '''        if kind == "error":
            raise value''',
        '''        if kind == "error":
            raise RuntimeError(f"the loader failed: {value!r}") from value'''),
        "another exception"),
    "(i) close() gives up on a loader inside a slow pull": (changed(
        '''            self._thread.join()''',
        '''            self._thread.join(timeout=0.01)  # never hang the training loop'''),
        "loader left running"),
    "(j) pairs of items in a queue of depth // 2 pairs": ('''
import queue
import threading


class Prefetcher:
    """Reads items two at a time, as batched reads do."""

    def __init__(self, source, depth=2):
        self._source = iter(source)
        self._queue = queue.Queue(maxsize=max(1, depth // 2))
        self._stop = threading.Event()
        self._ready = []
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
        pair = []
        try:
            for item in self._source:
                pair.append(("item", item))
                if len(pair) == 2:
                    if not self._put(pair):
                        return
                    pair = []
            self._put(pair + [("end", None)])
        except Exception as error:
            self._put(pair + [("error", error)])

    def __iter__(self):
        return self

    def __next__(self):
        if not self._ready:
            if self._stop.is_set():
                raise StopIteration
            self._ready = self._queue.get()
        kind, value = self._ready.pop(0)
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
''', "held more than depth + 1"),
    "(k) a source that fails before its first item counts as empty": (changed(
        '''            for item in self._source:
                if not self._put(("item", item)):
                    return
            self._put(("end", None))
        except Exception as error:
            self._put(("error", error))''',
        '''            loaded = 0
            for item in self._source:
                loaded += 1
                if not self._put(("item", item)):
                    return
            self._put(("end", None))
        except Exception as error:                 # a source that cannot start is empty
            self._put(("error", error) if loaded else ("end", None))'''),
        "exception swallowed"),
    "(l) the loader hidden from threading.enumerate, close() returns at once": (changed(
        '''    def _load(self):
        try:''',
        '''    def _load(self):
        me = threading._active.pop(threading.get_ident())   # out of enumerate() while it runs
        try:
            self._load_hidden()
        finally:
            threading._active[threading.get_ident()] = me

    def _load_hidden(self):
        try:''').replace(
        '''        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()''',
        '''        self._stop.set()'''), "loader left running"),
    "(m) a loader thread named like the probe's, never stopped": (changed(
        '''        self._thread = threading.Thread(target=self._load, daemon=True)''',
        '''        self._thread = threading.Thread(target=self._load, name="probe loader",
                                        daemon=True)''').replace(
        '''        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()''',
        '''        pass                             # a daemon: it ends with the kernel'''),
        "loader left running"),
    "(n) a monitor thread that outlives close()": (changed(
        '''        self._thread.start()
''',
        '''        self._thread.start()
        threading.Thread(target=self._monitor, daemon=True).start()

    def _monitor(self):                            # the queue's fill, for a progress bar
        while True:
            self.fill = self._queue.qsize()
            threading.Event().wait(0.05)
'''), "loader left running"),
    "(o) a queue of depth + 1, one more for safety": (changed(
        "queue.Queue(maxsize=depth)", "queue.Queue(maxsize=depth + 1)"),
        "held more than depth + 1"),
}

#: Cheats that keep every promise at the visible test's depth (2) and break one at a depth the
#: hidden test draws (1, and 3 or 4): ``{name: (answer, promise, a depth where it breaks)}``.
HIDDEN_ONLY = {
    "(p) a queue of 2 whatever the depth": (changed(
        "queue.Queue(maxsize=depth)", "queue.Queue(maxsize=2)"), "held more than depth + 1", 1),
}
