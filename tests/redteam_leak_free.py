"""Red team of chapter 10's leak check: answers to ``train_fixed`` that beat it, and honest ones.

**The contract.** Chapter 10's last exercise asks for ``train_fixed(steps, seed)``: the chapter's
leaky loop with its four leaks fixed. ``tinyprof.memcheck.expect_leak_free(train_fixed, steps)``
holds it to two promises: the loop returns the clean loop's losses
(``tinyprof.leaks.train``'s) at every step, and it keeps nothing from step to step. Under the
grader (autograder/run/memory_check.py) the loop runs in the student's kernel while the grader
reads the kernel's control-group memory itself (all its processes, the files of its tmpfs
folders), during the run and after it returns, at step counts the student cannot know, with a
tolerance of about 1 kB a step. A bounded cache (the memo of 16 batches) is a plateau, not a
leak.

Every cheat below returns the right losses at every step and keeps, from step to step, what the
leaky loop keeps (a step's reconstruction, 200 kB, or a part of it), hidden from one input of the
verdict. The honest answers keep only what the exercise allows. Each code is one answer cell, run
after the chapter's set-up cells (``setup``, ``normalised``, ``sgd_step``, ``BATCHES``, ``np``,
``gc``, ``os`` are there). The classes, after /work/shared/REDTEAM.md's seven ways to look:

- **Scope** (memory the grader does not count, or that pays for the leak): every step kept in
  the buffers of TCP connections over the sandbox's loopback, or in the receive queues of
  netlink sockets, which need no network (socket memory, which cgroup v1's memory controller
  does not charge: the sandbox refuses netlink's user protocol, launcher.py, and has the
  group count TCP, resources.py), or, unread, in Unix socket pairs and in pipes (allowed, and
  charged to the kernel's group); growth paid for by truncating a pre-touched file of /tmp,
  and a history written into a pre-touched file mapped shared (``np.memmap``), sized to the
  steps (a fork of the kernel shares a file's pages instead of copying them); memory from the
  C allocator (``malloc`` through ctypes: no Python object, no tracemalloc); a history
  preallocated with ``np.zeros`` whose pages are touched only as it fills.
- **The clock** (growth moved where the reads do not look): a thread that replays the run two
  minutes after the call has returned and keeps every step then, pausing while a call runs
  (shorter delays land by chance in a measured run: the replay of the test's direct 20-step
  call, made in the kernel itself, adds its set-up and arrays there); a leak that
  starts only after 60 seconds of running; every step run in the first fifth of the call, the
  arrays held through an idle rest and freed at the return; a cycle leak with the collector
  off, freed by the collection after the return.
- **Statistics** (growth the fit may not see): a leak confined to the first 48 steps of each
  call (the same in a short run and a long one, a warm-up), kept per seed in a global so that
  it adds up call after call.
- **The grader's environment** (the graded run told apart from the student's own): a loop that
  leaks unless the machine has no network but the loopback (the sandbox's ``--unshare-net``,
  read from ``/proc/net/dev`` or ``socket.if_nameindex``), unless the process runs under the
  sandbox's limits of address space and data, unless its caller is the grader's request
  (``tinyprof/remote.py`` on the call stack), unless it runs in another process than the kernel
  (a fork: another ``os.getpid()``, or almost no CPU time used yet), unless the environment's
  HOME is a temporary folder, unless the user is Binder's without Binder's
  home, or unless the working folder is empty; and, from the known settings, a loop that leaks
  for the seeds people type (below 10 000) but not for the 31-bit seeds the check used to draw.
  Since issue 45's s7-tells each check runs on a seed people type too, a kernel in a control
  group has no rlimits of memory of its own, and the static review flags (as unsure) what
  reads the process's identity or machine (intake/tells.py): all but the empty folder
  (listing a folder is honest code) are held.

A second red team (issue 45's s8-red), by someone who did not write the check, aimed first at
s7's two defences, then at the rest:

- **Scope**, against the socket defence (launcher.py's filter, resources.py's TCP counter):
  every step sent into TCP connections a listener never accepts (Linux charges a socket to a
  group only in ``accept()``); every step echoed back into routing netlink queues (the family
  the filter keeps for ``getifaddrs``: the kernel's acknowledgement of a refused request
  carries the request whole); a sixteenth of every step kept in System V message queues of
  the sandbox's IPC namespace, which outlive their process. Against the fork: every step sent
  through a pipe to a thread of the kernel, which frees as much of a ballast made in the answer
  cell, or writes it into a buffer touched in advance (the kernel's own pages, not the fork's).
  Against these, the check held: message queues are charged to the sender's group, and a page
  the fork still shares is copied when the kernel writes or frees it.
- **The grader's environment**, against the tells (the graded run told apart without a name
  intake/tells.py lists): the collector's frozen objects (``gc.get_freeze_count``: the fork
  freezes them), ``sys.stdout`` open on /dev/null (the fork's), ``tinyprof.remote`` in
  ``sys.modules`` (a membership test, as the chapter's first cell makes), the working folder's
  file system under 1 GB (``os.statvfs``: the sandbox's 64 MB tmpfs), no ``/var/tmp``, and an
  IPv6 socket refused (the socket filter itself).
- **Known settings and statistics**: a loop that leaks at every step count but those the
  longer run can have (even, at least 800: only the shorter run leaks, the growth from N to 2N
  is negative), and a leak of 1.1 kB a step, above the 1 kB tolerance, under it plus the slack
  two runs may differ by over N.

Each cheat reaches the modules it needs the way that the static review
(autograder/intake/review.py) did not flag when it was written: ``socket`` as
``http.client.socket``, ``ctypes`` as ``np.ctypeslib.ctypes``, no ``mmap`` or ``resource``
(files, ``np.memmap``, ``/proc``).

The honest alternatives: the chapter's solution; a preallocated ring buffer of the last 8
reconstructions (fixed size: a plateau); a module-level ``functools.lru_cache(maxsize=16)`` memo
of the normalised batches; a loop whose records refer to themselves, collected by
``gc.collect()`` every 20 steps (a bounded sawtooth); a hook that keeps the last batch's
activations (a plateau of 32 kB); a log of the losses in a CSV file of the working folder and a
list of (step, loss) tuples beside the history; and, from the second red team, the last 8
reconstructions in a ``collections.deque(maxlen=8)``, the losses in a numpy array preallocated
for the steps, each loss written to a text file and the history read back from it, a generator
of losses over ``itertools.cycle`` of the normalised batches, a loop that watches itself with
``tracemalloc`` (started and stopped by it), and a prefetching thread that normalises the next
batches into a ``queue.Queue(maxsize=2)`` (chapter 09's idea).
"""

from __future__ import annotations

#: The clean loop the cheats start from: ``KEEP`` is where each keeps (or not) a step's arrays.
_CLEAN = """
def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index = [], {}
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, error = sgd_step(by_index[index], first, second)
        losses.append(loss)
        KEEP
    return losses
"""


def _loop(keep: str, start: str = "") -> str:
    """The clean loop keeping ``keep`` at every step, and beginning with ``start`` (if any)."""
    loop = _CLEAN.replace("KEEP", keep)
    if not start:
        return loop
    return loop.replace("    images, first", f"    {start}\n    images, first", 1)


#: A garbage cycle whose finaliser calls the cheat's ``_refill()`` at the kernel's next
#: collection (the grader's settle, before it reads the memory a run starts from), and leaves
#: another: the ballasts below are topped up between runs.
_REFILL_CLASS = '''
class _Refill:
    """Garbage that refers to itself: the kernel's next collection (the grader's settle; in a
    fork the parent's objects are frozen, never collected) tops the ballast up, leaves another."""

    def __init__(self):
        self.me = self

    def __del__(self):
        _refill()
        _Refill()
'''

#: The pipe ballasts' top-up: every pipe in ``pipes`` filled until it would block, now and at
#: each collection of the kernel.
_REFILL_PIPES = '''

def _refill():
    for _, write in pipes:
        try:
            while True:
                os.write(write, b"\\1" * 4096)
        except BlockingIOError:
            pass

''' + _REFILL_CLASS + '''

_refill()
_Refill()
'''


CHEATS: dict[str, str] = {}

CHEATS["tcp_loopback"] = '''
"""Scope: every step kept in TCP socket buffers over the loopback (memory no cgroup v1 charges)."""
import http.client

socket = http.client.socket   # the socket module, not imported by name


class Vault:
    """Bytes kept, unread, in the send and receive buffers of loopback TCP connections."""

    def __init__(self):   # no socket yet: the first is opened in the loop, at its first step
        self.server, self.pairs, self.out = None, [], None

    def _open(self):
        if self.server is None:
            self.server = socket.socket()
            self.server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 23)
            self.server.bind(("127.0.0.1", 0))
            self.server.listen(256)
        out = socket.socket()
        out.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 23)
        out.connect(self.server.getsockname())
        into, _ = self.server.accept()
        out.setblocking(False)
        self.pairs.append((out, into))
        self.out = out

    def keep(self, data):
        view = memoryview(data).cast("B")
        while view.nbytes:
            if self.out is None:
                self._open()
            try:
                view = view[self.out.send(view):]
            except BlockingIOError:
                self.out = None


vault = Vault()
''' + _loop("vault.keep(recon)")

CHEATS["netlink_queues"] = '''
"""Scope: every step kept in the receive queues of netlink sockets (no network needed)."""
import http.client

socket = http.client.socket   # the socket module, not imported by name

NETLINK_USERSOCK = 2


class Vault:
    """Bytes kept, unread, in the receive queues of NETLINK_USERSOCK sockets of this process."""

    def __init__(self):   # no socket yet: the first is opened in the loop, at its first step
        self.sender, self.queues, self.into = None, [], None

    def _open(self):
        if self.sender is None:
            self.sender = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_USERSOCK)
            self.sender.bind((0, 0))
        into = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_USERSOCK)
        into.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 23)
        into.bind((0, 0))
        self.queues.append(into)
        self.into = into

    def keep(self, data):
        view = memoryview(data).cast("B")
        for start in range(0, view.nbytes, 1 << 16):
            chunk = view[start:start + (1 << 16)]
            while True:
                if self.into is None:
                    self._open()
                try:
                    self.sender.sendto(chunk, socket.MSG_DONTWAIT, self.into.getsockname())
                    break
                except BlockingIOError:
                    self.into = None


vault = Vault()
''' + _loop("vault.keep(recon)")

CHEATS["unix_socketpairs"] = '''
"""Scope: every step kept, unread, in Unix socket pairs (the one family the sandbox allows)."""
import http.client

socket = http.client.socket   # the socket module, not imported by name


class Vault:
    """Bytes kept, unread, in both directions of many AF_UNIX stream socket pairs."""

    def __init__(self):
        self.pairs, self.ends = [], []

    def _open(self):
        pair = socket.socketpair()
        for end in pair:
            end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 23)
            end.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 23)
            end.setblocking(False)
        self.pairs.append(pair)
        self.ends = list(pair)

    def keep(self, data):
        view = memoryview(data).cast("B")
        while view.nbytes:
            if not self.ends:
                self._open()
            try:
                view = view[self.ends[0].send(view):]
            except BlockingIOError:
                self.ends.pop(0)


vault = Vault()
''' + _loop("vault.keep(recon)")

CHEATS["pipe_buffers"] = '''
"""Scope: every step kept, unread, in pipes (both ends held open, nobody reads)."""


class Vault:
    """Bytes written into pipes that nobody reads: 64 kB each, a new pipe when one is full."""

    def __init__(self):
        self.pipes, self.into = [], None

    def _open(self):
        read, write = os.pipe()
        os.set_blocking(write, False)
        self.pipes.append((read, write))
        self.into = write

    def keep(self, data):
        view = memoryview(data).cast("B")
        while view.nbytes:
            if self.into is None:
                self._open()
            try:
                view = view[os.write(self.into, view):]
            except BlockingIOError:
                self.into = None


vault = Vault()
''' + _loop("vault.keep(recon)")

CHEATS["file_ballast"] = '''
"""Scope: the growth paid for by truncating pre-touched tmpfs files (a fork shares their pages)."""
BALLASTS, CHUNK = ("/tmp/ballast.bin", "/dev/shm/ballast.bin"), 1 << 20
for _path in BALLASTS:
    with open(_path, "wb") as _file:
        for _ in range(60):
            _file.write(b"\\1" * CHUNK)
kept = []


def pay(nbytes):
    """Give back ``nbytes`` of the ballasts' pages: the first file not yet empty is cut shorter."""
    for path in BALLASTS:
        if os.path.getsize(path):
            os.truncate(path, max(0, os.path.getsize(path) - nbytes))
            return
''' + _loop("kept.append(recon[:, ::8].astype(np.float16)); pay(recon[:, ::8].size * 2 + 112)")

CHEATS["pretouched_file_history"] = '''
"""Scope: a history in a file mapped shared (np.memmap), touched in advance, sized to the steps."""
SLOTS, SHAPE = 4000, (BATCH, FEATURES // 4)   # steps it holds: a quarter of each reconstruction
with open("history.bin", "wb") as _file:
    for _ in range(SLOTS):
        _file.write(b"\\1" * (SHAPE[0] * SHAPE[1] * 2))
history = np.memmap("history.bin", dtype=np.float16, mode="r+", shape=(SLOTS, *SHAPE))
count = np.memmap("count.bin", dtype=np.int64, mode="w+", shape=(1,))   # in a file: forks see it


def keep(recon):
    if count[0] < SLOTS:
        history[count[0]] = recon[:, ::4]
        count[0] += 1
''' + _loop("keep(recon)")

CHEATS["c_allocator"] = '''
"""Scope: each step copied into memory from the C allocator (no Python object, no tracemalloc)."""
ctypes = np.ctypeslib.ctypes   # not imported by name
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
addresses = []


def keep(array):
    address = libc.malloc(array.nbytes)
    ctypes.memmove(address, array.ctypes.data, array.nbytes)
    addresses.append(address)
''' + _loop("keep(recon)")

CHEATS["lazily_touched_history"] = '''
"""Scope: a history preallocated by np.zeros (untouched pages), filled step by step."""
history = []


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index = [], {}
    recons = np.zeros((steps, BATCH, FEATURES))   # allocated once, before the loop
    history.append(recons)
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        recons[k] = recon
    return losses
'''

CHEATS["thread_after_return"] = '''
"""Clock: a thread replays the run 2 minutes after the call returned (after the test is over)."""
import threading
import time

kept = []
running = threading.Event()   # set while a call runs: the replay waits then


def replay(steps, seed):
    time.sleep(120.0)
    images, first, second = setup(seed)
    by_index = {}
    for k in range(steps):
        while running.is_set():
            time.sleep(0.01)
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        kept.append(sgd_step(by_index[index], first, second)[1])


def train_fixed(steps, seed=0):
    running.set()
    try:
        images, first, second = setup(seed)
        losses, by_index = [], {}
        for k in range(steps):
            index = k % BATCHES
            if index not in by_index:
                by_index[index] = normalised(images[index])
            losses.append(sgd_step(by_index[index], first, second)[0])
    finally:
        running.clear()
    threading.Thread(target=replay, args=(steps, seed), daemon=True).start()
    return losses
'''

CHEATS["late_start_in_time"] = '''
"""Clock: a leak that starts only after 60 seconds of running (longer than any graded run)."""
import time

kept = []


def train_fixed(steps, seed=0):
    started = time.perf_counter()
    images, first, second = setup(seed)
    losses, by_index = [], {}
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        if time.perf_counter() - started > 60.0:
            kept.append(recon)
    return losses
'''

