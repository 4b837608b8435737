"""batch_scaling on tinyprof models and plain callables; best_batch_under_latency."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from tinyprof.models import gpt2, mlp, small_cnn
from tinyprof.plots import plot_scaling
from tinyprof.scaling import BatchScaling, batch_scaling, best_batch_under_latency
from tinyprof.timing import LatencyStats

MS = 1e-3
FAST = dict(warmup=1, iterations=5)
COLUMNS = ["batch", "median", "p95", "95% CI", "per sample", "throughput (samples/s)",
           "peak memory", "warnings"]


def test_mlp_throughput_grows_with_batch_and_memory_with_activations():
    # matmuls this small stay single-threaded in OpenBLAS: a busy second core cannot stall them
    result = batch_scaling(mlp((64, 64, 10)), (64, 1, 16), iterations=10)  # sample shape (64,)
    assert result.batch_sizes == (1, 16, 64), "batch sizes are measured in increasing order"
    assert result.name == "Sequential"
    # sanity, not a speed target: 64 samples in one call beat 64 separate calls
    assert result.throughput[-1] > result.throughput[0]
    assert result.throughput == pytest.approx([b / s.median for b, s in
                                               zip(result.batch_sizes, result.stats, strict=True)])
    # the first hidden activation alone is batch × 64 float32 values
    for b, peak in zip(result.batch_sizes, result.peak_bytes, strict=True):
        assert peak >= b * 64 * 4, f"batch {b}: peak {peak} B below the first activation"
    assert list(result.peak_bytes) == sorted(set(result.peak_bytes))


def test_table_columns_and_plain_lists_agree():
    result = batch_scaling(mlp((16, 8, 4)), (1, 4), **FAST)
    table = result.table()
    assert table.columns == COLUMNS and len(table) == 2
    assert table.column("batch") == [1, 4]
    assert table.column("median") == result.median_seconds
    assert table.column("p95") == result.p95_seconds
    assert table.column("throughput (samples/s)") == result.throughput
    assert table.column("per sample") == result.per_sample_seconds
    assert table.column("peak memory") == list(result.peak_bytes)
    assert "throughput (samples/s)" in str(result) and "<table" in result._repr_html_()


def test_gpt_gets_integer_token_ids_and_a_cnn_gets_images():
    gpt = gpt2(vocab_size=50, n_ctx=16, d_model=16, n_layer=1, n_head=2)
    tokens = batch_scaling(gpt, (1, 2), (8,), **FAST)  # float input would fail in Embedding
    assert tokens.batch_sizes == (1, 2) and all(p > 0 for p in tokens.peak_bytes)
    cnn = small_cnn(image_size=8, channels=(4, 8))
    images = batch_scaling(cnn, (1, 2), (3, 8, 8), memory=False, **FAST)
    assert images.peak_bytes == (None, None)
    with pytest.raises(ValueError, match="memory was not measured"):
        plot_scaling(images, "memory")


def test_a_plain_callable_gets_seeded_float32_batches():
    seen = []

    def record(batch):
        seen.append(batch)
        return batch.sum()

    batch_scaling(record, (2, 3), (5,), warmup=0, iterations=1, memory=False)
    assert {(x.shape, x.dtype) for x in seen} == {((2, 5), np.dtype(np.float32)),
                                                  ((3, 5), np.dtype(np.float32))}
    twos = [x for x in seen if x.shape[0] == 2]
    expected = np.random.default_rng(0).standard_normal((2, 5)).astype(np.float32)
    assert all(np.array_equal(x, expected) for x in twos)
    seen.clear()
    batch_scaling(record, (2,), (5,), dtype=np.float64, warmup=0, iterations=1, memory=False)
    assert seen[0].dtype == np.float64


def test_memory_measurement_leaves_tracemalloc_as_it_found_it():
    model = mlp((16, 8, 4))
    assert not tracemalloc.is_tracing()
    batch_scaling(model, (1,), **FAST)
    assert not tracemalloc.is_tracing()
    tracemalloc.start()
    try:
        result = batch_scaling(model, (1,), **FAST)
        assert tracemalloc.is_tracing(), "batch_scaling stopped a trace it did not start"
    finally:
        tracemalloc.stop()
    assert result.stats[0].tracemalloc_active


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="pass sample_shape.*Sequential"):
        batch_scaling(small_cnn(image_size=8), (1,))
    with pytest.raises(ValueError, match="pass sample_shape"):
        batch_scaling(lambda x: x, (1,))
    for sizes in ([], [0, 2], [1.5]):
        with pytest.raises(ValueError, match="batch_sizes must be positive integers"):
            batch_scaling(mlp((4, 2)), sizes)
    with pytest.raises(TypeError, match="model or a function taking a batch"):
        batch_scaling(np.zeros(3), (1,))


def synthetic() -> BatchScaling:
    """Batch 1: 1 ms (p95 1.2 ms); batch 8: 2 ms (p95 5 ms); batch 32: 10 ms (p95 11 ms)."""
    def stats(median, p95):
        # 21 samples: 10 at the median's left, the median, 9 in between, 1 tail → exact median
        return LatencyStats.from_samples([0.9 * median] * 10 + [median] * 9 + [p95] * 2)

    result = BatchScaling("toy", (1, 8, 32), (stats(1 * MS, 1.2 * MS), stats(2 * MS, 5 * MS),
                                              stats(10 * MS, 11 * MS)), (None, None, None))
    assert result.median_seconds == pytest.approx([1 * MS, 2 * MS, 10 * MS])
    assert result.p95_seconds == pytest.approx([1.2 * MS, 5 * MS, 11 * MS])
    assert result.throughput == pytest.approx([1000, 4000, 3200])
    return result


def test_best_batch_under_a_latency_budget():
    result = synthetic()
    assert best_batch_under_latency(result, 3 * MS) == 1, "batch 8's p95 (5 ms) breaks 3 ms"
    assert best_batch_under_latency(result, 3 * MS, statistic="median") == 8
    assert best_batch_under_latency(result, 6 * MS) == 8
    # batch 32 fits 100 ms but serves fewer samples/s (3,200) than batch 8 (4,000)
    assert best_batch_under_latency(result, 100 * MS) == 8
    assert best_batch_under_latency(result, 0.5 * MS) is None


def test_best_batch_rejects_bad_arguments():
    with pytest.raises(ValueError, match="statistic must be one of"):
        best_batch_under_latency(synthetic(), 1.0, statistic="mean")
    with pytest.raises(ValueError, match="budget_seconds must be > 0"):
        best_batch_under_latency(synthetic(), 0)
    with pytest.raises(TypeError, match="BatchScaling"):
        best_batch_under_latency({"batch": 1}, 1.0)


def test_plot_uses_the_shared_batch_scaling_figure():
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    fig = plot_scaling(synthetic(), "throughput")
    try:
        assert isinstance(fig, Figure)
        assert list(fig.axes[0].get_lines()[0].get_ydata()) == pytest.approx([1000, 4000, 3200])
    finally:
        plt.close(fig)
    with pytest.raises(ValueError, match="quantity must be"):
        plot_scaling(synthetic(), "energy")
