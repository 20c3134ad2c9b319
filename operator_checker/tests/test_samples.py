"""save_samples and load_samples: what goes in comes out."""

import pytest
import torch
from checker_operators import scale

from operator_checker import Sample, load_samples, save_samples


def test_samples_survive_a_round_trip_through_a_file(tmp_path):
    x = torch.randn(2, 3, dtype=torch.float64)
    indices = torch.tensor([[0, 1], [1, 0]])
    pieces = [torch.ones(2), torch.zeros(3, dtype=torch.float16)]
    path = tmp_path / "samples.pt"
    save_samples(
        path,
        {
            scale: [(x, 2.0)],
            "mylib::gather": [
                Sample(x, indices, 7, pieces, dtype=torch.bfloat16, device="cpu"),
                (x, indices, -1, [], torch.float32, torch.device("cpu")),
            ],
        },
    )
    loaded = load_samples(path)

    assert list(loaded) == ["oc_test::scale", "mylib::gather"]
    (scaled,) = loaded["oc_test::scale"]
    assert torch.equal(scaled.args[0], x) and scaled.args[1] == 2.0
    assert scaled.kwargs == {}
    first, second = loaded["mylib::gather"]
    assert torch.equal(first.args[1], indices) and first.args[1].dtype == torch.int64
    assert first.args[2] == 7 and isinstance(first.args[2], int)
    assert [t.dtype for t in first.args[3]] == [torch.float32, torch.float16]
    assert all(map(torch.equal, first.args[3], pieces))
    assert first.kwargs == {"dtype": torch.bfloat16, "device": "cpu"}
    assert second.args[3] == [] and second.args[4] is torch.float32
    assert second.args[5] == torch.device("cpu")
    assert first.args[0].dtype == torch.float64


def test_a_file_not_written_by_save_samples_is_refused(tmp_path):
    path = tmp_path / "weights.pt"
    torch.save({"weight": torch.ones(2)}, path)
    with pytest.raises(
        ValueError, match="not written by operator_checker.save_samples"
    ):
        load_samples(path)


def test_a_sample_that_is_no_operator_is_refused(tmp_path):
    with pytest.raises(TypeError, match="is not an operator"):
        save_samples(tmp_path / "samples.pt", {len: [(torch.ones(1),)]})