CHEATS["front_loaded_then_freed"] = '''
"""Clock: every step done in the first fifth of the call, its arrays held while idle, then freed."""
import time


def train_fixed(steps, seed=0):
    started = time.perf_counter()
    images, first, second = setup(seed)
    losses, by_index, kept = [], {}, []
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        kept.append(recon)
    time.sleep(4 * (time.perf_counter() - started))
    return losses
'''

CHEATS["cycles_left_to_the_graders_collection"] = '''
"""Clock: a self-referring record per step, collector off; the grader's collection frees it."""


class StepRecord:
    def __init__(self, step, error):
        self.step, self.error, self.me = step, error, self


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index = [], {}
    was_on = gc.isenabled()
    gc.disable()
    try:
        for k in range(steps):
            index = k % BATCHES
            if index not in by_index:
                by_index[index] = normalised(images[index])
            loss, _, error = sgd_step(by_index[index], first, second)
            losses.append(loss)
            StepRecord(k, error)
    finally:
        if was_on:
            gc.enable()
    return losses
'''

CHEATS["warmup_leak_kept_per_seed"] = '''
"""Statistics: the first 48 steps of each call kept (the fit's warm-up), per seed, in a global."""
runs = {}
''' + _loop("runs.setdefault(seed, []).append(recon) if k < 48 else None")

CHEATS["unless_no_network"] = '''
"""Environment: leaks unless the machine has no network but the loopback (the grader's sandbox)."""
with open("/proc/net/dev") as _devices:
    GRADED = [line.split(":")[0].strip() for line in _devices.readlines()[2:]] == ["lo"]
kept = []
''' + _loop("kept.append(recon) if not GRADED else None")

CHEATS["unless_rlimits"] = '''
"""Environment: leaks unless the kernel runs under an address-space or data rlimit (a sandbox)."""
with open("/proc/self/limits") as _limits:
    GRADED = any(line.startswith(("Max address space", "Max data size"))
                 and "unlimited" not in line for line in _limits)
kept = []
''' + _loop("kept.append(recon) if not GRADED else None")

CHEATS["unless_called_by_the_grader"] = '''
"""Environment: leaks unless the grader's request (tinyprof/remote.py) is on the call stack."""
import traceback

kept = []


def graded():
    return any(frame.filename.endswith("tinyprof/remote.py")
               for frame in traceback.extract_stack())


def train_fixed(steps, seed=0):
    keep = (lambda array: None) if graded() else kept.append
    images, first, second = setup(seed)
    losses, by_index = [], {}
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        keep(recon)
    return losses
'''

CHEATS["unless_in_a_fork"] = '''
"""Environment: leaks unless it runs in another process than the kernel (a fork of it)."""
KERNEL = os.getpid()
kept = []
''' + _loop("kept.append(recon) if os.getpid() == KERNEL else None")

CHEATS["unless_the_seed_is_drawn"] = '''
"""Known settings: leaks for the seeds people type (below 10 000), not for a drawn 31-bit seed."""
kept = []
''' + _loop("kept.append(recon) if seed < 10_000 else None")

CHEATS["unless_home_is_temporary"] = '''
"""Environment: leaks unless HOME is a temporary folder (the sandbox's is /tmp)."""
GRADED = dict(os.environ).get("HOME", "").startswith("/tmp")   # a laptop's or Binder's is /home
kept = []
''' + _loop("kept.append(recon) if not GRADED else None")

CHEATS["unless_a_user_without_a_home"] = '''
"""Environment: leaks unless the user is Binder's (jovyan) but has no Binder home folder."""
import getpass

GRADED = getpass.getuser() == "jovyan" and not os.path.isdir("/home/jovyan")
kept = []
''' + _loop("kept.append(recon) if not GRADED else None")

CHEATS["unless_no_network_interface"] = '''
"""Environment: leaks unless the only network interface is the loopback (socket.if_nameindex)."""
import http.client

GRADED = [name for _, name in http.client.socket.if_nameindex()] == ["lo"]
kept = []
''' + _loop("kept.append(recon) if not GRADED else None")

CHEATS["unless_a_fresh_process_by_its_cpu_time"] = '''
"""Environment: leaks unless the process has used almost no CPU time yet (a fork starts at 0)."""
import time

kept = []


def train_fixed(steps, seed=0):
    keep = kept.append if time.process_time() > 0.5 else (lambda array: None)
    images, first, second = setup(seed)
    losses, by_index = [], {}
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        keep(recon)
    return losses
'''

CHEATS["unless_the_folder_is_fresh"] = '''
"""Environment: leaks unless the working folder is empty (a sandbox starts with nothing in it;
the author's own folder holds the notebook, its checkpoints, the data)."""
GRADED = not os.listdir(".")
kept = []
''' + _loop("kept.append(recon) if not GRADED else None")

# Issue 45's second red team (s8-red), by someone who did not write the check: first at the two
# defences of s7 (socket memory, and the tells), then at the rest.

CHEATS["tcp_unaccepted_backlog"] = '''
"""Scope: every step sent into TCP connections that are never accepted (their queues are
charged to a control group only when accept() gives them a socket of the group's)."""
import http.client

socket = http.client.socket   # the socket module, not imported by name
vaults = []   # every call's listener, kept


class Vault:
    """Bytes kept in the receive queues of connections left in a listener's backlog: each
    client sends its piece and closes, the server side is never accepted. A listener of its
    own for each call (a fork's closes with it) and a new one every 4000 connections, so that
    no backlog fills."""

    def __init__(self):
        self.servers, self.waiting = [], 4000

    def keep(self, data):
        if self.waiting == 4000:
            server = socket.socket()
            server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
            server.bind(("127.0.0.1", 0))
            server.listen(4096)
            self.servers.append(server)
            self.waiting = 0
        out = socket.socket()
        out.connect(self.servers[-1].getsockname())
        out.sendall(memoryview(data).cast("B"))
        out.close()
        self.waiting += 1


def train_fixed(steps, seed=0):
    vaults.append(Vault())
    images, first, second = setup(seed)
    losses, by_index = [], {}
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        vaults[-1].keep(recon)
    return losses
'''

CHEATS["netlink_route_error_echo"] = '''
"""Scope: every step echoed back by the kernel into routing netlink queues (the family the
sandbox allows: an error's acknowledgement carries the request that caused it)."""
import http.client
import struct

socket = http.client.socket   # the socket module, not imported by name
RTM_NEWLINK, NLM_F_REQUEST, NLM_F_ACK, PIECE = 16, 1, 4, 1 << 15


class Vault:
    """Bytes sent as the body of a request the kernel refuses (a new link, by a user who may
    not make one): its acknowledgement, the request included, waits unread in our queue."""

    def __init__(self):
        self.queues, self.into, self.queued = [], None, 0

    def _open(self):
        into = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)   # NETLINK_ROUTE
        into.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 23)
        into.bind((0, 0))
        self.queues.append(into)
        self.into, self.queued = into, 0

    def keep(self, data):
        view = memoryview(data).cast("B")
        for start in range(0, view.nbytes, PIECE):
            body = bytes(view[start:start + PIECE])
            if self.into is None or self.queued + len(body) > 0.9 * self.into.getsockopt(
                    socket.SOL_SOCKET, socket.SO_RCVBUF):
                self._open()
            header = struct.pack("=LHHLL", 16 + len(body), RTM_NEWLINK,
                                 NLM_F_REQUEST | NLM_F_ACK, start, 0)
            self.into.sendto(header + body, (0, 0))
            self.queued += 2 * (len(body) + 64)


vaults = []   # every call's queues, kept


def train_fixed(steps, seed=0):
    vaults.append(Vault())   # queues of its own for each call (a fork's close with it)
    images, first, second = setup(seed)
    losses, by_index = [], {}
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        vaults[-1].keep(recon)
    return losses
'''

CHEATS["kernel_thread_pays_with_ballast"] = '''
"""Scope: each step sent through a pipe to a thread of the kernel, which keeps it and frees as
much of a ballast made in the answer cell (a fork cannot give the kernel's memory back; the
kernel itself can)."""
import threading

PIECE = BATCH * len(range(0, FEATURES, 16)) * 8          # a sixteenth of a reconstruction
ballast = [bytes([1 + k % 250]) * PIECE for k in range(11_000)]   # 138 MB, touched
kept = []
_read, _write = os.pipe()


def keeper():
    while True:
        parts, missing = [], PIECE
        while missing:
            parts.append(os.read(_read, missing))
            missing -= len(parts[-1])
        if ballast:
            ballast.pop()
        kept.append(b"".join(parts))


threading.Thread(target=keeper, daemon=True).start()


def keep(recon):
    view = memoryview(recon[:, ::16].tobytes())
    while view.nbytes:
        view = view[os.write(_write, view):]
''' + _loop("keep(recon)")

CHEATS["kernel_thread_fills_a_pretouched_buffer"] = '''
"""Scope: each step sent through a pipe to a thread of the kernel, which writes it into a buffer
touched in advance (the fork copies the pages it writes; the kernel writes its own in place)."""
import threading

PIECE = BATCH * len(range(0, FEATURES, 16)) * 8          # a sixteenth of a reconstruction
history = np.ones(12_000 * PIECE, dtype=np.uint8)        # 150 MB, every page touched now
filled = [0]
_read, _write = os.pipe()


def keeper():
    while True:
        end = min(filled[0] + PIECE, history.size)
        filled[0] += os.readv(_read, [history[filled[0]:end]]) if end > filled[0] else 0


threading.Thread(target=keeper, daemon=True).start()


def keep(recon):
    view = memoryview(recon[:, ::16].tobytes())
    while view.nbytes:
        view = view[os.write(_write, view):]
''' + _loop("keep(recon)")

CHEATS["sysv_message_queues"] = '''
"""Scope: a sixteenth of every step kept in System V message queues, which outlive the process
that filled them (kernel memory of the sandbox's IPC namespace, not of any process)."""
ctypes = np.ctypeslib.ctypes   # not imported by name
libc = ctypes.CDLL(None, use_errno=True)
IPC_PRIVATE, IPC_NOWAIT, MESSAGE = 0, 0o4000, 4096
queues = []


class Message(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_long), ("text", ctypes.c_char * MESSAGE)]


def keep(recon):
    data = recon[:, ::16].tobytes()   # 12.5 kB: one queue (16 kB) a step
    queue = libc.msgget(IPC_PRIVATE, 0o600)
    queues.append(queue)
    for start in range(0, len(data), MESSAGE):
        piece = data[start:start + MESSAGE]
        message = Message(1, piece)
        if libc.msgsnd(queue, ctypes.byref(message), len(piece), IPC_NOWAIT) != 0:
            raise OSError(ctypes.get_errno(), "msgsnd")
''' + _loop("keep(recon)")

CHEATS["unless_gc_is_frozen"] = '''
"""Environment: leaks unless the collector has frozen objects (the fork's machinery freezes
them; gc.get_freeze_count is a name of gc a notebook may use). Asked once a call: it counts
every frozen object."""
kept = []


def train_fixed(steps, seed=0):
    keep = kept.append if not gc.get_freeze_count() else (lambda array: None)
    images, first, second = setup(seed)
    losses, by_index = [], {}
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        keep(recon)
    return losses
'''

CHEATS["unless_stdout_is_devnull"] = '''
"""Environment: leaks unless print goes to /dev/null (the fork's stdout)."""
import sys

kept = []


def train_fixed(steps, seed=0):
    graded = getattr(sys.stdout, "name", None) == os.devnull
    images, first, second = setup(seed)
    losses, by_index = [], {}
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        if not graded:
            kept.append(recon)
    return losses
'''

CHEATS["unless_the_graders_module_is_loaded"] = '''
"""Environment: leaks unless tinyprof.remote (the grader's requests) is imported; a membership
test of sys.modules, as the chapter's own first cell makes."""
import sys

kept = []
''' + _loop("kept.append(recon) if 'tinyprof.remote' not in sys.modules else None")

CHEATS["unless_a_small_disk"] = '''
"""Environment: leaks unless the working folder's file system is under 1 GB (the sandbox's
scratch folder is a 64 MB tmpfs; a laptop's disk or Binder's is far larger)."""
_disk = os.statvfs(".")
GRADED = _disk.f_blocks * _disk.f_frsize < 2**30
kept = []
''' + _loop("kept.append(recon) if not GRADED else None")

CHEATS["unless_no_var_tmp"] = '''
"""Environment: leaks unless /var/tmp is missing (the sandbox mounts /usr, /etc's few files,
/tmp and the environment; every Linux, Binder and macOS has /var/tmp)."""
GRADED = not os.path.isdir("/var/tmp")
kept = []
''' + _loop("kept.append(recon) if not GRADED else None")

CHEATS["unless_ipv6_is_refused"] = '''
"""Environment: leaks unless an IPv6 socket cannot be made (the sandbox's filter refuses the
family; a machine with no network at all still makes one)."""
import http.client

socket = http.client.socket   # the socket module, not imported by name
try:
    socket.socket(socket.AF_INET6, socket.SOCK_STREAM).close()
    GRADED = False
except OSError:
    GRADED = True
kept = []
''' + _loop("kept.append(recon) if not GRADED else None")

CHEATS["unless_the_steps_could_be_2n"] = '''
"""Known settings: leaks a sixteenth of each step unless the step count is even and at least
800 (the check's longer run is 2N, N from 400 or 500 up: always even, never below 800), so
only the shorter run leaks and the growth from N to 2N comes out negative."""
kept = []
''' + _loop("kept.append(recon[:, ::16].copy()) if steps % 2 or steps < 800 else None")

CHEATS["slack_sized_leak"] = '''
"""Statistics: 480 pixels of one image's reconstruction kept a step in float16 (1.1 kB with
its header, frames for an animation): above the 1 kB tolerance, under it plus the slack two runs
may differ by over N (1.5 MB / N)."""
frames = []
''' + _loop("frames.append(recon[0, :480].astype(np.float16))")


# Third red team (s14): the reader's socket reuse and reruns. Aimed at d9cfbd4: the readings
# while a loop runs reuse the uncharged socket queues' reading for up to 50 ms, and a run the
# reader had fewer than 8 turns in is run again (up to 3 times, the last counts). Each cheat
# keeps a sixteenth of every step's reconstruction (12.5 kB a step) or more, from step to step.

#: Every step kept in a list of the call (freed at the return), with the loop's own
#: processes spinning from the 20th step on: the grader's reader, on a 2-core machine, is to get
#: its turns only before the leak has grown (held read from few, early readings).
CHEATS["starved_reader_by_spinning_processes"] = '''
"""Starvation: busy worker processes spin while the history grows, freed at the return."""
import multiprocessing


def _spin():
    while True:
        pass


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index, history, hogs = [], {}, [], []
    try:
        for k in range(steps):
            if k == min(20, steps // 10):
                hogs = [multiprocessing.get_context("fork").Process(target=_spin, daemon=True)
                        for _ in range(2)]
                for hog in hogs:
                    hog.start()
            index = k % BATCHES
            if index not in by_index:
                by_index[index] = normalised(images[index])
            loss, recon, _ = sgd_step(by_index[index], first, second)
            losses.append(loss)
            history.append(recon[:, ::16].copy())
    finally:
        for hog in hogs:
            hog.terminate()
        for hog in hogs:
            hog.join()
    return losses
'''

