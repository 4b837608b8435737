"""The memory allocator held while a speed test runs (tinyprof/timing/allocator.py).

Each case runs in a fresh Python process: ``mallopt`` cannot be undone, and the point is what
a process's history does to the next block's page faults. A block keeps 24 outputs of 1 MiB,
as the speed test keeps a block's outputs until they are checked; the faults are counted by
``blocks.minor_faults`` (first touches of fresh pages)."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc",
                                reason="the allocator is held through glibc's mallopt")

BLOCKS = """
import json, sys
import numpy as np
from tinyprof.timing import allocator
from tinyprof.timing.blocks import minor_faults

def block(calls=24):
    before = minor_faults()
    kept = [np.ones(2**17) for _ in range(calls)]      # 1 MiB each, kept as the speed test does
    counted = minor_faults() - before
    del kept
    return counted / calls

history, hold = sys.argv[1], sys.argv[2] == "hold"
if history == "freed a large array":
    big = np.ones(30 * 2**17)                           # 30 MiB, mapped and then unmapped
    del big
held = allocator.hold_freed_memory() if hold else None
counts = [block() for _ in range(6)]
settled = allocator.settle() if hold else None
print(json.dumps({"first": counts[0], "later": max(counts[1:]), "held": held, "settled": settled}))
"""


def blocks(history: str, hold: bool) -> dict:
    """Faults a call of the first block and the worst later block, in a fresh process."""
    done = subprocess.run([sys.executable, "-c", BLOCKS, history, "hold" if hold else "no"],
                          capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)


@pytest.mark.parametrize("history", ["fresh", "freed a large array"])
def test_once_held_a_block_reuses_what_the_last_one_freed(history):
    """Held, only the first block touches fresh pages (256 a MiB), whatever the process freed
    before; the later ones land on memory the process kept."""
    found = blocks(history, hold=True)
    assert found["held"] is True and found["settled"] is True
    assert found["first"] > 100, found           # the heap grew once
    assert found["later"] < 5, found             # and was reused from then on


def test_without_the_hold_the_faults_depend_on_history():
    """The reason for the hold: left to glibc's own policy, a fresh process's blocks keep
    touching fresh pages (freed memory goes back to the system), while one that once freed a
    large array keeps what it frees, so the same block costs a different amount."""
    fresh, grown = blocks("fresh", hold=False), blocks("freed a large array", hold=False)
    assert fresh["later"] > 100, fresh
    assert grown["later"] < 5, grown


REQUESTS = """
import json
import numpy as np
from tinyprof import remote, wire
from tinyprof.timing.blocks import minor_faults

def faults_a_call(calls=24):
    kept = [np.ones(2**19) for _ in range(calls)]           # 4 MiB each: 96 MiB a block
    del kept
    before = minor_faults()
    kept = [np.ones(2**19) for _ in range(calls)]
    counted = minor_faults() - before
    del kept
    return counted / calls

def ask(*request):
    return remote._carry_out(request, {})

seen = {"fresh": faults_a_call()}
ask(wire.MAKE, lambda seed: (seed,), [0])
seen["after make"] = faults_a_call()
ask(wire.TIME, lambda seed: seed, remote._keep([(1,), (2,)]))
seen["after time"] = faults_a_call()
ask(wire.UNSWITCH)
seen["after unswitch"] = faults_a_call()
print(json.dumps(seen))
"""


def test_the_kernels_hold_the_allocator_from_a_timed_block_to_the_end_of_the_test():
    """In a grader's kernel (tinyprof.remote's requests, in a fresh process): a ``make`` alone
    leaves the allocator as it was (the leak check makes its inputs so), a ``time`` holds it,
    and the ``unswitch`` that ends the speed test settles it: 96 MiB freed then goes back to
    the system again (above the settled 64 MiB), where held it stayed."""
    done = subprocess.run([sys.executable, "-c", REQUESTS], capture_output=True, text=True,
                          timeout=120, check=True)
    seen = json.loads(done.stdout)
    assert seen["fresh"] > 300 and seen["after make"] > 300, seen   # about 512 a call here
    assert seen["after time"] < 5, seen
    assert seen["after unswitch"] > 100, seen                         # about 340 a call here
