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

Each cheat reaches the modules it needs the way that the static review
(autograder/intake/review.py) did not flag when it was written: ``socket`` as
``http.client.socket``, ``ctypes`` as ``np.ctypeslib.ctypes``, no ``mmap`` or ``resource``
(files, ``np.memmap``, ``/proc``).

The honest alternatives: the chapter's solution; a preallocated ring buffer of the last 8
reconstructions (fixed size: a plateau); a module-level ``functools.lru_cache(maxsize=16)`` memo
of the normalised batches; a loop whose records refer to themselves, collected by
``gc.collect()`` every 20 steps (a bounded sawtooth); a hook that keeps the last batch's
activations (a plateau of 32 kB); a log of the losses in a CSV file of the working folder and a
list of (step, loss) tuples beside the history.
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


def _loop(keep: str) -> str:
    return _CLEAN.replace("KEEP", keep)


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

#: The cheats that keep a step's arrays only where they can tell they are not graded: outside
#: the grader (here, a student's machine, seed 3) their global ``kept`` holds every step.
SWITCHED = ("unless_no_network", "unless_rlimits", "unless_called_by_the_grader",
            "unless_in_a_fork", "unless_the_seed_is_drawn", "unless_home_is_temporary",
            "unless_a_user_without_a_home", "unless_no_network_interface",
            "unless_a_fresh_process_by_its_cpu_time", "unless_the_folder_is_fresh")

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

__all__ = ["CHEATS", "HONEST", "SWITCHED"]