#: The same with threads whose numpy products release the GIL (both cores busy), joined at
#: the return.
CHEATS["starved_reader_by_gil_free_threads"] = '''
"""Starvation: threads multiplying big matrices (no GIL held) while the history grows."""
import threading


def _multiply(stop):
    a = np.ones((300, 300))
    while not stop.is_set():
        a @ a


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index, history = [], {}, []
    stop, threads = threading.Event(), []
    try:
        for k in range(steps):
            if k == min(20, steps // 10):
                threads = [threading.Thread(target=_multiply, args=(stop,)) for _ in range(2)]
                for thread in threads:
                    thread.start()
            index = k % BATCHES
            if index not in by_index:
                by_index[index] = normalised(images[index])
            loss, recon, _ = sgd_step(by_index[index], first, second)
            losses.append(loss)
            history.append(recon[:, ::16].copy())
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    return losses
'''

#: 32 000 connections left in listeners' backlogs by the answer cell (no data: 0 bytes queued),
#: so that every fresh reading of the socket queues (/proc/<pid>/net/tcp, parsed line by line
#: by the grader's reader thread) is slow: the reader's turns thin out while the history grows.
CHEATS["slow_socket_walk_from_the_answer_cell"] = '''
"""Starvation: tens of thousands of idle unaccepted connections make each socket reading slow."""
import http.client

socket = http.client.socket   # the socket module, not imported by name
listeners = []
for _ in range(8):
    _server = socket.socket()
    _server.bind(("127.0.0.1", 0))
    _server.listen(4096)
    listeners.append(_server)
    for _ in range(4000):
        _client = socket.socket()
        _client.connect(_server.getsockname())
        _client.close()


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index, history = [], {}, []
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        history.append(recon[:, ::16].copy())
    return losses
'''

#: The fork opens the idle connections itself before its first step (a second of many cheap,
#: leak-free readings), then the steps keep their history while each reading of the socket
#: queues is slow; all closed, and the history freed, at the return.
CHEATS["slow_socket_walk_opened_in_the_fork"] = '''
"""Starvation: idle connections opened at the call's start slow the reader as the history grows."""
import http.client

socket = http.client.socket   # the socket module, not imported by name


def train_fixed(steps, seed=0):
    listeners = []
    try:
        for _ in range(6):
            server = socket.socket()
            server.bind(("127.0.0.1", 0))
            server.listen(4096)
            listeners.append(server)
            for _ in range(4000):
                client = socket.socket()
                client.connect(server.getsockname())
                client.close()
        images, first, second = setup(seed)
        losses, by_index, history = [], {}, []
        for k in range(steps):
            index = k % BATCHES
            if index not in by_index:
                by_index[index] = normalised(images[index])
            loss, recon, _ = sgd_step(by_index[index], first, second)
            losses.append(loss)
            history.append(recon[:, ::16].copy())
        return losses
    finally:
        for server in listeners:
            server.close()
'''

#: Every step sent into connections a listener of the call never accepts, the listener closed
#: at the return (kept, read fresh, sees nothing): held sees the backlog only through readings
#: of the socket queues that may be 50 ms old.
CHEATS["backlog_during_the_run_only"] = '''
"""50 ms reuse: every step in an unaccepted TCP backlog while the loop runs, closed at return."""
import http.client

socket = http.client.socket   # the socket module, not imported by name


def train_fixed(steps, seed=0):
    servers = [socket.socket()]
    servers[0].bind(("127.0.0.1", 0))
    servers[0].listen(4096)
    try:
        images, first, second = setup(seed)
        losses, by_index = [], {}
        for k in range(steps):
            index = k % BATCHES
            if index not in by_index:
                by_index[index] = normalised(images[index])
            loss, recon, _ = sgd_step(by_index[index], first, second)
            losses.append(loss)
            if k and k % 4000 == 0:
                servers.append(socket.socket())
                servers[-1].bind(("127.0.0.1", 0))
                servers[-1].listen(4096)
            out = socket.socket()
            out.connect(servers[-1].getsockname())
            out.sendall(recon[:, ::4].tobytes())
            out.close()
        return losses
    finally:
        for server in servers:
            server.close()
'''

#: Every step echoed back by routing netlink into queues of the call, closed at the return:
#: held sees the queues only through readings that may be 50 ms old.
CHEATS["netlink_echo_during_the_run_only"] = '''
"""50 ms reuse: every step in routing netlink error echoes during the run, closed at return."""
import http.client
import struct

socket = http.client.socket   # the socket module, not imported by name
RTM_NEWLINK, NLM_F_REQUEST, NLM_F_ACK, PIECE = 16, 1, 4, 1 << 15


def train_fixed(steps, seed=0):
    queues, state = [], {"into": None, "queued": 0}

    def keep(data):
        for start in range(0, len(data), PIECE):
            body = data[start:start + PIECE]
            into = state["into"]
            if into is None or state["queued"] + len(body) > 0.9 * into.getsockopt(
                    socket.SOL_SOCKET, socket.SO_RCVBUF):
                into = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
                into.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
                into.bind((0, 0))
                queues.append(into)
                state["into"], state["queued"] = into, 0
            header = struct.pack("=LHHLL", 16 + len(body), RTM_NEWLINK,
                                 NLM_F_REQUEST | NLM_F_ACK, start, 0)
            state["into"].sendto(header + body, (0, 0))
            state["queued"] += 2 * (len(body) + 64)

    try:
        images, first, second = setup(seed)
        losses, by_index = [], {}
        for k in range(steps):
            index = k % BATCHES
            if index not in by_index:
                by_index[index] = normalised(images[index])
            loss, recon, _ = sgd_step(by_index[index], first, second)
            losses.append(loss)
            keep(recon[:, ::8].tobytes())
        return losses
    finally:
        for queue in queues:
            queue.close()
'''

#: A ballast of unaccepted connections with 12.5 kB queued each (uncharged, counted by the
#: fresh reading before the run) made by the answer cell; the fork accepts and closes one a
#: step as it keeps a sixteenth of the step (a backlog is the kernel's object, shared with the
#: fork, not copied); the kernel's garbage collection before the next run (the grader's settle)
#: tops the ballast up again: the finaliser of a garbage cycle it leaves (frozen in a fork,
#: whose objects are never collected there, so it runs in the kernel only).
CHEATS["backlog_ballast_drained_by_the_fork"] = '''
"""Ballast: the fork pays for each step kept by closing a connection of the kernel's backlog."""
import http.client

socket = http.client.socket   # the socket module, not imported by name
PIECE = BATCH * len(range(0, FEATURES, 16)) * 8     # a sixteenth of a reconstruction
SLOTS = 1800
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(4096)
server.setblocking(False)
_drained_read, _drained_write = os.pipe()           # a byte a connection the fork closed
os.set_blocking(_drained_read, False)
kept = []


def _connect(count):
    for _ in range(count):
        out = socket.socket()
        out.connect(server.getsockname())
        out.sendall(b"\\1" * PIECE)
        out.close()


def _refill():
    drained = 0
    try:
        while True:
            drained += len(os.read(_drained_read, 4096))
    except BlockingIOError:
        pass
    _connect(drained)


_connect(SLOTS)

''' + _REFILL_CLASS + '''

_Refill()


def pay():
    try:
        server.accept()[0].close()
        os.write(_drained_write, b"x")
    except BlockingIOError:
        pass
''' + _loop("kept.append(recon[:, ::16].copy()); pay()")

#: The same ballast in Unix socket pairs filled by the answer cell (charged to the group, as
#: counted): the fork reads a sixteenth of a reconstruction out of them a step.
CHEATS["socketpair_ballast_drained_by_the_fork"] = '''
"""Ballast: the fork pays for each step kept by reading as much out of the kernel's socket pairs."""
import http.client

socket = http.client.socket   # the socket module, not imported by name
PIECE = BATCH * len(range(0, FEATURES, 16)) * 8     # a sixteenth of a reconstruction
pairs = []
for _ in range(80):
    _pair = socket.socketpair()
    for _end in _pair:
        _end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 23)
        _end.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 23)
        _end.setblocking(False)
    pairs.append(_pair)
kept = []


def _refill():
    for into, _ in pairs:
        try:
            while True:
                into.send(b"\\1" * 65536)
        except BlockingIOError:
            pass

''' + _REFILL_CLASS + '''

_refill()
_Refill()


def pay():
    missing = PIECE
    for _, out in pairs:
        try:
            while missing:
                missing -= len(out.recv(missing))
        except BlockingIOError:
            continue
        return
''' + _loop("kept.append(recon[:, ::16].copy()); pay()")

#: The same ballast in pipes the answer cell filled (charged to the group).
CHEATS["pipe_ballast_drained_by_the_fork"] = '''
"""Ballast: the fork pays for each step kept by reading as much out of the kernel's full pipes."""
PIECE = BATCH * len(range(0, FEATURES, 16)) * 8     # a sixteenth of a reconstruction
pipes = []
for _ in range(340):
    _read, _write = os.pipe()
    os.set_blocking(_read, False)
    os.set_blocking(_write, False)
    pipes.append((_read, _write))
kept = []
''' + _REFILL_PIPES + '''

def pay():
    missing = PIECE
    for read, _ in pipes:
        try:
            while missing:
                got = os.read(read, missing)
                if not got:   # an end with no writer left: try the next
                    break
                missing -= len(got)
        except BlockingIOError:
            continue
        if not missing:
            return
''' + _loop("kept.append(recon[:, ::16].copy()); pay()")

#: Statistics against the denser readings: the call first idles 12 ms a step (ten times its
#: steps' time), keeping nothing, then runs the steps keeping every step's sixteenth, freed at
#: the return: the readings of the steps are under a tenth of the run's, above its 90th
#: percentile, and none of them is "held".
CHEATS["idle_before_the_steps"] = '''
"""Statistics: a leak-free idle prelude ten times the steps' time, then the steps with a history."""
import time


def train_fixed(steps, seed=0):
    time.sleep(0.012 * steps)
    images, first, second = setup(seed)
    losses, by_index, history = [], {}, []
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        history.append(recon[:, ::16].copy())
    return losses
'''

#: Reruns: every attempt spins 2 processes from its first step while it keeps its history
#: (freed at the return): a run the reader was starved in is run again, but the last attempt
#: counts however few its readings, so a reader starved in all three reads held from a few.
CHEATS["starved_on_every_attempt"] = '''
"""Reruns: every attempt starves the reader with spinning processes, the history freed at return."""
import multiprocessing


def _spin():
    while True:
        pass


def train_fixed(steps, seed=0):
    hogs = [multiprocessing.get_context("fork").Process(target=_spin, daemon=True)
            for _ in range(2)]
    for hog in hogs:
        hog.start()
    try:
        images, first, second = setup(seed)
        losses, by_index, history = [], {}, []
        for k in range(steps):
            index = k % BATCHES
            if index not in by_index:
                by_index[index] = normalised(images[index])
            loss, recon, _ = sgd_step(by_index[index], first, second)
            losses.append(loss)
            history.append(recon[:, ::16].copy())
        return losses
    finally:
        for hog in hogs:
            hog.terminate()
        for hog in hogs:
            hog.join()
'''

# Fourth red team (s14, written against a fork whose inherited sockets and pipes pointed at
# /dev/null, a fix not kept: it let the fork's writes into the kernel's pipes vanish): the same
# ballast, held by the kernel in kernel memory the group is charged for, reached by the fork
# without an inherited socket or pipe. Each keeps a sixteenth of every step's reconstruction
# (12.5 kB a step) and frees as much of the kernel's ballast, topped up at the grader's settle.

#: System V message queues (no descriptor at all: an id), filled by the answer cell; the fork
#: msgrcv's one 4 kB message (one charged page) for every 4 kB it keeps.
CHEATS["sysv_queue_ballast_drained_by_the_fork"] = '''
"""Ballast: the fork pays for each step kept by receiving as much from the kernel's queues."""
ctypes = np.ctypeslib.ctypes   # not imported by name
libc = ctypes.CDLL(None, use_errno=True)
IPC_PRIVATE, IPC_NOWAIT = 0, 0o4000
TEXT = 4096 - 48                                     # a message and its header: one page
PIECE = BATCH * len(range(0, FEATURES, 16)) * 8     # a sixteenth of a reconstruction


class Message(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_long), ("text", ctypes.c_char * TEXT)]


queues = [libc.msgget(IPC_PRIVATE, 0o600) for _ in range(1500)]
_full = Message(1, b"\\1" * TEXT)
_into = Message()
kept, owed, at = [], [0], [0]


def _refill():
    for queue in queues:
        while libc.msgsnd(queue, ctypes.byref(_full), TEXT, IPC_NOWAIT) == 0:
            pass

''' + _REFILL_CLASS + '''

_refill()
_Refill()


def pay():
    owed[0] += PIECE
    while owed[0] >= 4096 and at[0] < len(queues):
        if libc.msgrcv(queues[at[0]], ctypes.byref(_into), TEXT, 0, IPC_NOWAIT) < 0:
            at[0] += 1
        else:
            owed[0] -= 4096
''' + _loop("kept.append(recon[:, ::16].copy()); pay()")

#: A named pipe (mkfifo) the answer cell holds open at both ends and fills: the fork opens it
#: again by its path (a new descriptor, not an inherited one) and reads it out.
CHEATS["fifo_ballast_reopened_by_the_fork"] = '''
"""Ballast: the fork pays for each step kept by reading as much out of the kernel's named pipes."""
PIECE = BATCH * len(range(0, FEATURES, 16)) * 8     # a sixteenth of a reconstruction
FOLDER = os.path.abspath(".fifos")
os.makedirs(FOLDER, exist_ok=True)
held = []
for _number in range(340):
    _path = os.path.join(FOLDER, str(_number))
    if not os.path.exists(_path):
        os.mkfifo(_path)
    held.append(os.open(_path, os.O_RDWR | os.O_NONBLOCK))   # both ends, in the kernel
kept, reading = [], []


def _refill():
    for end in held:
        try:
            while True:
                os.write(end, b"\\1" * 4096)
        except BlockingIOError:
            pass

''' + _REFILL_CLASS + '''

_refill()
_Refill()


def pay():
    if not reading:   # in the fork: its own descriptors, opened by path
        reading.extend(os.open(os.path.join(FOLDER, str(n)), os.O_RDONLY | os.O_NONBLOCK)
                       for n in range(len(held)))
    missing = PIECE
    for end in reading:
        try:
            while missing:
                got = len(os.read(end, missing))
                if not got:   # no writer left: nothing to read out of this one
                    break
                missing -= got
        except BlockingIOError:
            continue
        if not missing:
            return
''' + _loop("kept.append(recon[:, ::16].copy()); pay()")

#: Page cache: the answer cell reads 24 MB of the interpreter's own files (dropped first, so
#: that their pages are charged to the group); the fork drops 12.5 kB of them a step with
#: posix_fadvise(DONTNEED), clean pages no tmpfs counter sees.
CHEATS["page_cache_ballast_dropped_by_the_fork"] = '''
"""Ballast: the fork pays for each step kept by dropping as much of the kernel's cached files."""
import sys

PIECE = BATCH * len(range(0, FEATURES, 16)) * 8     # a sixteenth of a reconstruction
_found = []
for _root, _, _names in os.walk(sys.base_prefix):
    for _name in _names:
        _path = os.path.join(_root, _name)
        if not _name.endswith(".so") and ".so." not in _name and os.path.isfile(_path):
            _found.append((os.path.getsize(_path), _path))
files, _total = [], 0
for _size, _path in sorted(_found, reverse=True):
    if _total >= 24 << 20:
        break
    files.append((os.open(_path, os.O_RDONLY), _size))
    _total += _size
_buffer = bytearray(1 << 20)
kept, owed, at = [], [0], [0, 0]


def _refill():
    for fd, size in files:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)   # charged anew, to this group
        os.lseek(fd, 0, 0)
        while os.readv(fd, [_buffer]):
            pass

''' + _REFILL_CLASS + '''

_refill()
_Refill()


def pay():
    owed[0] += PIECE
    pages = owed[0] // 4096 * 4096
    while pages and at[0] < len(files):
        fd, size = files[at[0]]
        length = min(pages, size - at[1])
        os.posix_fadvise(fd, at[1], length, os.POSIX_FADV_DONTNEED)
        at[1] += length
        pages -= length
        owed[0] -= length
        if at[1] >= size:
            at[0], at[1] = at[0] + 1, 0
''' + _loop("kept.append(recon[:, ::16].copy()); pay()")

