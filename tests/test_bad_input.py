"""Bad input to the library: a correct answer or a clear error naming the layer, the argument and
what was expected, never a silent wrong answer (issue 13). Global state is left alone."""

import numpy as np
import pytest

import tinyprof as tp
from tinyprof import models, nn, optim


@pytest.mark.parametrize("build, message", [
    (lambda: nn.Linear(0, 3), "Linear: in_features must be a positive integer, got 0"),
    (lambda: nn.Linear(4, -2), "Linear: out_features must be a positive integer, got -2"),
    (lambda: nn.Linear(4.5, 2), "Linear: in_features must be a positive integer, got 4.5"),
    (lambda: nn.Conv2d(3, 8, 3, stride=0), "Conv2d: stride must be a positive integer, got 0"),
    (lambda: nn.Conv2d(3, 8, 3, stride=-1), "Conv2d: stride must be a positive integer, got -1"),
    (lambda: nn.Conv2d(3, 8, 3, padding=-1), "Conv2d: padding must be an integer ≥ 0, got -1"),
    (lambda: nn.Conv2d(3, 8, 3, dilation=0), "Conv2d: dilation must be a positive integer"),
    (lambda: nn.Conv2d(3, 8, 3, groups=0), "Conv2d: groups must be a positive integer, got 0"),
    (lambda: nn.Conv2d(3, 8, 3, groups=2), "must both be divisible by groups"),
    (lambda: nn.Conv2d(3, 8, (3, 3, 3)), "kernel_size must be an int or a pair"),
    (lambda: nn.MultiHeadAttention(8, 0), "MultiHeadAttention: n_heads must be a positive"),
    (lambda: nn.LayerNorm(8, eps=0), "LayerNorm: eps must be a positive number, got 0"),
    (lambda: nn.Embedding(0, 4), "Embedding: num_embeddings must be a positive integer"),
    (lambda: models.gpt2(n_head=0, shape_only=True), "gpt2: n_head must be a positive integer"),
    (lambda: models.gpt2(n_layer=-1, shape_only=True), "gpt2: n_layer must be a positive"),
    (lambda: models.gpt2(d_model=768.5, shape_only=True),
     "gpt2: d_model must be a positive integer, got 768.5"),
    (lambda: models.mlp((784, -5, 10)), "Linear: out_features must be a positive integer, got -5"),
])
def test_settings_are_checked_where_they_are_made(build, message):
    with pytest.raises(ValueError) as error:
        build()
    assert message in str(error.value)


def test_integer_weights_are_refused():
    with pytest.raises(TypeError, match="floating-point dtype .* got int8"):
        models.gpt2(d_model=64, n_layer=1, n_head=2, vocab_size=50, n_ctx=8, dtype="int8")


def test_integer_inputs_give_the_right_answer_or_a_clear_error():
    with pytest.raises(TypeError, match="GELU computes in floating point: its input has dtype int"):
        nn.GELU()(np.array([1, 2, 3]))
    assert np.array_equal(nn.ReLU()(np.array([-1, 2, 3])), [0, 2, 3])    # exact in integers
    assert np.allclose(nn.Linear(3, 2)(np.array([[1, 2, 3]])),             # cast to the weights
                       nn.Linear(3, 2)(np.array([[1.0, 2.0, 3.0]], dtype=np.float32)))
    with pytest.raises(TypeError, match="MSELoss computes in floating point: prediction"):
        nn.MSELoss()(np.array([1, 2]), np.array([1, 3]))
    with pytest.raises(TypeError, match="MSELoss expects target as a numpy array, got list"):
        nn.MSELoss()(np.array([1.0, 2.0]), [1.0, 3.0])
    with pytest.raises(TypeError, match="Embedding looks up integer token ids; got dtype float"):
        nn.Embedding(10, 4)(np.array([[1.0, 2.0]]))


@pytest.mark.parametrize("targets, error, message", [
    (np.array([0, -1]), ValueError, "target -1 is not a class id: there are 3 classes"),
    (np.array([0, 3]), ValueError, "target 3 is not a class id"),
    (np.array([0.0, 1.0]), TypeError, "targets are class ids and must be integers"),
    ([0, 1], TypeError, "expects targets as a numpy array, got list"),
])
def test_cross_entropy_targets(targets, error, message):
    logits = np.zeros((2, 3), dtype=np.float32)
    with pytest.raises(error, match=message):
        nn.CrossEntropyLoss()(logits, targets)


def test_training_memory_refuses_bad_targets_through_the_loss():
    model = models.mlp((4, 3))
    x = np.ones((2, 4), dtype=np.float32)
    with pytest.raises(ValueError, match="not a class id"):
        tp.training_memory(model, x, targets=np.array([0, 5]))


