"""The inputs derived from a sample: layouts that keep every value, and the
sizes that change only where the kernel accepts the change and no argument
holds indices. A fake ``run`` stands for the operator: its ``call`` refuses
what a real kernel would."""

import pytest
import torch
from operator_checker.samples import Sample, overload_for
from operator_checker.variants import (
    changes,
    convert,
    empty_sizes,
    grown_samples,
    identical,
    index_arguments,
    relayout,
)


class FakeRun:
    """A kernel that refuses whatever ``refuses(sample)`` says."""

    def __init__(self, refuses=lambda sample: None):
        self.refuses = refuses
        self.calls = 0

    def call(self, sample):
        self.calls += 1
        said = self.refuses(sample)
        if said:
            raise RuntimeError(said)


@pytest.mark.parametrize("layout", ["permuted", "strided", "expanded", "offset"])
def test_a_layout_keeps_the_values_and_changes_the_memory(layout):
    t = torch.arange(12.0).reshape(3, 4)
    if layout == "expanded":
        t = t[:1].expand(3, 4).contiguous()  # what an expanded view can hold
    other = relayout(t, layout)
    assert torch.equal(other, t)
    assert changes(t, layout)
    if layout == "expanded":
        assert other.stride()[0] == 0


def test_a_tensor_a_layout_cannot_change_is_copied_row_major():
    assert not changes(torch.ones(1, 4), "permuted")  # one row: nothing to permute
    assert not changes(torch.ones(1, 4), "expanded")  # no row but the first


def test_integer_and_bool_tensors_hold_indices_unless_declared():
    sample = Sample(torch.ones(3), torch.tensor([0, 2]), torch.tensor([True]))
    _, sample = overload_for(torch.ops.aten.index_select.default, Sample(
        torch.ones(3), 0, torch.tensor([0, 2])))  # fmt: skip
    assert index_arguments(sample) == {"index"}
    assert index_arguments(sample, {}) == frozenset()
    assert index_arguments(sample, {"self": "box indices"}) == {"self"}


def test_no_size_changes_around_indices():
    sample = Sample(torch.ones(6, 2), torch.tensor([0, 2, 6]))
    sample.names = ["values", "offsets"]
    run = FakeRun()
    said = empty_sizes(run, sample, frozenset({"offsets"}))
    assert said.startswith("offsets holds indices, offsets or lengths")
    assert grown_samples(run, sample, frozenset({"offsets"})) == said
    assert run.calls == 0  # nothing was tried on the kernel


def test_empty_sizes_move_together_where_the_kernel_ties_them():
    # Boxes of four coordinates and one score each: the kernel refuses a
    # number of scores that is not the number of boxes.
    def refuses(sample):
        boxes, scores = sample.tensors()
        if boxes.shape[1] != 4:
            return "boxes need 4 coordinates"
        if boxes.shape[0] != scores.shape[0]:
            return "one score per box"
        return None

    sample = Sample(torch.ones(3, 4), torch.ones(3))
    sample.names = ["boxes", "scores"]
    sizes = empty_sizes(FakeRun(refuses), sample)
    assert sizes == {(1, 0): 0, (0, 0): 0}
    grown = grown_samples(FakeRun(refuses), sample)
    # Never 4 boxes: Dynamo would tie that size to the 4 coordinates.
    assert [tuple(g.tensors()[0].shape) for g in grown] == [(5, 4), (6, 4), (7, 4)]
    assert all(g.tensors()[1].shape[0] == g.tensors()[0].shape[0] for g in grown)


def test_a_kernel_that_refuses_every_empty_size_says_so():
    sample = Sample(torch.ones(2, 3))
    said = empty_sizes(FakeRun(lambda s: "no empty input"), sample)
    assert (
        said
        == "the kernel refuses every empty size tried: RuntimeError: no empty input"
    )


def test_convert_moves_the_samples_own_dtype_and_the_dtype_arguments_that_follow():
    sample = Sample(torch.ones(2), torch.ones(2, dtype=torch.float16),
                    torch.tensor([1]), torch.float32)  # fmt: skip
    moved = convert(sample, "cpu", torch.float64)
    data, scale, index, dtype = moved.args
    assert (data.dtype, scale.dtype, index.dtype) == (
        torch.float64, torch.float16, torch.int64,
    )  # fmt: skip
    assert dtype is torch.float64


def test_identical_compares_float8_and_nan():
    a = torch.tensor([1.0, float("nan")]).to(torch.float8_e4m3fn)
    assert identical(a, a.clone())
    assert not identical(a, torch.tensor([2.0, float("nan")]).to(torch.float8_e4m3fn))