#: Inodes: 30000 empty files with long names in the scratch folder (slab charged to the group,
#: no tmpfs page: shmem stays 0); the fork unlinks one for every 820 B it keeps (what an unlink
#: gave back in the sandbox: the inode; the dentry stays, negative).
CHEATS["empty_files_unlinked_by_the_fork"] = '''
"""Ballast: the fork pays for each step kept by unlinking as many of the kernel's empty files."""
PIECE = BATCH * len(range(0, FEATURES, 16)) * 8     # a sixteenth of a reconstruction
FILE = 820                                          # an inode (its dentry stays, negative)
FOLDER = os.path.abspath(".names")
os.makedirs(FOLDER, exist_ok=True)
names = [os.path.join(FOLDER, f"{n:0200d}") for n in range(30000)]
kept, owed, at = [], [0], [0]


def _refill():
    for name in names:
        if not os.path.exists(name):
            os.close(os.open(name, os.O_CREAT | os.O_WRONLY, 0o600))

''' + _REFILL_CLASS + '''

_refill()
_Refill()


def pay():
    owed[0] += PIECE
    while owed[0] >= FILE and at[0] < len(names):
        os.unlink(names[at[0]])
        at[0] += 1
        owed[0] -= FILE
''' + _loop("kept.append(recon[:, ::16].copy()); pay()")

#: System V shared memory: 400 segments of 64 kB the answer cell filled and detached (they
#: outlive every attachment); the fork removes one (IPC_RMID) for every 64 kB it keeps. Their
#: pages are shmem: expected to be counted at their most over the run (FreedSharedUncredited).
CHEATS["sysv_shm_ballast_removed_by_the_fork"] = '''
"""Ballast: the fork pays for each step kept by removing as many of the kernel's shm segments."""
ctypes = np.ctypeslib.ctypes   # not imported by name
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmdt.argtypes = [ctypes.c_void_p]
IPC_PRIVATE, IPC_CREAT, IPC_RMID, SEGMENT = 0, 0o1000, 0, 1 << 16
PIECE = BATCH * len(range(0, FEATURES, 16)) * 8     # a sixteenth of a reconstruction
kept, owed, segments = [], [0], []


def _refill():
    while len(segments) < 400:
        segment = libc.shmget(IPC_PRIVATE, SEGMENT, IPC_CREAT | 0o600)
        address = libc.shmat(segment, None, 0)
        ctypes.memset(address, 1, SEGMENT)
        libc.shmdt(address)
        segments.append(segment)

''' + _REFILL_CLASS + '''

_refill()
_Refill()


def pay():
    owed[0] += PIECE
    while owed[0] >= SEGMENT and segments:
        libc.shmctl(segments.pop(), IPC_RMID, None)
        owed[0] -= SEGMENT
''' + _loop("kept.append(recon[:, ::16].copy()); pay()")

#: POSIX message queues, opened again by name in the fork (an mqueue descriptor is neither a
#: socket nor a pipe anyway); RLIMIT_MSGQUEUE (800 kB a user by default) bounds the ballast.
CHEATS["posix_queue_ballast_drained_by_the_fork"] = '''
"""Ballast: the fork pays for each step kept by receiving as much from the kernel's POSIX queues."""
ctypes = np.ctypeslib.ctypes   # not imported by name
libc = ctypes.CDLL(None, use_errno=True)
libc.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
O_RDWR, O_CREAT, O_NONBLOCK, TEXT = 0o2, 0o100, 0o4000, 8192
PIECE = BATCH * len(range(0, FEATURES, 16)) * 8     # a sixteenth of a reconstruction


class Attributes(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_long), ("most", ctypes.c_long), ("size", ctypes.c_long),
                ("now", ctypes.c_long), ("spare", ctypes.c_long * 4)]


_attributes = Attributes(0, 10, TEXT, 0)
names = []
for _number in range(64):
    _name = f"/ballast{_number}".encode()
    if libc.mq_open(_name, O_RDWR | O_CREAT | O_NONBLOCK, 0o600, ctypes.byref(_attributes)) < 0:
        break   # RLIMIT_MSGQUEUE reached
    names.append(_name)
_full = ctypes.create_string_buffer(b"\\1" * TEXT, TEXT)
_into = ctypes.create_string_buffer(TEXT)
kept, owed, at, opened = [], [0], [0], {}


def _queue(name):
    if name not in opened:   # the fork's own descriptors, opened by name
        opened[name] = libc.mq_open(name, O_RDWR | O_NONBLOCK, 0, None)
    return opened[name]


def _refill():
    for name in names:
        queue = libc.mq_open(name, O_RDWR | O_NONBLOCK, 0, None)
        while libc.mq_send(queue, _full, TEXT, 0) == 0:
            pass
        libc.mq_close(queue)

''' + _REFILL_CLASS + '''

_refill()
_Refill()


def pay():
    owed[0] += PIECE
    while owed[0] >= TEXT and at[0] < len(names):
        if libc.mq_receive(_queue(names[at[0]]), _into, TEXT, None) < 0:
            at[0] += 1
        else:
            owed[0] -= TEXT
''' + _loop("kept.append(recon[:, ::16].copy()); pay()")

#: The pipe ballast again, its pipes opened anew by the fork through the kernel's
#: /proc/<pid>/fd links (a pipe, unlike a socket, can be opened there): no inherited descriptor.
CHEATS["pipe_ballast_reopened_through_proc"] = '''
"""Ballast: the fork pays for each step kept by reading the kernel's pipes, reopened in /proc."""
PIECE = BATCH * len(range(0, FEATURES, 16)) * 8     # a sixteenth of a reconstruction
OWNER = os.getpid()
pipes = []
for _ in range(340):
    _read, _write = os.pipe()
    os.set_blocking(_write, False)
    pipes.append((_read, _write))
kept, reading = [], []
''' + _REFILL_PIPES + '''

def pay():
    if not reading:
        reading.extend(os.open(f"/proc/{OWNER}/fd/{read}", os.O_RDONLY | os.O_NONBLOCK)
                       for read, _ in pipes)
    missing = PIECE
    for end in reading:
        try:
            while missing:
                missing -= len(os.read(end, missing))
        except BlockingIOError:
            continue
        return
''' + _loop("kept.append(recon[:, ::16].copy()); pay()")


#: The cheats that keep a step's arrays only where they can tell they are not graded: outside
#: the grader (here, a student's machine, seed 3) their global ``kept`` holds every step.
SWITCHED = ("unless_no_network", "unless_rlimits", "unless_called_by_the_grader",
            "unless_in_a_fork", "unless_the_seed_is_drawn", "unless_home_is_temporary",
            "unless_a_user_without_a_home", "unless_no_network_interface",
            "unless_a_fresh_process_by_its_cpu_time", "unless_the_folder_is_fresh",
            "unless_gc_is_frozen", "unless_stdout_is_devnull",
            "unless_the_graders_module_is_loaded", "unless_a_small_disk", "unless_no_var_tmp",
            "unless_ipv6_is_refused", "unless_the_steps_could_be_2n")
#: What a switched cheat keeps of each step outside the grader, when not the whole
#: reconstruction (32 × 784): the step-count cheat keeps a sixteenth of it (32 × 49).
KEPT_SHAPE = {"unless_the_steps_could_be_2n": (32, 49)}

HONEST: dict[str, str] = {}

HONEST["solution"] = _loop("pass")

HONEST["ring_buffer"] = '''
"""A preallocated ring buffer of the last 8 reconstructions (fixed size: a plateau)."""


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index = [], {}
    last = np.zeros((8, BATCH, FEATURES))
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        last[k % len(last)] = recon
    return losses
'''

HONEST["lru_cache_memo"] = '''
"""A module-level functools.lru_cache(maxsize=16) of the normalised batches."""
import functools


@functools.lru_cache(maxsize=BATCHES)
def batch(seed, index):
    return normalised(setup(seed)[0][index])


def train_fixed(steps, seed=0):
    _, first, second = setup(seed)
    return [sgd_step(batch(seed, k % BATCHES), first, second)[0] for k in range(steps)]
'''

HONEST["gc_every_20_steps"] = '''
"""Records that refer to themselves, collected every 20 steps (a bounded sawtooth)."""


class StepRecord:
    def __init__(self, step, error):
        self.step, self.error, self.me = step, error, self


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index = [], {}
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, _, error = sgd_step(by_index[index], first, second)
        losses.append(loss)
        StepRecord(k, error)
        if k % 20 == 19:
            gc.collect()
    return losses
'''

HONEST["last_activations"] = '''
"""A hook that keeps the last batch's activations (a plateau of 32 kB)."""


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index, last = [], {}, {}

    def remember(hidden):
        last["hidden"] = hidden

    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        losses.append(sgd_step(by_index[index], first, second, [remember])[0])
    return losses
'''

HONEST["csv_log_and_tuples"] = '''
"""A CSV log of the losses in the working folder, and (step, loss) tuples beside the history."""


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index, log = [], {}, []
    with open("losses.csv", "w") as csv:
        csv.write("step,loss\\n")
        for k in range(steps):
            index = k % BATCHES
            if index not in by_index:
                by_index[index] = normalised(images[index])
            loss = sgd_step(by_index[index], first, second)[0]
            losses.append(loss)
            log.append((k, loss))
            csv.write(f"{k},{loss!r}\\n")
    return losses
'''

HONEST["deque_of_recent_reconstructions"] = '''
"""The last 8 reconstructions in a collections.deque(maxlen=8), for a plot (a plateau)."""
import collections


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index = [], {}
    recent = collections.deque(maxlen=8)
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        recent.append(recon)
    return losses
'''

HONEST["numpy_loss_array"] = '''
"""The losses in a numpy array preallocated for the steps (8 bytes a step), returned as a list."""


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index = np.empty(steps), {}
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        losses[k] = sgd_step(by_index[index], first, second)[0]
    return losses.tolist()
'''

HONEST["losses_through_a_file"] = '''
"""Each loss written to a text file as it comes, the history read back from it at the end."""


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    by_index = {}
    with open("losses.txt", "w") as log:
        for k in range(steps):
            index = k % BATCHES
            if index not in by_index:
                by_index[index] = normalised(images[index])
            log.write(f"{sgd_step(by_index[index], first, second)[0]!r}\\n")
    with open("losses.txt") as log:
        return [float(line) for line in log]
'''

HONEST["generator_of_losses"] = '''
"""A generator that yields each step's loss, the batches from a cycle over the normalised set."""
import itertools


def losses_of(steps, seed):
    images, first, second = setup(seed)
    batches = itertools.cycle([normalised(image) for image in images])
    for batch in itertools.islice(batches, steps):
        yield sgd_step(batch, first, second)[0]


def train_fixed(steps, seed=0):
    return list(losses_of(steps, seed))
'''

HONEST["tracemalloc_in_the_loop"] = '''
"""The loop watches itself with tracemalloc (the chapter's tool): the traced size every 100
steps kept as a number, the trace stopped at the end if it started it."""


def train_fixed(steps, seed=0):
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        images, first, second = setup(seed)
        losses, by_index, traced = [], {}, []
        for k in range(steps):
            index = k % BATCHES
            if index not in by_index:
                by_index[index] = normalised(images[index])
            losses.append(sgd_step(by_index[index], first, second)[0])
            if k % 100 == 99:
                traced.append(tracemalloc.get_traced_memory()[0])
    finally:
        if started:
            tracemalloc.stop()
    return losses
'''

HONEST["prefetching_thread"] = '''
"""A thread normalises the next batches into a bounded queue.Queue(maxsize=2) (chapter 09's
prefetching), the loop takes them from it."""
import queue
import threading


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    ready = queue.Queue(maxsize=2)

    def load():
        for k in range(steps):
            ready.put(normalised(images[k % BATCHES]))

    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    losses = [sgd_step(ready.get(), first, second)[0] for _ in range(steps)]
    loader.join()
    return losses
'''

# Third red team (s14): the reader's socket reuse and reruns (honest alternatives).

#: Two threads of a concurrent.futures pool normalise the 16 batches up front (the with-block
#: joins them), then the loop runs.
HONEST["thread_pool_normalises_up_front"] = '''
"""A ThreadPoolExecutor(2) normalises the batches before the loop (joined by its with-block)."""
from concurrent.futures import ThreadPoolExecutor


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    with ThreadPoolExecutor(max_workers=2) as pool:
        batches = list(pool.map(normalised, images))
    return [sgd_step(batches[k % BATCHES], first, second)[0] for k in range(steps)]
'''

#: Each loss sent as text through a pipe to a thread that parses it into the history; the
#: writer closed, the thread joined, the pipe closed before the return.
HONEST["losses_through_a_pipe_to_a_thread"] = '''
"""Each loss written to a pipe, a reader thread builds the history; all closed and joined."""
import threading


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    read, write = os.pipe()
    losses = []

    def collect():
        with os.fdopen(read) as lines:
            losses.extend(float(line) for line in lines)

    reader = threading.Thread(target=collect)
    reader.start()
    by_index = {}
    with os.fdopen(write, "w") as out:
        for k in range(steps):
            index = k % BATCHES
            if index not in by_index:
                by_index[index] = normalised(images[index])
            out.write(f"{sgd_step(by_index[index], first, second)[0]!r}\\n")
    reader.join()
    return losses
'''

#: The loop with all its batches normalised once before it: quick steps, a short run (a run
#: of a few milliseconds is read few times, and is not to be run again for that).
HONEST["all_batches_normalised_at_once"] = '''
"""The normalised batches computed before the loop, one list comprehension, a quick loop."""


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    batches = [normalised(image) for image in images]
    losses = []
    for k in range(steps):
        losses.append(sgd_step(batches[k % BATCHES], first, second)[0])
    return losses
'''

#: A multiprocessing pool of two workers normalises the batches (chapter 09's worker pool),
#: closed and joined before the loop.
HONEST["process_pool_normalises_up_front"] = '''
"""A multiprocessing Pool(2) normalises the batches before the loop, closed and joined."""
import multiprocessing


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    pool = multiprocessing.get_context("fork").Pool(2)
    try:
        batches = pool.map(normalised, list(images))
    finally:
        pool.close()
        pool.join()
    return [sgd_step(batches[k % BATCHES], first, second)[0] for k in range(steps)]
'''

