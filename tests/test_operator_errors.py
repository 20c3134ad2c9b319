"""The operators on the "Custom Python Operators" page reject bad input clearly.

The page is executed once, as a reader's script would be, and its operators are
then called through the dispatcher (``torch.ops.mylib``), the way any other
code would reach them.
"""

import runpy

import pytest
import torch

from tests.support.helpers import REPO


@pytest.fixture(scope="module")
def mylib():
    import matplotlib

    matplotlib.use("Agg")
    runpy.run_path(str(REPO / "advanced" / "python_custom_ops.py"), run_name="__main__")
    return torch.ops.mylib


IMAGE = torch.rand(3, 16, 20)  # channels, height, width


@pytest.mark.parametrize("op_name", ["crop", "crop_exact"])
@pytest.mark.parametrize(
    "box, message",
    [
        ((10, 2, 24, 8), "must satisfy"),  # right edge leaves the image
        ((-1, 2, 5, 8), "must satisfy"),  # left edge leaves the image
        ((2, 10, 8, 17), "must satisfy"),  # bottom edge leaves the image
        ((8, 2, 4, 8), "must satisfy"),  # right < left
        ((2, 8, 6, 4), "must satisfy"),  # lower < upper
        ((2, 2, 6), "must be \\(left, upper, right, lower\\)"),
    ],
)
def test_crop_rejects_bad_boxes(mylib, op_name, box, message):
    with pytest.raises(ValueError, match=message):
        getattr(mylib, op_name)(IMAGE, box)


@pytest.mark.parametrize("op_name", ["crop", "crop_exact"])
@pytest.mark.parametrize("shape", [(16, 20), (1, 3, 16, 20)])
def test_crop_rejects_images_that_are_not_3d(mylib, op_name, shape):
    with pytest.raises(ValueError, match="must be a \\(C, H, W\\) image"):
        getattr(mylib, op_name)(torch.rand(shape), (0, 0, 4, 4))


@pytest.mark.parametrize("op_name", ["paste", "paste_exact"])
@pytest.mark.parametrize(
    "patch, coord, message",
    [
        (IMAGE.double()[:, :4, :4], (0, 0), "im1 is torch.float32 but im2 is"),
        (IMAGE[:2, :4, :4], (0, 0), "channels"),
        (IMAGE[:, :4, :4], (18, 0), "leaves im1"),
        (IMAGE[:, :4, :4], (0, -1), "leaves im1"),
        (IMAGE[0], (0, 0), "must be a \\(C, H, W\\) image"),
    ],
)
def test_paste_rejects_mismatched_images(mylib, op_name, patch, coord, message):
    with pytest.raises(ValueError, match=message):
        getattr(mylib, op_name)(IMAGE, patch, coord)


@pytest.mark.parametrize("op_name", ["paste", "paste_exact"])
def test_paste_rejects_images_on_different_devices(mylib, op_name):
    # A second device is always available as "meta"; a CUDA tensor is used too
    # when a GPU is present.
    others = ["meta"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in others:
        with pytest.raises(ValueError, match="im1 is on cpu but im2 is on"):
            getattr(mylib, op_name)(IMAGE, IMAGE[:, :4, :4].to(device), (0, 0))


def test_numpy_sin_rejects_a_mismatched_output(mylib):
    x = torch.rand(3)
    with pytest.raises(ValueError, match="must match input"):
        mylib.numpy_sin(x, torch.empty(4))
    with pytest.raises(ValueError, match="must match input"):
        mylib.numpy_sin(x, torch.empty(3, dtype=torch.float64))


def test_crop_exact_is_exact_where_the_8bit_crop_is_not(mylib):
    pic = torch.randn(3, 16, 20, dtype=torch.float64) * 10
    box = (2, 3, 17, 12)
    reference = pic[:, 3:12, 2:17]
    assert torch.equal(mylib.crop_exact(pic, box), reference)
    assert not torch.allclose(mylib.crop(pic, box), reference)


# The page says its fake kernels run the same checks, so that under
# torch.compile a bad call fails while the graph is traced, before any real
# computation: Dynamo reports the fake kernel's ValueError as a
# TorchRuntimeError. A fake kernel without the check lets tracing succeed and
# the error (if any) come from the real kernel at run time instead.
BAD_CALLS_UNDER_COMPILE = {
    "crop: box leaves the image": ("crop", (IMAGE, (10, 2, 24, 8))),
    "crop_exact: box leaves the image": ("crop_exact", (IMAGE, (10, 2, 24, 8))),
    "crop_exact: right < left": ("crop_exact", (IMAGE, (8, 2, 4, 8))),
    "paste: patch leaves the canvas": ("paste", (IMAGE, IMAGE[:, :4, :4], (18, 0))),
    "paste_exact: patch leaves the canvas": (
        "paste_exact",
        (IMAGE, IMAGE[:, :4, :4], (18, 0)),
    ),
    "paste_exact: dtypes differ": (
        "paste_exact",
        (IMAGE, IMAGE.double()[:, :4, :4], (0, 0)),
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS_UNDER_COMPILE))
def test_fake_kernels_reject_bad_input_while_compiling(mylib, case):
    op_name, args = BAD_CALLS_UNDER_COMPILE[case]
    op = getattr(mylib, op_name)
    torch.compiler.reset()

    def call(*tensors):
        return op(*tensors, *args[len(tensors) :])

    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    compiled = torch.compile(call, fullgraph=True, backend="eager")
    with pytest.raises(torch._dynamo.exc.TorchRuntimeError) as caught:
        compiled(*tensors)
    assert "ValueError" in str(caught.value), str(caught.value)[:2000]