def test_empty_inputs():
    with pytest.raises(ValueError, match="empty batch"):
        nn.CrossEntropyLoss()(np.zeros((0, 3), dtype=np.float32), np.zeros(0, dtype=np.int64))
    with pytest.raises(nn.ShapeError, match=r"the sequence is empty \(input \(2, 0, 8\)\)"):
        nn.MultiHeadAttention(8, 2)(np.zeros((2, 0, 8), dtype=np.float32))


def test_gradients_of_the_wrong_shape_are_refused():
    layer = nn.Linear(4, 3)
    layer(np.ones((6, 4), dtype=np.float32))
    with pytest.raises(ValueError, match=r"Linear.backward: the gradient has shape \(3, 2, 3\), "
                                         r"expected \(6, 3\)"):
        layer.backward(np.ones((3, 2, 3), dtype=np.float32))
    relu = nn.ReLU()
    relu(np.ones((2, 2), dtype=np.float32))
    with pytest.raises(ValueError, match="ReLU.backward: the gradient has shape"):
        relu.backward(np.ones(2, dtype=np.float32))
    weight = nn.Linear(4, 3)
    weight.weight.grad = np.ones(3, dtype=np.float32)   # (3,) onto a (4, 3) parameter
    with pytest.raises(ValueError, match=r"SGD.step: a gradient of shape \(3,\) for a parameter "
                                         r"of shape \(4, 3\)"):
        optim.SGD(weight, lr=0.1).step()


def test_clear_messages_for_common_slips():
    with pytest.raises(RuntimeError, match="Flatten.backward needs a forward first"):
        nn.Flatten().backward(np.ones((2, 3)))
    model = models.mlp((4, 3))
    sgd = optim.SGD(model, lr=0.1)       # a model stands for its parameters
    assert len(sgd.params) == 2
    with pytest.raises(TypeError, match="takes a model or model.parameters"):
        optim.SGD([model], lr=0.1)


def test_a_layer_used_twice_is_refused_with_both_places():
    shared = nn.Linear(4, 4)
    with pytest.raises(ValueError, match=r"Linear is used twice in one model, at 'layers.0' and "
                                         r"'layers.2'"):
        nn.Sequential(shared, nn.ReLU(), shared)
    tied = nn.Linear(4, 4)
    other = nn.Linear(4, 4)
    other.weight = tied.weight           # sharing a Parameter is the way to share weights
    model = nn.Sequential(tied, nn.ReLU(), other)
    assert tp.count_parameters(model) == 16 + 4 + 4


def test_counts_are_exact_python_ints():
    huge = nn.Linear(2**32, 2**32, shape_only=True)
    assert tp.count_parameters(huge) == 18_446_744_078_004_518_912 == 2**64 + 2**32
    assert tp.parameter_bytes(huge) == 4 * (2**64 + 2**32)


def test_adam_counts_steps_per_parameter_like_pytorch():
    # Recorded with torch.optim.Adam(lr=0.1) from torch 2.13.0 (CPU, float64), same gradients:
    # parameter b gets no gradient for the first two steps.
    a = tp.nn.Parameter(np.array([[1.0, -2.0], [0.5, 3.0]]))
    b = tp.nn.Parameter(np.array([0.25, -0.75]))
    adam = optim.Adam([a, b], lr=0.1)
    grads_b = [None, None, [0.5, -1.0], [0.25, 0.5], [-0.1, 0.2]]
    for i, gb in enumerate(grads_b):
        a.grad = np.array([[0.1 * (i + 1), -0.2], [0.3, 0.05 * i]])
        b.grad = None if gb is None else np.array(gb)
        adam.step()
    assert np.allclose(a.data, [[0.5149169317360103, -1.5000000250000003],
                                [1.6666667435050186e-08, 2.6654287122976217]], rtol=1e-12)
    assert np.allclose(b.data, [-0.0028890613494268677, -0.6143593384671743], rtol=1e-12)
    assert adam.steps == {id(a): 5, id(b): 3} and adam.t == 5


def test_adam_refuses_float16_parameters():
    with pytest.raises(TypeError, match="float16.*eps=1e-08 rounds to 0"):
        optim.Adam(models.mlp((4, 3), dtype=np.float16).parameters())


def test_global_state_is_left_alone():
    import tracemalloc

    before = np.geterr()
    for bad in (lambda: nn.GELU()(np.array([1])), lambda: nn.Linear(0, 1)):
        with pytest.raises((TypeError, ValueError)):
            bad()
    assert np.geterr() == before and not tracemalloc.is_tracing()


@pytest.mark.parametrize("analysis", [tp.count_flops, tp.predict_training_memory,
                                      tp.activation_table])
def test_negative_input_shapes_are_refused_by_every_analysis(analysis):
    with pytest.raises(ValueError, match=r"input_shape must be a tuple of positive ints, got "
                                         r"\(-32, 784\)"):
        analysis(models.mlp((784, 10)), (-32, 784))