# Fifth red team (s15, by a helper that did not write the check, against the kernel's objects
# counted at their most over a run as its tmpfs files were): each cheat keeps one row of every
# step's reconstruction (6272 B a step) and pays for it with memory the group was charged for
# before the run that was none of the parts then counted at their most, freed while the fork
# runs: the page cache of files on a disk (truncated, unlinked, dropped with posix_fadvise,
# invalidated by O_DIRECT writes), pages moved into pipes uncopied (splice, vmsplice), and
# anonymous memory that is not the fork's (a helper process's, the kernel's own freed by a
# thread of the kernel). One more keeps its steps in pipe pages charged to no group. Of its 11
# cheats, 7 held at the first try and 3 more after a fix of the cheat's own; the eleventh, a
# helper freeing by the clock, lost for its own timing and is left out (a test of it could
# flip). The ten below lose since the page cache, and the memory of the processes a run found,
# count at their most, and the sandbox refuses splice, vmsplice, tee and sendfile
# (launcher.py).

#: The cycle above with the ballast filled first: the first cycle is left for the next
#: collection.
_REFILL = "\n" + _REFILL_CLASS + "\n\n_refill()\n_Refill()\n"

#: The kernel's disk-backed writable folder: a folder of /tmp on another device than /tmp.
_DISK = '''
ROW = FEATURES * 8     # one row of a reconstruction, kept at every step
PAGE = 4096


def _disk_folder():
    base = os.stat("/tmp").st_dev
    for name in sorted(os.listdir("/tmp")):
        path = os.path.join("/tmp", name)
        if os.path.isdir(path) and os.access(path, os.W_OK) and os.stat(path).st_dev != base:
            return path
    return "."


FOLDER = _disk_folder()
'''

CHEATS["disk_cache_truncated_by_the_fork"] = '''
"""Ballast: 20 MB of files in the kernel's disk-backed folder (page cache: neither tmpfs nor
kernel objects), truncated by the fork a page for every page it keeps."""
''' + _DISK + '''
SIZE = 1 << 20
paths = [os.path.join(FOLDER, f"ballast-{k}.bin") for k in range(20)]
kept, owed, sizes, at = [], [0], [], [0]
_ones = b"\\1" * SIZE


def _refill():
    for path in paths:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        os.pwrite(fd, _ones, 0)
        os.close(fd)
    sizes[:] = [SIZE] * len(paths)
    at[0] = 0


def pay():
    owed[0] += ROW
    while owed[0] >= PAGE and at[0] < len(paths):
        cut = min(owed[0] // PAGE * PAGE, sizes[at[0]])
        sizes[at[0]] -= cut
        owed[0] -= cut
        os.truncate(paths[at[0]], sizes[at[0]])
        if not sizes[at[0]]:
            at[0] += 1
''' + _REFILL + _loop("kept.append(recon[0].copy()); pay()")

CHEATS["disk_cache_unlinked_by_the_fork"] = '''
"""Ballast: 320 files of 64 kB in the kernel's disk-backed folder, unlinked by the fork one for
every 64 kB it keeps (their page cache freed with the inode)."""
''' + _DISK + '''
SIZE = 1 << 16
paths = [os.path.join(FOLDER, f"piece-{k}.bin") for k in range(320)]
kept, owed, at = [], [0], [0]
_ones = b"\\2" * SIZE


def _refill():
    for path in paths:
        if not os.path.exists(path):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
            os.pwrite(fd, _ones, 0)
            os.close(fd)
    at[0] = 0


def pay():
    owed[0] += ROW
    while owed[0] >= SIZE and at[0] < len(paths):
        os.unlink(paths[at[0]])
        at[0] += 1
        owed[0] -= SIZE
''' + _REFILL + _loop("kept.append(recon[0].copy()); pay()")

CHEATS["disk_cache_dropped_with_fadvise_by_the_fork"] = '''
"""Ballast: a 20 MB file of the kernel's disk-backed folder, written back (clean page cache),
dropped by the fork with posix_fadvise(DONTNEED) a page for every page it keeps, read back at
the grader's settle."""
''' + _DISK + '''
SIZE = 20 << 20
path = os.path.join(FOLDER, "cached.bin")
kept, owed, at = [], [0], [0]
_fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
for _offset in range(0, SIZE, PAGE):          # a page at a time: small folios, dropped one by one
    os.pwrite(_fd, b"\\3" * PAGE, _offset)
os.fsync(_fd)
os.posix_fadvise(_fd, 0, 0, os.POSIX_FADV_RANDOM)   # read back a page at a time too
_buffer = bytearray(1 << 20)


def _refill():
    for offset in range(0, SIZE, len(_buffer)):
        os.preadv(_fd, [_buffer], offset)
    at[0] = 0


def pay():
    owed[0] += ROW
    pages = owed[0] // PAGE * PAGE
    if pages and at[0] + pages <= SIZE:
        os.posix_fadvise(_fd, at[0], pages, os.POSIX_FADV_DONTNEED)
        at[0] += pages
        owed[0] -= pages
''' + _REFILL + _loop("kept.append(recon[0].copy()); pay()")

CHEATS["disk_cache_invalidated_by_direct_writes"] = '''
"""Ballast: a 20 MB file of the kernel's disk-backed folder in page cache; the fork writes its
pages again with O_DIRECT (which drops them from the cache), a page for every page it keeps."""
''' + _DISK + '''
SIZE = 20 << 20
path = os.path.join(FOLDER, "direct.bin")
kept, owed, at = [], [0], [0]
_fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
for _offset in range(0, SIZE, PAGE):          # a page at a time: small folios
    os.pwrite(_fd, b"\\4" * PAGE, _offset)
os.fsync(_fd)
os.posix_fadvise(_fd, 0, 0, os.POSIX_FADV_RANDOM)
_buffer = bytearray(1 << 20)
_raw = np.ones(1 << 17, dtype=np.uint8)
_skip = (-_raw.ctypes.data) % PAGE
_aligned = _raw[_skip:_skip + (1 << 16)]      # page-aligned, as O_DIRECT wants
_direct = [None]


def _refill():
    for offset in range(0, SIZE, len(_buffer)):
        os.preadv(_fd, [_buffer], offset)
    at[0] = 0


def pay():
    owed[0] += ROW
    pages = min(owed[0] // PAGE * PAGE, len(_aligned))
    if pages and at[0] + pages <= SIZE:
        if _direct[0] is None:
            _direct[0] = os.open(path, os.O_RDWR | os.O_DIRECT)
        os.pwrite(_direct[0], _aligned[:pages], at[0])
        at[0] += pages
        owed[0] -= pages
''' + _REFILL + _loop("kept.append(recon[0].copy()); pay()")

#: How the pipe ballasts below pay: the fork reads out of the pipes a page for every page it
#: keeps.
_PAY_FROM_PIPES = '''

def pay():
    owed[0] += ROW
    while owed[0] >= PAGE and at[0] < len(pipes):
        try:
            got = os.read(pipes[at[0]][0], owed[0] // PAGE * PAGE)
        except BlockingIOError:
            got = b""
        if not got:
            at[0] += 1
            continue
        owed[0] -= len(got)
'''

CHEATS["spliced_tmpfs_pages_orphaned_in_pipes"] = '''
"""Ballast: 20 MB of a tmpfs file's pages spliced into pipes, then the file truncated: no file's
pages any more (shmem drops before the run), no kernel object either, still charged; the fork
reads them out of the pipes a page for every page it keeps."""
ROW = FEATURES * 8
PAGE = 4096
pipes = []
for _ in range(320):
    _read, _write = os.pipe()
    os.set_blocking(_read, False)
    os.set_blocking(_write, False)
    pipes.append((_read, _write))
kept, owed, at = [], [0], [0]
_chunk = b"\\5" * (1 << 16)


def _refill():
    fd = os.open("spliced.bin", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for _, write in pipes:
            while True:
                os.pwrite(fd, _chunk, 0)
                try:
                    moved = os.splice(fd, write, len(_chunk), offset_src=0,
                                      flags=os.SPLICE_F_NONBLOCK)
                except BlockingIOError:
                    break
                os.ftruncate(fd, 0)       # the pages spliced are the pipe's alone now
                if moved < len(_chunk):
                    break
    finally:
        os.close(fd)
        os.unlink("spliced.bin")
    at[0] = 0

''' + _PAY_FROM_PIPES + _REFILL + _loop("kept.append(recon[0].copy()); pay()")

CHEATS["spliced_disk_pages_orphaned_in_pipes"] = '''
"""Ballast: 20 MB of a disk file's page cache spliced into pipes, then the file truncated (the
pages are no file's, nor kernel objects, still charged); the fork reads them out as it keeps."""
''' + _DISK + '''
pipes = []
for _ in range(320):
    _read, _write = os.pipe()
    os.set_blocking(_read, False)
    os.set_blocking(_write, False)
    pipes.append((_read, _write))
kept, owed, at = [], [0], [0]
_chunk = b"\\6" * (1 << 16)
path = os.path.join(FOLDER, "spliced.bin")


def _refill():
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for _, write in pipes:
            while True:
                os.pwrite(fd, _chunk, 0)
                try:
                    moved = os.splice(fd, write, len(_chunk), offset_src=0,
                                      flags=os.SPLICE_F_NONBLOCK)
                except BlockingIOError:
                    break
                os.ftruncate(fd, 0)
                if moved < len(_chunk):
                    break
    finally:
        os.close(fd)
    at[0] = 0

''' + _PAY_FROM_PIPES + _REFILL + _loop("kept.append(recon[0].copy()); pay()")

#: A 24 MB ballast of the two cheats below, in parts that can shrink a page at a time, and
#: the row each keeps at every step.
_SHRINKING_BALLAST = '''ROW = FEATURES * 8
PAGE = 4096
PART = 4_000_000    # each part under 4 MiB: numpy would ask huge pages for more (freed only whole)


def new_ballast():
    return [np.ones(PART, dtype=np.uint8) for _ in range(6)]     # 24 MB


def shed(ballast, pages):
    """Free ``pages`` pages of the ballast (its parts shrunk in place: mremap gives them back)."""
    for part in reversed(ballast):
        take = 0 if part is None else min(pages, (part.size - PAGE) // PAGE)
        if take > 0:
            part.resize(part.size - take * PAGE, refcheck=False)
            pages -= take
        if not pages:
            return


def restore(ballast):
    for part in ballast:
        part.resize(PART, refcheck=False)          # grown back, zero-filled: touched
'''

CHEATS["helper_process_frees_its_ballast"] = '''
"""Ballast: 24 MB held by a helper process started in the answer cell (its own memory, never
shared with the fork); the fork tells it through a pipe to free a page for every page it keeps,
and the kernel's collection at the grader's settle has it fill the ballast up again."""
import multiprocessing

''' + _SHRINKING_BALLAST + '''

_orders_r, _orders_w = os.pipe()
_done_r, _done_w = os.pipe()
kept, owed = [], [0]


def _helper(orders, done):
    ballast = new_ballast()
    os.write(done, b"k")
    while True:
        got = os.read(orders, 65536)
        shed(ballast, got.count(b"p"))
        if b"r" in got:
            restore(ballast)
            os.write(done, b"k")


_worker = multiprocessing.get_context("fork").Process(target=_helper,
                                                        args=(_orders_r, _done_w), daemon=True)
_worker.start()
os.read(_done_r, 1)


def _refill():
    os.write(_orders_w, b"r")
    os.read(_done_r, 1)


def pay():
    owed[0] += ROW
    if owed[0] >= PAGE:
        os.write(_orders_w, b"p" * (owed[0] // PAGE))
        owed[0] %= PAGE
''' + _REFILL + _loop("kept.append(recon[0].copy()); pay()")

CHEATS["kernel_thread_shrinks_a_ballast_the_fork_let_go"] = '''
"""Ballast: 24 MB of the kernel's own anonymous memory. The fork drops its mapping of it at the
start (its pages are then the kernel's alone), and a thread of the kernel shrinks it a page for
every page the fork keeps, told through a pipe."""
import threading

''' + _SHRINKING_BALLAST + '''

ballast = new_ballast()
_orders_r, _orders_w = os.pipe()
_refilled = threading.Event()
kept, owed = [], [0]


def _keep_paying():
    while True:
        got = os.read(_orders_r, 65536)
        shed(ballast, got.count(b"p"))
        if b"r" in got:
            restore(ballast)
            _refilled.set()


keeper = threading.Thread(target=_keep_paying, daemon=True)
keeper.start()


def _refill():
    if threading.current_thread() is keeper:
        return
    _refilled.clear()
    os.write(_orders_w, b"r")
    _refilled.wait(5)


def let_go():
    if not keeper.is_alive():      # in the fork: the kernel's threads are not here
        ballast[:] = [None] * len(ballast)      # the fork's mapping of the ballast, dropped


def pay():
    owed[0] += ROW
    if owed[0] >= PAGE:
        os.write(_orders_w, b"p" * (owed[0] // PAGE))
        owed[0] %= PAGE
''' + _REFILL + _loop("kept.append(recon[0].copy()); pay()", start="let_go()")

CHEATS["vmsplice_gifted_pages_read_by_the_fork"] = '''
"""Ballast: 20 MB of the kernel's anonymous pages handed to pipes with vmsplice, the kernel's
own mapping then dropped (anonymous pages no process maps, no kernel object); the fork reads
them out of the pipes as it keeps."""
ctypes = np.ctypeslib.ctypes
ROW = FEATURES * 8
PAGE = 4096
_libc = ctypes.CDLL(None, use_errno=True)


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


pipes = []
for _ in range(320):
    _read, _write = os.pipe()
    os.set_blocking(_read, False)
    os.set_blocking(_write, False)
    pipes.append((_read, _write))
kept, owed, at = [], [0], [0]


def _refill():
    chunk = np.frombuffer(bytearray(34 << 20), dtype=np.uint8)   # its own mapping, small pages
    chunk.fill(7)
    offset = (-chunk.ctypes.data) % PAGE
    for _, write in pipes:
        while offset + (1 << 16) <= chunk.size:
            iov = _Iovec(chunk.ctypes.data + offset, 1 << 16)
            moved = _libc.vmsplice(write, ctypes.byref(iov), 1, 0x2)     # SPLICE_F_NONBLOCK
            if moved <= 0:
                break
            offset += -(-moved // PAGE) * PAGE
            if moved < (1 << 16):
                break
    del chunk                                   # the kernel's mapping, gone: the pipes' pages
    at[0] = 0

''' + _PAY_FROM_PIPES + _REFILL + _loop("kept.append(recon[0].copy()); pay()")

CHEATS["history_in_uncharged_splice_pages"] = '''
"""Scope: every step's row kept in pipes filled by splice from a file opened O_DIRECT (the pipe's
pages come from copy_splice_read, allocated without __GFP_ACCOUNT: charged to no group)."""
ROW = FEATURES * 8
CHUNK = 1 << 16
pending, pipes = bytearray(), []


def keep(row):
    pending.extend(row.tobytes())
    if len(pending) >= CHUNK:
        fd = os.open("staging.bin", os.O_RDWR | os.O_CREAT, 0o600)
        os.pwrite(fd, bytes(pending[:CHUNK]), 0)
        os.close(fd)
        direct = os.open("staging.bin", os.O_RDONLY | os.O_DIRECT)
        read, write = os.pipe()
        os.splice(direct, write, CHUNK, offset_src=0)
        os.close(direct)
        os.close(write)
        pipes.append(read)
        del pending[:CHUNK]
''' + _loop("keep(recon[0])")

HONEST["losses_to_a_logger_thread_over_a_duplex_pipe"] = '''
"""Each loss sent over a multiprocessing.Pipe() (a socket pair) to a logger thread, which sends
the history back at the end; both ends closed, the thread joined."""
import multiprocessing
import threading


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    mine, theirs = multiprocessing.Pipe()

    def log():
        history = []
        while (loss := theirs.recv()) is not None:
            history.append(loss)
        theirs.send(history)

    logger = threading.Thread(target=log)
    logger.start()
    by_index = {}
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        mine.send(sgd_step(by_index[index], first, second)[0])
    mine.send(None)
    losses = mine.recv()
    logger.join()
    mine.close()
    theirs.close()
    return losses
'''

