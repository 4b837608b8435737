"""tinyprof's profiler against torch.profiler on chapter 07's training step: overhead and coverage.

The model is chapter 07's small GPT (the same class and configuration as the notebook builds: 2
blocks, d_model 128, 4 heads, vocabulary 512, 8 sequences of 128 tokens, AdamW, one thread).
Each round times STEPS training steps (forward, loss, backward, optimizer step) three ways, in
a random order: bare, inside ``with tp.Profiler()``, and inside ``torch.profiler.profile`` (CPU
activity, its defaults). The profiled steps are timed *inside* their already-open block, so
entering and leaving a profiler (for torch.profiler, starting Kineto) is not charged to them.

- **overhead** = median over rounds of (profiled steps / bare steps of the same round) − 1,
  with a 95 % percentile-bootstrap interval of that median (the rounds are paired: each ratio
  compares steps run back to back, so the machine's drift cancels); the goal, tinyprof ≤ 1.05×
  bare, is met when the interval's upper end is at most +5 %. The same ratio is also taken in
  CPU time of the stepping thread (``time.thread_time``; torch runs on that one thread here):
  on a shared machine, other processes stretch the wall time of any run but not that thread's
  CPU time, so that interval is the one that still resolves a few per cent (torch.profiler's
  Kineto threads are outside it: its CPU figure is a lower bound);
- **coverage** = the share of the profiled step's wall time that the profiler attributes to
  something it recorded: for tinyprof, Σ self time of every module call, backward segment and
  optimizer step / wall time (``prof.layers.coverage``); for torch.profiler, Σ self CPU time of
  every recorded event / wall time (its events are operators, not modules, and its per-module
  view stops at the forward).

- **time inside tinyprof's hooks**: one more profiled run with every hook of the recorder
  (module pre- and post-hooks, the autograd node pre-hooks, the optimizer hooks, the end of the
  backward) wrapped in a timer: how many hook calls a step makes and the time spent inside
  them, over the bare step. This is the profiler's own work, counted directly, so it stays
  readable on a busy machine where the ratios above do not (the wrapper's own timer calls are
  outside the sum, so it omits only the hooks' call overhead in torch).

Run: ``python benchmarks/bench_torch_profiler.py [ROUNDS]`` (``--quick``: chapter 06's minimum of
9 rounds, ``tinyprof.timing.abtest.MIN_ROUNDS``; default 30).
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time

os.environ.setdefault("KINETO_LOG_LEVEL", "6")   # torch.profiler: no log line per start and stop

import torch  # noqa: E402 - after the logging setting, which torch reads when it loads
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import tinyprof as tp  # noqa: E402
from tinyprof.timing.abtest import MIN_ROUNDS  # noqa: E402
from tinyprof.timing.stats import bootstrap_median_ci  # noqa: E402

GOAL = 1.05


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model: int, n_head: int):
        super().__init__()
        self.qkv, self.proj = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)
        self.n_head = n_head

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = (t.view(b, s, self.n_head, d // self.n_head).transpose(1, 2)
                   for t in self.qkv(x).split(d, dim=-1))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(out.transpose(1, 2).reshape(b, s, d))


class Block(nn.Module):
    def __init__(self, d_model: int, n_head: int):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(d_model), CausalSelfAttention(d_model, n_head)
        self.ln_2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(),
                                 nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int = 512, seq_len: int = 128, d_model: int = 128,
                 n_head: int = 4, n_layer: int = 2):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d_model), nn.Embedding(seq_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)
        self.head.weight = self.wte.weight
        self.apply(self.init_weights)

    @staticmethod
    def init_weights(module):
        """GPT-2's initialisation: weights N(0, 0.02²), biases 0."""
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def training_step():
    torch.manual_seed(0)
    model = GPT()
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 512, (8, 128))
    targets = torch.randint(0, 512, (8, 128))

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(ids).flatten(0, 1), targets.flatten()).backward()
        optimizer.step()
    return step


STEPS = 3