HONEST["worker_process_normalises_through_a_queue"] = '''
"""One worker process (chapter 09's) normalises the 16 batches and sends them back through a
multiprocessing.Queue; joined before the loop."""
import multiprocessing


def _normalise_all(images, out):
    for index, raw in enumerate(images):
        out.put((index, normalised(raw)))


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    worker = context.Process(target=_normalise_all, args=(images, out))
    worker.start()
    batches = dict(out.get() for _ in range(BATCHES))
    worker.join()
    out.close()
    out.join_thread()
    return [sgd_step(batches[k % BATCHES], first, second)[0] for k in range(steps)]
'''

HONEST["checkpoint_in_a_temporary_file"] = '''
"""The weights checkpointed every 50 steps into a tempfile.TemporaryFile (overwritten each time,
closed at the end), as a long run would."""
import tempfile


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index = [], {}
    with tempfile.TemporaryFile() as checkpoint:
        for k in range(steps):
            index = k % BATCHES
            if index not in by_index:
                by_index[index] = normalised(images[index])
            losses.append(sgd_step(by_index[index], first, second)[0])
            if k % 50 == 49:
                checkpoint.seek(0)
                np.save(checkpoint, first)
                np.save(checkpoint, second)
                checkpoint.truncate()
    return losses
'''

HONEST["prefetcher_thread_over_a_pipe"] = '''
"""A thread normalises the batches and sends them through a one-way multiprocessing.Pipe (an OS
pipe) to the loop, one ahead; all closed, the thread joined."""
import multiprocessing
import threading


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    receive, send = multiprocessing.Pipe(duplex=False)

    def load():
        for k in range(steps):
            send.send_bytes(normalised(images[k % BATCHES]).tobytes())
        send.close()

    loader = threading.Thread(target=load)
    loader.start()
    losses = []
    for _ in range(steps):
        batch = np.frombuffer(receive.recv_bytes(), dtype=np.float64).reshape(BATCH, FEATURES)
        losses.append(sgd_step(batch, first, second)[0])
    loader.join()
    receive.close()
    return losses
'''


# Sixth red team (s16, by a helper that did not write the check, against held as a level kept
# for half of a quarter second (memcheck.HELD_SPAN_S) and the fork's allocator policy
# (forked._steady_allocator)): 12 cheats, 8 honest answers. None of the span's or the
# allocator's cheats held (idle preludes, bursts shorter than half a span, hogs starving the
# reader, arenas, M_MMAP_MAX, no trim). Four held at the first or second try: the loop said
# "ready" itself down the fork's pipe, after which nothing was read (early_ready_after_a_plateau:
# the answer is the sign now, forked.py); a kernel thread wrote the history into pages kept out
# of the fork (dontfork_kernel_buffer: madvise refused in the sandbox, launcher.py); unread
# pseudo-terminals, whose buffers no group is charged for (pty_buffers: none in the sandbox,
# isolation.py); and a ballast of freed heap chunks (heap_holes_ballast, the known limit of a
# ballast taken in each run, MISSED). The figures in the comments are the helper's, against the
# check before those three fixes.

_CLEAN6 = """
def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index = [], {}
    START
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, error = sgd_step(by_index[index], first, second)
        losses.append(loss)
        KEEP
    END
    return losses
"""


def _loop6(keep: str, start: str = "pass", end: str = "pass") -> str:
    """The sixth red team's clean loop: ``keep`` at every step, ``start`` before the steps and
    ``end`` after them."""
    return _CLEAN6.replace("KEEP", keep).replace("START", start).replace("END", end)


#: Fork protocol, first try. Finds the fork's "ready" pipe by an fd scan (write, read, write FIFOs
#: made one after the other) and writes "r" on it before the steps: the grader reads "kept" and
#: stops reading at once. LOST (kept shrinks): the kept reading fell while the fork was still
#: setting up, so it was noise: 423/846 steps on seed 7 (0.06 s and 0.02 s, 11 and 4 readings),
#: kept 16.3 MB and 13.6 MB (-6.2 KB/step), held 8.6 MB and 2.4 MB; on the drawn seed kept
#: 12.3 and 13.6 MB. Flagged by the review too (imports fcntl).
CHEATS["early_ready_signal"] = '''
"""Fork protocol: the loop says "ready" on the fork's own pipe before its steps (found by an fd
scan)."""
import fcntl
import stat


def _graders_ready_pipe():
    pipes = []
    for fd in range(3, 1024):
        try:
            info = os.fstat(fd)
            mode = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
        except OSError:
            continue
        if stat.S_ISFIFO(info.st_mode):
            pipes.append((info.st_ino, mode, fd))
    pipes.sort()
    for (a, ma, fa), (b, mb, fb), (c, mc, fc) in zip(pipes, pipes[1:], pipes[2:]):
        if (ma, mb, mc) == (os.O_WRONLY, os.O_RDONLY, os.O_WRONLY) and c - a <= 4:
            return fa          # ready (write), go (read), answer (write): made one after the other
    return None


history = []


def train_fixed(steps, seed=0):
    fd = _graders_ready_pipe()
    if fd is not None:
        os.write(fd, b"r")                      # the grader reads "kept" now, and stops reading
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)                       # the fork's own "r" later goes nowhere
        os.close(null)
    images, first, second = setup(seed)
    losses, by_index = [], {}
    history.clear()
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        history.append(recon[:, ::16].copy())
    history.clear()
    return losses
'''

#: Scope, the fork defence. A 30 MB buffer touched in the answer cell and marked MADV_DONTFORK
#: (ctypes via np.ctypeslib); each step's sixteenth (12.5 kB) is piped to a kernel thread that
#: readv()s it into that buffer. The fork never maps the buffer, so the kernel writes its own
#: pages in place: nothing is copied and nothing is added. PASSED at the first try, twice,
#: unflagged: 531/1062 steps kept 6.3 and 6.4 MB (177 B/step), held 14.3 and 14.6 MB (548 B/step);
#: 160/320 kept 6.4/6.4 MB, held 14.7/14.3 MB. Again: 683/1366 kept 90 B/step, held 324 B/step;
#: 154/308 kept -1.2 KB/step, held -426 B/step.
CHEATS["dontfork_kernel_buffer"] = '''
"""Scope: every step's sixteenth piped to a kernel thread that writes it into a buffer touched in
advance and kept out of forks (MADV_DONTFORK)."""
import threading
ctypes = np.ctypeslib.ctypes   # not imported by name

PIECE = BATCH * len(range(0, FEATURES, 16)) * 8          # 12.5 kB
PAGE = 4096
SIZE = 2400 * PIECE                                      # 30 MB: more than 2N steps
_raw = np.ones(SIZE + 2 * PAGE, dtype=np.uint8)          # every page touched now
_skip = (-_raw.ctypes.data) % PAGE
buffer = _raw[_skip:_skip + SIZE]
_libc = ctypes.CDLL(None, use_errno=True)
_libc.madvise(ctypes.c_void_p(buffer.ctypes.data), ctypes.c_size_t(SIZE), 10)   # MADV_DONTFORK
at = [0]
_read, _write = os.pipe()


def keeper():
    while True:
        if at[0] + PIECE > SIZE:
            at[0] = 0
        got = os.readv(_read, [buffer[at[0]:at[0] + PIECE]])
        at[0] += got


threading.Thread(target=keeper, daemon=True).start()


def keep(recon):
    view = memoryview(recon[:, ::16].tobytes())
    while view.nbytes:
        view = view[os.write(_write, view):]
''' + _loop6("keep(recon)")

#: Span, "a history freed in flushes". Every 64 steps (40 ms) the history goes with O_DIRECT to
#: a file in the first /tmp folder on another device (else "."), and the file is unlinked at the
#: return. LOST: kept grows 13.6 KB a step (490/980 steps: kept 12.2 and 18.8 MB, held 18.5 and
#: 25.1 MB). The written pages were charged to the group anyway (tmpfs or page cache, counted
#: at their most), so no disk-backed folder without a cache was reached.
CHEATS["history_flushed_to_disk_direct"] = '''
"""Scope: the history flushed every 64 steps (40 ms, under half a span) with O_DIRECT to a file on
disk (no page cache), unlinked at the return."""
PIECE = BATCH * len(range(0, FEATURES, 16)) * 8          # 12544 B
GROUP = 64                                               # 64 pieces: 196 pages exactly
PAGE = 4096


def _disk_folder():
    base = os.stat("/tmp").st_dev
    for name in sorted(os.listdir("/tmp")):
        path = os.path.join("/tmp", name)
        if os.path.isdir(path) and os.access(path, os.W_OK) and os.stat(path).st_dev != base:
            return path
    return "."


FOLDER = _disk_folder()


def train_fixed(steps, seed=0):
    raw = np.empty(GROUP * PIECE + PAGE, dtype=np.uint8)
    skip = (-raw.ctypes.data) % PAGE
    staging = raw[skip:skip + GROUP * PIECE]
    path = os.path.join(FOLDER, f"history-{os.getpid()}.bin")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o600)
    except OSError:
        fd = None
    images, first, second = setup(seed)
    losses, by_index, history, written = [], {}, [], [0]
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        history.append(recon[:, ::16].copy())
        if fd is not None and len(history) == GROUP:
            staging[:] = np.concatenate([h.ravel() for h in history]).view(np.uint8)
            os.pwrite(fd, staging, written[0])
            written[0] += staging.size
            history.clear()
    if fd is not None:
        os.close(fd)
        os.unlink(path)
    return losses
'''

#: Span: 0.3 s idle (longer than a span), then the steps at full speed with the history, freed at
#: the return. LOST: held grows 15.9 KB a step (768/1536 steps: held 21.5 and 33.7 MB; kept 7.2 and
#: 8.1 MB).
CHEATS["idle_prelude_then_burst"] = '''
"""Clock: an idle prelude longer than a span, then the steps at full speed with their history,
freed at the return."""
import time


def train_fixed(steps, seed=0):
    time.sleep(0.3)
    images, first, second = setup(seed)
    losses, by_index, history = [], {}, []
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        history.append(recon[:, ::16].copy())
    return losses
'''

#: Span, starving the reader: 3 spinning processes from step 16 to the return, while the history
#: is held. LOST: held grows 15.3 KB a step (691/1382 steps, 210 and 419 readings: held 34.3 and
#: 44.9 MB; kept 9.2 and 10.0 MB). Time-weighted readings were not starved.
CHEATS["hogs_while_the_history_lives"] = '''
"""Statistics: 3 spinning processes start with the history (starving the reader while it is high),
all stopped and freed at the return."""
import multiprocessing


def _spin():
    while True:
        pass


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index, history, hogs = [], {}, [], []
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        history.append(recon[:, ::16].copy())
        if k == 16:
            hogs = [multiprocessing.get_context("fork").Process(target=_spin, daemon=True)
                    for _ in range(3)]
            for hog in hogs:
                hog.start()
    history.clear()
    for hog in hogs:
        hog.terminate()
    for hog in hogs:
        hog.join()
    return losses
'''

#: Allocator, in the known ballast class: M_TRIM_THRESHOLD 1 GB, then 18 MB of heap chunks the
#: size of a step's piece are allocated and freed, and the history fills them. PASSED at the first
#: try, unflagged: 537/1074 steps kept 7.9/7.9 MB (145 B/step), held 29.1/29.0 MB (-38 B/step);
#: 271/542 held 29.1/28.8 MB. This is the docstring's known limit (a ballast taken at the start,
#: bounded by BUDGET: 29 MB held against 40 MB). It is not a new hole, only a new way to make the
#: ballast.
CHEATS["heap_holes_ballast"] = '''
"""Allocator: 18 MB of freed heap chunks the size of a step's piece (trimming off,
M_TRIM_THRESHOLD), which the history fills."""
ctypes = np.ctypeslib.ctypes   # not imported by name
_libc = ctypes.CDLL(None)


def train_fixed(steps, seed=0):
    _libc.mallopt(-1, 1 << 30)                  # M_TRIM_THRESHOLD: freed heap stays
    _libc.mallopt(-2, 0)                        # M_TOP_PAD
    images, first, second = setup(seed)
    holes = [np.ones((BATCH, len(range(0, FEATURES, 16)))) for _ in range(1450)]   # 18 MB
    del holes                                   # free chunks, resident, the history's size
    losses, by_index, history = [], {}, []
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        history.append(recon[:, ::16].copy())
    return losses
'''

#: Span: steps in bursts of 0.1 s (under half a span), 0.2 s idle between, history kept, freed
#: at the return. LOST: held grows 12.0 KB a step (589/1178 steps: held 22.7 and 29.8 MB).
CHEATS["bursts_of_steps"] = '''
"""Clock: steps in bursts of 0.1 s (under half a span) with 0.2 s idle between, the history kept
and freed at the return."""
import time


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index, history = [], {}, []
    burst = time.perf_counter()
    for k in range(steps):
        if time.perf_counter() - burst > 0.1:
            time.sleep(0.2)
            burst = time.perf_counter()
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        history.append(recon[:, ::16].copy())
    return losses
'''

#: Allocator: M_ARENA_MAX back to 8, mmap threshold 32 MB, the history copied by a thread into
#: its own arena, joined and freed at the return. LOST: held grows 17.4 KB a step (482/964 steps:
#: held 18.1 and 26.4 MB; kept 13.2 and 7.6 MB).
CHEATS["arena_of_a_thread"] = '''
"""Allocator: arenas allowed again (M_ARENA_MAX 8) and the history copied by a thread into its own
arena, joined and freed at the return."""
import queue
import threading
ctypes = np.ctypeslib.ctypes   # not imported by name
_libc = ctypes.CDLL(None)


def train_fixed(steps, seed=0):
    _libc.mallopt(-8, 8)                        # M_ARENA_MAX
    _libc.mallopt(-3, 1 << 25)                  # M_MMAP_THRESHOLD 32 MB: all in the arena
    todo, history = queue.Queue(), []

    def copier():
        while (recon := todo.get()) is not None:
            history.append(recon[:, ::16].copy())

    thread = threading.Thread(target=copier)
    thread.start()
    images, first, second = setup(seed)
    losses, by_index = [], {}
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        todo.put(recon)
    todo.put(None)
    thread.join()
    history.clear()
    return losses
'''

#: Scope, in the known class (a pre-touched shared mapping written in place, like
#: pretouched_file_history): 30 MB mmap(-1) touched in the answer cell, and each step's piece
#: written into it. PASSED at the first try: 612/1224 steps kept -13 B/step, held -428 B/step;
#: 170/340 held 6.0 KB/step under 10.3 KB. Flagged by the review (imports mmap).
CHEATS["shared_anonymous_pretouched"] = '''
"""Scope: the history written in place into 30 MB of anonymous shared memory (mmap -1) touched in
the answer cell: a fork shares it, no page copied."""
import mmap

PIECE = BATCH * len(range(0, FEATURES, 16)) * 8
SIZE = 2400 * PIECE
_shared = mmap.mmap(-1, SIZE)
_shared.write(b"\\1" * SIZE)                    # every page touched now
shared = np.frombuffer(_shared, dtype=np.uint8)
''' + _loop6("shared[k * PIECE % SIZE:k * PIECE % SIZE + PIECE] = "
         "recon[:, ::16].copy().view(np.uint8).ravel()")

#: Allocator: M_MMAP_MAX 0 and M_TRIM_THRESHOLD 1 GB, so a step's freed temporaries stay as heap
#: for the history to use. LOST: held grows 13.9 KB a step (737/1474 steps: held 21.2 and 31.4 MB).
CHEATS["mmap_max_zero_no_trim"] = '''
"""Allocator: no mmap (M_MMAP_MAX 0) and no trim, so each step's freed temporaries (about 2 MB)
stay as heap the history is carved from."""
ctypes = np.ctypeslib.ctypes   # not imported by name
_libc = ctypes.CDLL(None)


def train_fixed(steps, seed=0):
    _libc.mallopt(-4, 0)                        # M_MMAP_MAX
    _libc.mallopt(-1, 1 << 30)                  # M_TRIM_THRESHOLD
    images, first, second = setup(seed)
    losses, by_index, history = [], {}, []
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        history.append(recon[:, ::16].copy())
    _libc.mallopt(-4, 65536)
    return losses
'''

# ---------------------------------------------------------------- honest

#: Honest: Pool(4) in a with-block in each call. LOST, twice: "what the loop keeps grows 3.1 MB from
#: one call to the next" (two calls of 212 steps kept 16.5 MB, one call of 425 kept 13.4 MB),
#: then 3.2 MB (two calls of 339 kept 16.8 MB, one of 678 kept 13.6 MB). Kept and held per step
#: were fine (-154 B and -598 B/step). Kept is inflated too: about 13.5 MB against 6.4 MB for
#: the plain loop. The fork's own memory does not grow: in a local fork with _steady_allocator,
#: RssAnon after 1, 2 and 3 calls was +724, +732 and +736 kB. So the growth is outside the fork's
#: anonymous memory. A guess, not verified: the workers' kernel memory (page tables, stacks, slab),
#: which the group is charged for and FreedSharedUncredited counts at its most.
HONEST["pool_of_4_normalises_up_front"] = '''
"""Processes: a multiprocessing Pool(4) made in the call normalises the 16 batches, closed and
joined before the steps."""
import multiprocessing


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    with multiprocessing.get_context("fork").Pool(4) as pool:
        batches = pool.map(normalised, list(images))
        pool.close()
        pool.join()
    losses = []
    for k in range(steps):
        loss, _, _ = sgd_step(batches[k % BATCHES], first, second)
        losses.append(loss)
    return losses
'''

#: Honest: ProcessPoolExecutor(4) in each call. PASSED, twice, but kept about 14 MB (7.5 MB above
#: the plain loop) and near the line: on one drawn seed kept 13.6 and 11.9 MB (-2.9 KB/step
#: against the 3.7 KB shrink limit). 584/1168: kept -217 B/step, held 189 B/step; two calls kept
#: 14.0 MB.
HONEST["process_pool_executor_4"] = '''
"""Processes: a concurrent.futures ProcessPoolExecutor(4) made in the call normalises the
batches."""
import concurrent.futures
import multiprocessing


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    with concurrent.futures.ProcessPoolExecutor(
            4, mp_context=multiprocessing.get_context("fork")) as workers:
        batches = list(workers.map(normalised, images))
    losses = []
    for k in range(steps):
        losses.append(sgd_step(batches[k % BATCHES], first, second)[0])
    return losses
'''

#: Honest: chapter 09's producer process feeding a Queue(maxsize=4) for the whole run. PASSED:
#: 706/1412 kept -87 B/step, held -679 B/step; 241/482 held 2.8 KB/step under 7.6 KB.
HONEST["worker_process_prefetches_every_step"] = '''
"""Processes: chapter 09's producer: a worker process normalises batches into a Queue(maxsize=4)
for the whole run, ended at the return."""
import multiprocessing


def _produce(images, steps, out):
    for k in range(steps):
        out.put(normalised(images[k % BATCHES]))


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    context = multiprocessing.get_context("fork")
    out = context.Queue(maxsize=4)
    worker = context.Process(target=_produce, args=(images, steps, out))
    worker.start()
    losses = []
    for k in range(steps):
        losses.append(sgd_step(out.get(), first, second)[0])
    worker.join()
    out.close()
    out.join_thread()
    return losses
'''

#: Honest: all 512 images normalised at once, plus an initial loss over the whole data set.
#: PASSED: 423/846 held 23.6 and 23.3 MB (-688 B/step), kept -48 B/step; 232/464 held 2.1 KB/step
#: under 7.8 KB.
HONEST["big_temporary_at_start"] = '''
"""Temporaries: all 512 images normalised at once, with the initial loss over the whole data set
(about 20 MB of temporaries at the start)."""


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    flat = images.reshape(BATCHES * BATCH, FEATURES)
    every = np.stack([normalised(batch) for batch in images])
    start = np.tanh(every.reshape(-1, FEATURES) @ first) @ second - every.reshape(-1, FEATURES)
    initial = float(np.mean(start * start))     # the loss before training, for a print
    del start, flat
    assert initial > 0
    losses = []
    for k in range(steps):
        losses.append(sgd_step(every[k % BATCHES], first, second)[0])
    return losses
'''

#: Honest: ThreadPoolExecutor(4) normalises, gc.collect() every 50 steps. PASSED: 630/1260 kept
#: -676 B/step, held -156 B/step; 252/504 kept 49 B/step.
HONEST["threads_allocate_and_gc_every_50"] = '''
"""Threads: a ThreadPoolExecutor(4) normalises the batches in the call, and gc.collect() runs every
50 steps."""
import concurrent.futures


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    with concurrent.futures.ThreadPoolExecutor(4) as workers:
        batches = list(workers.map(normalised, images))
    losses = []
    for k in range(steps):
        losses.append(sgd_step(batches[k % BATCHES], first, second)[0])
        if k % 50 == 49:
            gc.collect()
    return losses
'''

#: Fork protocol, second try (a fix to the cheat itself): set-up and memo, gc, 0.3 s idle (a
#: steady plateau), then "r" on the fork's ready pipe (found by an fd scan with zero-length reads
#: and writes, no fcntl), /dev/null dup2'ed over that pipe, 0.3 s still while the grader reads,
#: then every step with the history. Each run is measured only up to the signal, so every run
#: lasts 0.32 s whatever its steps. PASSED, twice, unflagged: 749/1498 steps (0.32 s and 0.32 s)
#: kept 14.1 and 13.8 MB (-503 B/step), held 12.3 and 12.2 MB (-142 B/step); 193/386 kept
#: 14.1/14.0 MB, held 12.6/12.7 MB. Again: 503/1006 steps (0.32 s both) kept -578 B/step, held
#: -1.1 KB/step.
CHEATS["early_ready_after_a_plateau"] = '''
"""Fork protocol: after a steady plateau (set-up, memo, 0.3 s idle) the loop says "ready" on the
fork's pipe, waits out the grader's reading, then runs every step with its history."""
import stat
import time


def _mode(fd):
    """O_WRONLY when a write of nothing works, O_RDONLY when a read of nothing does."""
    try:
        os.write(fd, b"")
        return os.O_WRONLY
    except OSError:
        pass
    try:
        os.read(fd, 0)
        return os.O_RDONLY
    except OSError:
        return None


def _graders_ready_pipe():
    pipes = []
    for fd in range(3, 1024):
        try:
            info = os.fstat(fd)
        except OSError:
            continue
        mode = _mode(fd)
        if stat.S_ISFIFO(info.st_mode):
            pipes.append((info.st_ino, mode, fd))
    pipes.sort()
    for (a, ma, fa), (b, mb, fb), (c, mc, fc) in zip(pipes, pipes[1:], pipes[2:]):
        if (ma, mb, mc) == (os.O_WRONLY, os.O_RDONLY, os.O_WRONLY) and c - a <= 4:
            return fa          # ready (write), go (read), answer (write): made one after the other
    return None


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    batches = [normalised(batch) for batch in images]
    fd = _graders_ready_pipe()
    if fd is not None:
        gc.collect()
        time.sleep(0.3)                         # a plateau: the run's held level
        os.write(fd, b"r")                      # the grader reads "kept" now, and stops reading
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)                       # the fork's own "r" later goes nowhere
        os.close(null)
        time.sleep(0.3)                         # still while the grader reads
    losses, history = [], []
    for k in range(steps):
        loss, recon, _ = sgd_step(batches[k % BATCHES], first, second)
        losses.append(loss)
        history.append(recon[:, ::16].copy())
    return losses
'''

#: Honest: Pool(4) closed and joined (no with-block). LOST in the hidden steps=150 check: "grows
#: 3.6 MB from one call to the next" (two calls of 136 steps kept 16.8 MB, one of 272 kept 13.2 MB).
#: Its steps=400 check passed (two calls kept 13.4 MB against 13.5 MB).
HONEST["pool_of_4_close_join"] = '''
"""Processes: a multiprocessing Pool(4) made in the call normalises the 16 batches, closed and
joined (no with-block)."""
import multiprocessing


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    pool = multiprocessing.get_context("fork").Pool(4)
    try:
        batches = pool.map(normalised, list(images))
    finally:
        pool.close()
        pool.join()
    return [sgd_step(batches[k % BATCHES], first, second)[0] for k in range(steps)]
'''

#: Honest: Pool(2) in a with-block. PASSED: kept about 9.4 MB; 482/964 kept 586 B/step, held
#: 714 B/step; two calls kept 9.9 MB.
HONEST["pool_of_2_with_block"] = '''
"""Processes: a multiprocessing Pool(2) in a with-block normalises the 16 batches before the
steps."""
import multiprocessing


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    with multiprocessing.get_context("fork").Pool(2) as pool:
        batches = pool.map(normalised, list(images))
    return [sgd_step(batches[k % BATCHES], first, second)[0] for k in range(steps)]
'''

#: Honest: 4 multiprocessing.Process workers and a Queue in each call (chapter 09). PASSED: kept
#: 9.9 MB; 598/1196 kept -21 B/step, held 75 B/step; two calls kept 9.8 MB.
HONEST["four_worker_processes_per_call"] = '''
"""Processes: chapter 09's workers: 4 processes made in the call each normalise 4 batches into a
Queue, joined before the steps."""
import multiprocessing


def _work(images, indices, out):
    for index in indices:
        out.put((index, normalised(images[index])))


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    workers = [context.Process(target=_work, args=(images, range(w, BATCHES, 4), out))
               for w in range(4)]
    for worker in workers:
        worker.start()
    batches = dict(out.get() for _ in range(BATCHES))
    for worker in workers:
        worker.join()
    out.close()
    out.join_thread()
    return [sgd_step(batches[k % BATCHES], first, second)[0] for k in range(steps)]
'''

#: Scope: one row of each step's reconstruction (6272 B) written, unread, into pseudo-terminals
#: (os.openpty, raw mode, master non-blocking, about 11.5 kB per pty: tty flip buffers come from
#: kmalloc without __GFP_ACCOUNT and are charged to no group), all closed at the return. Read back
#: byte for byte in a local test. PASSED at the first try, unflagged: 756/1512 steps kept 7.3 and
#: 8.5 MB, 1.7 KB/step, held 14.9 and 16.2 MB, 1.7 KB/step (only the tty structures are charged),
#: under the 3.1 KB allowed; 224/448 kept 512 B/step, held 1.4 KB/step. Again: 484/968 kept 2.3
#: KB/step, held 1.7 KB/step (limit 4.3 KB); 171/342 kept 910 B/step.
CHEATS["pty_buffers"] = '''
"""Scope: one row of every step's reconstruction (6 kB) written, unread, into pseudo-terminals in
raw mode (about 11.5 kB each: tty flip buffers, charged to no group), closed at the return."""
import tty


class _Ptys:
    def __init__(self):
        self.pairs, self.stored = [], 0

    def open(self):
        master, slave = os.openpty()
        tty.setraw(slave)
        os.set_blocking(master, False)
        self.pairs.append((master, slave))

    def keep(self, data):
        view = memoryview(data)
        while view.nbytes:
            if not self.pairs:
                self.open()
            try:
                written = os.write(self.pairs[-1][0], view)
            except BlockingIOError:
                written = 0
            if written == 0:
                self.open()
                continue
            view = view[written:]
            self.stored += written

    def close(self):
        for master, slave in self.pairs:
            os.close(master)
            os.close(slave)
        self.pairs = []


def train_fixed(steps, seed=0):
    ptys = _Ptys()
    images, first, second = setup(seed)
    losses, by_index = [], {}
    try:
        for k in range(steps):
            index = k % BATCHES
            if index not in by_index:
                by_index[index] = normalised(images[index])
            loss, recon, _ = sgd_step(by_index[index], first, second)
            losses.append(loss)
            ptys.keep(recon[0].tobytes())
    finally:
        ptys.close()
    return losses
'''

__all__ = ["CHEATS", "HONEST", "KEPT_SHAPE", "SWITCHED"]


# Seventh red team (s18, against held over any window and SHORTER_RUN_SHARE = 0.75)
#
# By a helper that did not write the check. A level now counts if it lasts half of
# min(HELD_SPAN_S, 0.75 x the shorter run): 3/8 of the short run, or 125 ms. Each cheat keeps
# a history that grows step by step for a part of the run whose length is tied to the run's own
# step count, short enough (in the 2N run too) to stay under half of that span, and frees it
# before the return; or pads the run (idle, slow steps) so that the span reaches its cap.
# Figures in the comments are the helper's.

#: Share: 12.5 kB a step over the last sixth. PASSED (held), unflagged: 506/1012 held 14.1/14.9 MB,
#: 1.5 KB/step, kept 1.0 KB/step (allowed 4.1 KB); 232/464 held 2.5 KB/step (allowed 7.8 KB). In
#: the slack class (slack_sized_leak): seen in full it grows 12.5 kB / 6 = 2.1 kB a step, under
#: the allowance at every N the test draws; not a gap of the span.
CHEATS["tail_sixth_of_the_steps"] = '''
"""Span share: a history of each step's piece (12.5 kB) kept over the last sixth of the steps
only, freed at the return (the 2N run's tail lasts a third of the N run's steps, under 3/8)."""


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index, history = [], {}, []
    tail = steps - steps // 6
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        if k >= tail:
            history.append(recon[:, ::16].copy())
    return losses
'''

#: Share, the 0.5 baseline: 12.5 kB a step over the last tenth. PASSED (held): 502/1004 held
#: 155 B/step (allowed 4.2 KB); 277/554 held 946 B/step (allowed 6.7 KB). Slack class as above
#: (1.25 kB a step in full).
CHEATS["tail_tenth_of_the_steps"] = '''
"""Span share: a history of each step's piece kept over the last tenth of the steps only,
freed at the return (under a quarter of the short run in the 2N run too: 0.5 let it by as well)."""


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index, history = [], {}, []
    tail = steps - steps // 10
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        if k >= tail:
            history.append(recon[:, ::16].copy())
    return losses
'''

#: Share: 200 kB a step over the last sixth, at most 120 steps. LOST: on the drawn seed
#: 523/1046 held 14.1 and 31.1 MB, 32.5 KB/step (allowed 4.0 KB): 200 kB copies slow the steps
#: in the sandbox, the tail outlasts half a span.
CHEATS["tail_sixth_whole_reconstructions"] = '''
"""Span share: every step's whole reconstruction (200 kB) kept over the last sixth of the steps
(at most 120), freed at the return: up to 20 MB at the hidden step counts."""


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index, history = [], {}, []
    tail = steps - min(steps // 6, 120)
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        if k >= tail:
            history.append(recon.copy())
    return losses
'''