def timed(step) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this thread) of STEPS steps."""
    start, cpu = time.perf_counter(), time.thread_time()
    for _ in range(STEPS):
        step()
    return time.perf_counter() - start, time.thread_time() - cpu


def with_tinyprof(step) -> tuple[tuple[float, float], float]:
    with tp.Profiler() as prof:
        seconds = timed(step)
    return seconds, prof.layers.coverage


def with_torch_profiler(step) -> tuple[tuple[float, float], float]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        seconds = timed(step)
    covered = sum(event.self_cpu_time_total for event in prof.key_averages()) * 1e-6
    return seconds, covered / seconds[0]


def hook_seconds(step) -> tuple[float, float]:
    """(seconds inside TorchRecorder's hooks, hook calls) per step, over STEPS steps."""
    from tinyprof.bottlenecks.torch_profiler import TorchRecorder

    spent = [0.0, 0]

    def timed(hook):
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return hook(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - start
                spent[1] += 1
        return wrapper

    names = ("_before", "_after", "_before_step", "_after_step", "_backward_done")
    originals = {name: getattr(TorchRecorder, name) for name in (*names, "_node_hook")}
    for name in names:
        setattr(TorchRecorder, name, timed(originals[name]))
    TorchRecorder._node_hook = lambda self, actions: timed(originals["_node_hook"](self, actions))
    try:
        with tp.Profiler():
            for _ in range(STEPS):
                step()
    finally:
        for name, original in originals.items():
            setattr(TorchRecorder, name, original)
    return spent[0] / STEPS, spent[1] / STEPS


def main(rounds: int = 30) -> None:
    torch.set_num_threads(1)
    step = training_step()
    for _ in range(3):
        step()
    with_tinyprof(step)
    with_torch_profiler(step)
    ratios: dict[str, list[float]] = {"tinyprof": [], "torch.profiler": []}
    cpu_ratios: dict[str, list[float]] = {"tinyprof": [], "torch.profiler": []}
    coverage: dict[str, list[float]] = {"tinyprof": [], "torch.profiler": []}
    bares = []
    order = [0, 1, 2]
    rng = __import__("random").Random(0)
    for _ in range(rounds):
        rng.shuffle(order)
        times = {}
        for which in order:
            if which == 0:
                times["bare"] = timed(step)
            elif which == 1:
                times["tinyprof"], cover = with_tinyprof(step)
                coverage["tinyprof"].append(cover)
            else:
                times["torch.profiler"], cover = with_torch_profiler(step)
                coverage["torch.profiler"].append(cover)
        bares.append(times["bare"][0])
        for name in ratios:
            ratios[name].append(times[name][0] / times["bare"][0])
            cpu_ratios[name].append(times[name][1] / times["bare"][1])
    print(f"chapter 07's GPT training step: {statistics.median(bares) / STEPS * 1e3:.1f} ms bare "
          f"(median), {rounds} rounds of {STEPS} steps, {torch.get_num_threads()} thread, torch "
          f"{torch.__version__}")
    print(f"{'profiler':>15}  {'overhead':>9}  {'95 % CI (wall)':>17}  {'coverage':>9}  "
          f"{'CPU time':>9}  {'95 % CI (CPU)':>17}")
    for name in ratios:
        low, high = bootstrap_median_ci(ratios[name])
        cpu_low, cpu_high = bootstrap_median_ci(cpu_ratios[name])
        print(f"{name:>15}  {statistics.median(ratios[name]) - 1:>+9.1%}  "
              f"[{low - 1:+6.1%}, {high - 1:+6.1%}]  {statistics.median(coverage[name]):>9.1%}  "
              f"{statistics.median(cpu_ratios[name]) - 1:>+9.1%}  "
              f"[{cpu_low - 1:+6.1%}, {cpu_high - 1:+6.1%}]")
    inside, calls = hook_seconds(step)
    bare = statistics.median(bares) / STEPS
    print(f"inside tinyprof's hooks: {calls:.0f} calls per step, {inside * 1e3:.2f} ms per step = "
          f"{inside / bare:.1%} of the bare step")
    verdict = {clock: "met" if bootstrap_median_ci(r["tinyprof"])[1] <= GOAL else "not met"
               for clock, r in (("wall", ratios), ("CPU", cpu_ratios))}
    print(f"goal for tinyprof: ≤ {GOAL:.2f}× bare (CI upper end ≤ {GOAL - 1:+.1%}), coverage ≥ "
          f"90 %: {verdict['wall']} in wall time, {verdict['CPU']} in CPU time on this run")
    assert not math.isnan(statistics.median(bares))


if __name__ == "__main__":
    arguments = [a for a in sys.argv[1:] if a != "--quick"]
    main(MIN_ROUNDS if "--quick" in sys.argv[1:] else int(arguments[0]) if arguments else 30)