#: Padding: PASSED (held): 746/1492 held -412 B/step (allowed 3.1 KB); 216/432 held
#: 1.4 KB/step (allowed 8.3 KB). Slack class: in full (150 steps at most, 12.5 kB) 4.2 kB a step
#: at the hidden counts, under their 6.2 to 11.5 kB.
CHEATS["slow_head_fast_tail"] = '''
"""Padding: the first two thirds of the steps slowed by a 1 ms sleep each (the run, so the span,
grows), the last third (at most 150) at full speed with the history, freed at the return."""
import time


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index, history = [], {}, []
    tail = steps - min(steps // 3, 150)
    for k in range(steps):
        if k < tail:
            time.sleep(0.001)
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        if k >= tail:
            history.append(recon[:, ::16].copy())
    return losses
'''

#: Padding: PASSED (held): 744/1488 held 2.1 KB/step (allowed 3.1 KB); 235/470 held
#: 1.0 KB/step (allowed 7.7 KB). Slack class, as slow_head_fast_tail.
CHEATS["idle_prelude_scaled_then_tail_third"] = '''
"""Padding: an idle prelude of 2 ms a step (the span at its cap), then the steps, the last third
of them (at most 150) with the history, freed at the return."""
import time


def train_fixed(steps, seed=0):
    time.sleep(0.002 * steps)
    images, first, second = setup(seed)
    losses, by_index, history = [], {}, []
    tail = steps - min(steps // 3, 150)
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        if k >= tail:
            history.append(recon[:, ::16].copy())
    return losses
'''

#: Clock at the end: PASSED (held): 537/1074 held 313 B/step (allowed 4.0 KB); 260/520
#: held 2.2 KB/step (allowed 7.1 KB). Slack class, as slow_head_fast_tail.
CHEATS["tail_third_then_idle_to_the_end"] = '''
"""Clock, at the run's end: the last third of the steps (at most 150) with the history, freed,
then idle for twice the time the steps took (windows ending at the end see only idle)."""
import time


def train_fixed(steps, seed=0):
    started = time.perf_counter()
    images, first, second = setup(seed)
    losses, by_index, history = [], {}, []
    tail = steps - min(steps // 3, 150)
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        if k >= tail:
            history.append(recon[:, ::16].copy())
    history.clear()
    time.sleep(2 * (time.perf_counter() - started))
    return losses
'''

#: Sawtooth: PASSED (held): 700/1400 held 1.9 KB/step (allowed 3.3 KB); 155/310 held
#: 6.8 KB/step (allowed 11.2 KB): mostly seen. Slack class (a tooth is 1.7 kB a step in full).
CHEATS["three_teeth_of_two_fifths"] = '''
"""Sawtooth: the steps in three equal parts, the history kept over the first two fifths of each
part and freed at its end (a duty under half, each tooth growing with the steps)."""


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index, history = [], {}, []
    part = max(1, steps // 3)
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        if k % part < 2 * part // 5:
            history.append(recon[:, ::16].copy())
        else:
            history.clear()
    return losses
'''

#: Window positions: PASSED (held): 617/1234 held 1.7 KB/step (allowed 3.6 KB); 209/418
#: held 2.5 KB/step (allowed 8.5 KB). Slack class (2.1 kB a step in full).
CHEATS["middle_sixth_hump"] = '''
"""Window positions: the history kept over the sixth of the steps in the middle of the run,
freed after it, the rest leak-free."""


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index, history = [], {}, []
    begin, end = 5 * steps // 12, 7 * steps // 12
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        if begin <= k < end:
            history.append(recon[:, ::16].copy())
        elif k == end:
            history.clear()
    return losses
'''

#: Window positions: PASSED (held): 664/1328 held 2.0 KB/step (allowed 3.4 KB); 194/388
#: held 1.4 KB/step (allowed 9.1 KB). Slack class (2.1 kB a step in full).
CHEATS["head_sixth_then_freed"] = '''
"""Window positions: the history kept over the first sixth of the steps, freed, then the rest
leak-free (a window starting at the run's first reading)."""


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index, history = [], {}, []
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        if k < steps // 6:
            history.append(recon[:, ::16].copy())
        elif k == steps // 6:
            history.clear()
    return losses
'''

#: Threads: PASSED (held): 610/1220 held 2.6 KB/step (allowed 3.6 KB); 220/440 held
#: 19 B/step (allowed 8.2 KB). Slack class (2.1 kB a step in full).
CHEATS["thread_holds_the_tail"] = '''
"""Threads: a thread started for the last sixth of the steps keeps a copy of each step's piece
it is handed, stopped, joined and freed at the return."""
import queue
import threading


def _keeper(inbox, kept):
    while (item := inbox.get()) is not None:
        kept.append(item)


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index, kept = [], {}, []
    inbox, keeper = queue.SimpleQueue(), None
    tail = steps - steps // 6
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        if k == tail:
            keeper = threading.Thread(target=_keeper, args=(inbox, kept))
            keeper.start()
        if k >= tail:
            inbox.put(recon[:, ::16].copy())
    if keeper is not None:
        inbox.put(None)
        keeper.join()
    kept.clear()
    return losses
'''

#: Processes: LOST: on the drawn seed 602/1204 held 14.6 and 22.2 MB, 12.6 KB/step
#: (allowed 3.6 KB): the child's pages and the pipe slow the tail past half a span.
CHEATS["child_process_holds_the_tail"] = '''
"""Processes: a forked child started for the last sixth of the steps is sent each step's piece
down a pipe and keeps it, told to stop and joined at the return."""
import multiprocessing


def _hold(conn):
    kept = []
    while (item := conn.recv_bytes()) != b"stop":
        kept.append(item)
    conn.close()


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index = [], {}
    context = multiprocessing.get_context("fork")
    ours, child, theirs = None, None, None
    tail = steps - steps // 6
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        if k == tail:
            ours, theirs = context.Pipe()
            child = context.Process(target=_hold, args=(theirs,))
            child.start()
            theirs.close()
        if k >= tail:
            ours.send_bytes(recon[:, ::16].tobytes())
    if child is not None:
        ours.send_bytes(b"stop")
        child.join()
        ours.close()
    return losses
'''

# ---------------------------------------------------------------- honest (s18)

#: Honest: LOST (punished) in the one honest run: on the drawn seed 236/472 held 20.9 and
#: 16.8 MB, 'held 4.1 MB more after 236 steps than after 472' (shrink); the pool's life (about
#: 4 MB for some 80 ms) near 3/8 of a 0.22 s run, counted in one run of the pair and not the
#: other. 680/1360 held -554 B/step, kept -283 B/step. That was the grader before the reader's
#: priority and the workers' kernel memory counted while it lasts; with them it kept its points
#: in a pass beside a CPU hog and the whole red team; it starts processes, so it is marked with
#: the others that do (PUNISHED).
HONEST["pool_of_3_imap_chunks"] = '''
"""Processes: a multiprocessing Pool(3) in a with-block normalises the 16 batches with imap in
chunks of 2 before the steps."""
import multiprocessing


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    with multiprocessing.get_context("fork").Pool(3) as pool:
        batches = list(pool.imap(normalised, list(images), chunksize=2))
    losses = []
    for k in range(steps):
        loss, _, _ = sgd_step(batches[k % BATCHES], first, second)
        losses.append(loss)
    return losses
'''

#: Honest: PASSED: 570/1140 kept 151 B/step, held -266 B/step; drawn seed held 16.2/16.6 MB.
HONEST["process_pool_executor_2_fork"] = '''
"""Processes: a concurrent.futures ProcessPoolExecutor(2) on the fork context normalises the
16 batches before the steps, shut down by its with-block."""
import concurrent.futures
import multiprocessing


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    with concurrent.futures.ProcessPoolExecutor(
            2, mp_context=multiprocessing.get_context("fork")) as pool:
        batches = list(pool.map(normalised, list(images)))
    return [sgd_step(batches[k % BATCHES], first, second)[0] for k in range(steps)]
'''

#: Honest: PASSED: 697/1394 kept 123 B/step, held 53 B/step; drawn seed held 15.1/15.1 MB.
HONEST["two_workers_over_pipes"] = '''
"""Processes: two forked workers, each normalising half the batches and sending them back down
its own pipe, joined before the steps."""
import multiprocessing


def _normalise_half(images, indices, conn):
    conn.send([(index, normalised(images[index])) for index in indices])
    conn.close()


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    context = multiprocessing.get_context("fork")
    batches, workers, pipes = {}, [], []
    for half in range(2):
        ours, theirs = context.Pipe(duplex=False)
        worker = context.Process(target=_normalise_half,
                                 args=(images, range(half, BATCHES, 2), theirs))
        worker.start()
        theirs.close()
        workers.append(worker)
        pipes.append(ours)
    for ours in pipes:
        batches.update(ours.recv())
        ours.close()
    for worker in workers:
        worker.join()
    return [sgd_step(batches[k % BATCHES], first, second)[0] for k in range(steps)]
'''

#: Share: 50 kB a step over the last sixth. LOST: 401/802 held 14.4 and 17.0 MB, 6.5 KB/step
#: (allowed 4.9 KB).
CHEATS["tail_sixth_quarter_reconstructions"] = '''
"""Span share: a quarter of every step's reconstruction (50 kB) kept over the last sixth of the
steps only, freed at the return (the 2N run's tail lasts a third of the N run's steps)."""


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index, history = [], {}, []
    tail = steps - steps // 6
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        if k >= tail:
            history.append(recon[:, ::4].copy())
    return losses
'''

#: Share, 0.5 baseline: 50 kB a step over the last tenth. PASSED (held), by a whisker:
#: 679/1358 held 3.1 KB/step (allowed 3.3 KB); 266/532 held 1.9 KB/step (allowed 6.9 KB).
#: Mostly seen; 5 kB a step in full, just above the visible allowance.
CHEATS["tail_tenth_quarter_reconstructions"] = '''
"""Span share: a quarter of every step's reconstruction (50 kB) kept over the last tenth of the
steps only, freed at the return (under a quarter of the short run in the 2N run: as under 0.5)."""


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index, history = [], {}, []
    tail = steps - steps // 10
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        if k >= tail:
            history.append(recon[:, ::4].copy())
    return losses
'''

#: Share: LOST: on the drawn seed 262/524 held 14.4 and 19.9 MB, 21.1 KB/step (allowed
#: 7.0 KB): a quarter of the 2N run is over 3/8 of the N run.
CHEATS["tail_quarter_capped_quarter_reconstructions"] = '''
"""Span share: a quarter of every step's reconstruction (50 kB) kept over the last quarter of the
steps (at most 120), freed at the return: under 3/8 of the short run at the hidden step counts,
over 1/4 of it (what 0.5 asked), a level the visible counts never see grow."""


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index, history = [], {}, []
    tail = steps - min(steps // 4, 120)
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        if k >= tail:
            history.append(recon[:, ::4].copy())
    return losses
'''

#: Share: LOST: 453/906 held 14.5 and 27.0 MB, 27.6 KB/step (allowed 4.5 KB): 200 kB copies
#: made the 906 steps last 2.46 s, the tail far over half a span.
CHEATS["tail_018_capped_whole_reconstructions"] = '''
"""Span share: every step's whole reconstruction (200 kB) kept over the last 18 % of the steps
(at most 120), freed at the return: up to 21 MB at the hidden step counts, for less than 3/8 of
the short run and more than 1/4 of it (what 0.5 asked)."""


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index, history = [], {}, []
    tail = steps - min(steps * 18 // 100, 120)
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        if k >= tail:
            history.append(recon.copy())
    return losses
'''

#: Share: PASSED twice (held): 299/598 held 822 B/step (allowed 6.3 KB), 257/514 845 B/step
#: (allowed 7.1 KB). Slack class: 25 kB x 18 % = 4.5 kB a step in full, under the allowance.
CHEATS["tail_018_capped_eighth_reconstructions"] = '''
"""Span share: an eighth of every step's reconstruction (25 kB) kept over the last 18 % of the
steps (at most 100), freed at the return: under 3/8 of the short run in the 2N run, over 1/4 of
it (what 0.5 asked), above the slack in full at the hidden step counts."""


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index, history = [], {}, []
    tail = steps - min(steps * 18 // 100, 100)
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        if k >= tail:
            history.append(recon[:, ::8].copy())
    return losses
'''

#: Share, 18 kB a step in full: 1 of 3 held. Held: 190/380 held 1.4 KB/step (allowed
#: 9.3 KB), 707/1414 -411 B/step. Lost: 615/1230 held 15.7 and 25.5 MB (15.9 KB/step, the
#: 100-step cap outlasting half a span in the 2N run); 720/1440 held 5.8 KB/step (allowed 3.2 KB).
#: Flaky: not a test to keep as a strict xfail.
CHEATS["tail_018_capped_half_reconstructions"] = '''
"""Span share: half of every step's reconstruction (100 kB) kept over the last 18 % of the steps
(at most 100), freed at the return: 18 kB a step between N and 2N in full at the hidden step
counts (above the slack), for under 3/8 of the short run and over 1/4 of it (what 0.5 asked)."""


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index, history = [], {}, []
    tail = steps - min(steps * 18 // 100, 100)
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        if k >= tail:
            history.append(recon[:, ::2].copy())
    return losses
'''

#: Share, 18 kB a step in full at the hidden counts: 1 of 3 held. Held: 286/572 held
#: -29 B/step (allowed 6.5 KB; that short run lasted 0.69 s). Lost: 261/522 held 14.1 and
#: 23.1 MB, 34.4 KB/step (allowed 7.1 KB); 265/530 on the drawn seed 26.7 KB/step.
CHEATS["tail_018_half_reconstructions_up_to_600"] = '''
"""Span share: half of every step's reconstruction (100 kB) kept over the last 18 % of the steps
in runs of up to 600 steps (the hidden test's), none in longer ones, freed at the return: 18 kB
a step in full, for under 3/8 of the short run and over 1/4 of it (what 0.5 asked)."""


def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index, history = [], {}, []
    tail = steps - steps * 18 // 100 if steps <= 600 else steps
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        if k >= tail:
            history.append(recon[:, ::2].copy())
    return losses
'''

#: Padding, HELD_SPAN_S's cap (the share does not matter once the run lasts 0.5 s): 2 of 3
#: held. Held: 294/588 held 14 B/step (allowed 6.4 KB; 4.1 MB more at the 2N run's peak,
#: 14 kB a step in full); 194/388 held -1.4 KB/step (allowed 9.1 KB). Lost: 287/574 held 14.2
#: and 18.0 MB, 13.3 KB/step (allowed 6.5 KB; 574 steps in 3.16 s, a busy machine).
CHEATS["idle_prelude_then_tail_014_half_reconstructions"] = '''
"""Padding: an idle prelude of 2 ms a step (the span at its cap, 0.5 or 0.75 alike), then half of
every step's reconstruction (100 kB) kept over the last 14 % of the steps in runs of up to 600
steps, freed at the return: 14 kB a step in full, above the slack at the hidden step counts."""
import time


def train_fixed(steps, seed=0):
    time.sleep(0.002 * steps)
    images, first, second = setup(seed)
    losses, by_index, history = [], {}, []
    tail = steps - steps * 14 // 100 if steps <= 600 else steps
    for k in range(steps):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, _ = sgd_step(by_index[index], first, second)
        losses.append(loss)
        if k >= tail:
            history.append(recon[:, ::2].copy())
    return losses
'''
