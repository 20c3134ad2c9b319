"""
Custom Python Operators
=======================

After this page you will be able to take a Python function that PyTorch cannot
see inside, such as a call into a third-party image library, and turn it into a
PyTorch operator that works with ``torch.compile`` and with autograd. You will
also learn the two tests that tell you whether you got it right, and see one of
them catch a real bug.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * How to make a Python function a custom operator with
         ``torch.library.custom_op``
       * How to give it a fake kernel and a backward formula
       * How to test it with ``torch.library.opcheck`` and
         ``torch.autograd.gradcheck``

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later
       * torchvision, Pillow, NumPy and Matplotlib

.. admonition:: Checklist
   :class: checklist

   #. Decorate the Python function with ``torch.library.custom_op``: a
      ``"namespace::name"``, a type hint on every argument, and every argument
      it writes into listed in ``mutates_args``.
   #. Check the arguments first and raise a ``ValueError`` that names the
      problem.
   #. Register a fake kernel with ``register_fake``: same checks, and an empty
      result with the real output's shape, strides, dtype and device.
   #. To train through it, register a backward with ``register_autograd``,
      built from operators PyTorch can differentiate.
   #. Test the registration with ``torch.library.opcheck`` on samples that
      require grad, are empty, non-contiguous or permuted, on every dtype and
      device.
   #. Test the mathematics with ``torch.autograd.gradcheck`` and against a
      reference, comparing raw bytes where "exact" is the claim.

PyTorch ships thousands of tensor operators, yet sooner or later you need one it
does not have: a routine from a third-party library, a kernel you wrote
yourself, a call into a simulator. Wrapping such a Python function as a
*custom operator* buys you two things:

* ``torch.compile`` treats the operator as a black box. It does not try to
  trace into code it cannot understand, so the surrounding model still
  compiles into one graph.
* You can teach autograd the operator's derivative, so models that use it can
  be trained.

Python operators are made with ``torch.library.custom_op``, the subject of this
page. Operators written in C++ use the ``TORCH_LIBRARY`` APIs instead, and they
also work where Python is not available at all (see
:ref:`sphx_glr_tutorials_cpp_custom_ops.py`). If your function is already a
composition of PyTorch operators, you do not need a custom operator:
``torch.compile`` and autograd understand it as it is.
"""

# %%
# Setting up
# ----------
#
# The page runs on whatever hardware it finds. Everything runs on the CPU; when
# a CUDA device is present, the operators are also exercised on it.

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import warnings
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from PIL import Image
from torch.autograd.gradcheck import GradcheckError
from torchvision.transforms.functional import pil_to_tensor, to_pil_image

# Dynamo warns when it steps through a cache inside Pillow while tracing the
# plain-Python crop below. That is a side issue here, so we silence it.
warnings.filterwarnings("ignore", message=r".*functools\.lru_cache")

# The one release number the page compares against: for behaviour that changed
# between releases, where there is no feature to test for.
RELEASE = tuple(int(part) for part in torch.__version__.split(".")[:2])

torch.manual_seed(0)
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")

# %%
# ``GradcheckError``, raised by ``gradcheck``, is public, in the module
# ``torch.autograd.gradcheck``. To see which of ``opcheck``'s tests failed we
# call it with ``raise_exception=False``, which returns one entry per test
# instead of raising. Two private names remain, because nothing public does
# their job: ``torch._dynamo.explain`` counts graph breaks, and
# ``torch._dynamo.exc`` holds the exception classes Dynamo raises.
#
# Example: wrapping PIL's crop into a custom operator
# ---------------------------------------------------
#
# Our stand-in for "a library PyTorch knows nothing about" is
# `Pillow <https://pillow.readthedocs.io>`_. Its ``Image.crop`` cuts a
# rectangle, given as ``(left, upper, right, lower)`` in pixels, out of an
# image. The plain Python version converts the tensor to a PIL image, crops it,
# and converts back, the way the published version of this tutorial does:
# through an 8-bit RGB picture. Keep that detail in mind.


def pil_crop(pic: torch.Tensor, box: Sequence[int]) -> torch.Tensor:
    """Crop a (C, H, W) float image in [0, 1] through an 8-bit PIL image."""
    as_pil = to_pil_image(pic.cpu())
    cropped = pil_to_tensor(as_pil.crop(tuple(box)))
    return (cropped / 255).to(device=pic.device, dtype=pic.dtype)


def show(pic: torch.Tensor, title: str) -> None:
    """Draw a (C, H, W) image tensor with values in [0, 1]."""
    fig, ax = plt.subplots(figsize=(2.6, 2.6), layout="constrained")
    ax.imshow(pic.detach().cpu().permute(1, 2, 0).clamp(0, 1).numpy())
    ax.set_title(title)
    ax.set_axis_off()
    plt.show()


# %%
# The test image is a ramp from black in the top-left corner to white in the
# bottom-right: the outer product of two ramps from 0 to 1, copied to three
# channels.

ramp = torch.linspace(0, 1, 64)
image = torch.ones(3, 64, 64) * torch.outer(ramp, ramp)
print(f"image: shape {tuple(image.shape)}, dtype {image.dtype}")
show(image, "test image")

# %%
# Cropping the box ``(10, 10, 50, 50)`` keeps a 40 by 40 pixel square from the
# middle of the ramp.

box = (10, 10, 50, 50)
cropped = pil_crop(image, box)
print(f"cropped: shape {tuple(cropped.shape)}")
assert cropped.shape == (3, 40, 40)
show(cropped, "pil_crop(image, box)")

# %%
# Graph breaks
# ------------
#
# ``torch.compile`` works by tracing Python code into a graph of PyTorch
# operators. PIL is not PyTorch, so wherever the tracer gets stuck inside
# ``pil_crop`` it gives up, splits the function into pieces there, and runs the
# part it could not trace in plain Python. Such a *graph break* costs speed,
# and hides the code on both sides of it from the optimizer.
# ``torch._dynamo.explain`` counts graph breaks without failing:


def crop_then_brighten(pic):
    return pil_crop(pic, box) * 1.25


explanation = torch._dynamo.explain(crop_then_brighten)(image)
print(f"graph breaks with pil_crop: {explanation.graph_break_count}")
assert explanation.graph_break_count >= 1

# %%
# With ``fullgraph=True``, a graph break is an error instead of a slowdown.
# Dynamo raises ``torch._dynamo.exc.Unsupported`` at the first line it cannot
# trace:

compiled_crop_then_brighten = torch.compile(crop_then_brighten, fullgraph=True)
try:
    compiled_crop_then_brighten(image)
except torch._dynamo.exc.Unsupported as error:
    print(f"{type(error).__name__}: {str(error).splitlines()[0]}")
else:
    raise AssertionError("expected torch.compile(fullgraph=True) to fail on PIL code")

# %%
# Black-boxing ``crop`` with a custom operator
# --------------------------------------------
#
# Two steps turn ``pil_crop`` into something ``torch.compile`` accepts:
#
# 1. Decorate a function with ``torch.library.custom_op``. The name
#    ``"mylib::crop"`` is a namespace and an operator name; the type hints
#    become the operator's schema, so every argument needs one.
#    ``mutates_args=()`` promises that the function writes into none of its
#    inputs. The result must be a new tensor, never one of the inputs.
# 2. Register a *fake kernel* with ``register_fake``. When the compiler traces
#    a program it runs it on fake tensors that have a shape, strides, a dtype
#    and a device but no data. The fake kernel tells the compiler what the
#    operator's output looks like without computing it.
#
# Every operator on this page checks its arguments first and raises a
# ``ValueError`` that says what is wrong. PIL itself would happily pad a box
# that leaves the image with zeros, which is a wrong tensor rather than an
# error. A PIL image also holds 1 to 4 channels, so the operators built on
# ``to_pil_image`` say so instead of failing somewhere inside torchvision.


def check_image(pic: torch.Tensor, name: str = "pic") -> None:
    if pic.dim() != 3:
        raise ValueError(
            f"{name} must be a (C, H, W) image, got shape {tuple(pic.shape)}"
        )


def check_pil_channels(pic: torch.Tensor, name: str = "pic") -> None:
    check_image(pic, name)
    if not 1 <= pic.shape[0] <= 4:
        raise ValueError(
            f"{name} goes through a PIL image, which holds 1 to 4 channels; "
            f"got {pic.shape[0]}"
        )


def check_box(pic: torch.Tensor, box: Sequence[int]) -> None:
    check_image(pic)
    if len(box) != 4:
        raise ValueError(f"box must be (left, upper, right, lower), got {box}")
    left, upper, right, lower = box
    _, height, width = pic.shape
    if not (0 <= left < right <= width and 0 <= upper < lower <= height):
        raise ValueError(
            f"box {tuple(box)} must satisfy 0 <= left < right <= {width} and "
            f"0 <= upper < lower <= {height} for an image of shape "
            f"{tuple(pic.shape)}"
        )


@torch.library.custom_op("mylib::crop", mutates_args=())
def crop(pic: torch.Tensor, box: Sequence[int]) -> torch.Tensor:
    check_box(pic, box)
    check_pil_channels(pic)
    return pil_crop(pic, box)


outside = (50, 50, 70, 60)
padded = pil_crop(image, outside)  # plain PIL, no checks: no error either
print(f"pil_crop(image, {outside}): shape {tuple(padded.shape)}")
assert padded.shape == (3, 10, 20)
assert not padded[:, :, image.shape[2] - outside[0] :].any()  # zeros past the edge

# %%
# ``torch.library.infer_schema`` shows the schema that ``custom_op`` read from
# the type hints: ``Sequence[int]`` became a list of (symbolic) integers.
# PyTorch 2.7 and later accept ``collections.abc.Sequence`` there; older
# releases knew only ``typing.Sequence``.

crop_schema = torch.library.infer_schema(pil_crop, mutates_args=())
print(f"schema of mylib::crop: {crop_schema}")
assert crop_schema == "(Tensor pic, SymInt[] box) -> Tensor"

# %%
# The fake kernel must describe the real output exactly, strides included.
# ``pil_to_tensor`` builds its result as a ``(C, H, W)`` view of memory laid
# out as ``(H, W, C)``: channels last. So the fake kernel allocates an
# ``(H, W, C)`` tensor and permutes it, which gives the same strides without
# touching any data.


@crop.register_fake
def _(pic, box):
    check_box(pic, box)
    check_pil_channels(pic)
    left, upper, right, lower = box
    channels_last = pic.new_empty(lower - upper, right - left, pic.shape[0])
    return channels_last.permute(2, 0, 1)


# %%
# A fake kernel also serves tensors on the ``meta`` device, which have
# metadata and no data, so calling the operator on one is a public way to look
# at what the fake kernel returns:

real = crop(image, box)
fake = crop(image.to("meta"), box)
print(f"real output: shape {tuple(real.shape)}, strides {real.stride()}")
print(f"fake output: shape {tuple(fake.shape)}, strides {fake.stride()}")
assert (fake.shape, fake.stride()) == (real.shape, real.stride())

# %%
# ``torch.library.opcheck``, the test introduced below, makes that comparison
# for you in its ``test_faketensor`` test. How strictly depends on the release:
# it compares strides for CUDA tensors on every release, and for CPU tensors
# from PyTorch 2.13. A copy of ``crop`` whose fake kernel returns a contiguous
# ``(C, H, W)`` tensor, a natural first guess, shows what this run does.
# ``raise_exception=False`` makes ``opcheck`` return each test's result instead
# of raising.


@torch.library.custom_op("mylib::crop_contiguous_fake", mutates_args=())
def crop_contiguous_fake(pic: torch.Tensor, box: Sequence[int]) -> torch.Tensor:
    check_box(pic, box)
    check_pil_channels(pic)
    return pil_crop(pic, box)


@crop_contiguous_fake.register_fake
def _(pic, box):
    check_box(pic, box)
    check_pil_channels(pic)
    left, upper, right, lower = box
    return pic.new_empty(pic.shape[0], lower - upper, right - left)  # row-major


for device in devices:
    outcome = torch.library.opcheck(
        crop_contiguous_fake,
        (image.to(device), box),
        test_utils="test_faketensor",
        raise_exception=False,
    )["test_faketensor"]
    compares_strides = device == "cuda" or RELEASE >= (2, 13)
    verdict = "SUCCESS" if outcome == "SUCCESS" else str(outcome).splitlines()[0]
    print(f"{device}: strides compared on this release: {compares_strides}")
    print(f"  test_faketensor: {verdict}")
    assert (outcome != "SUCCESS") == compares_strides
    torch.library.opcheck(crop, (image.to(device), box), test_utils="test_faketensor")
print(f"the channels-last fake kernel of mylib::crop passes on {devices}")

# %%
# Where strides are compared, the verdict names the mismatch. Where they are
# not, the row-major fake slips through ``opcheck``, while the comparison on the
# ``meta`` device shown above catches it on every release:

wrong = crop_contiguous_fake(image.to("meta"), box)
print(f"row-major fake: strides {wrong.stride()}; real: {real.stride()}")
assert wrong.stride() != real.stride()

# %%
# The same computation, with ``crop`` in place of ``pil_crop``, now compiles in
# one graph, because Dynamo stops at ``mylib::crop`` and records it as a single
# node:


def crop_op_then_brighten(pic):
    return crop(pic, box) * 1.25


explanation = torch._dynamo.explain(crop_op_then_brighten)(image)
print(f"graph breaks with mylib::crop: {explanation.graph_break_count}")
assert explanation.graph_break_count == 0
(graph,) = explanation.graphs
crop_nodes = [n for n in graph.graph.nodes if n.target == torch.ops.mylib.crop.default]
print(f"mylib::crop nodes in the graph: {len(crop_nodes)}")
assert len(crop_nodes) == 1

compiled = torch.compile(crop_op_then_brighten, fullgraph=True)
compiled_result = compiled(image)
torch.testing.assert_close(compiled_result, crop_op_then_brighten(image))
show(image, "input")
show(compiled_result, "compiled crop, brightened")

# %%
# Adding training support for ``crop``
# ------------------------------------
#
# A custom operator is opaque to autograd as well. If you never train through
# it, nothing more is needed. If you do, and no backward formula is
# registered, PyTorch refuses rather than guessing:

pic = image.clone().requires_grad_()
try:
    crop(pic, box).sum().backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).splitlines()[0]}")
    assert "no autograd formula" in str(error)
else:
    raise AssertionError("expected backward through mylib::crop to fail")

# %%
# The derivative of a crop is a paste: every output pixel is one input pixel,
# so the gradient with respect to the input is the output's gradient pasted
# into zeros at the box's position. The backward formula must itself be made
# of operators PyTorch understands (so that it can be compiled and differentiated
# again), so the paste becomes a custom operator too, wrapping PIL's
# ``Image.paste``.


def check_paste(im1: torch.Tensor, im2: torch.Tensor, coord: Sequence[int]) -> None:
    check_image(im1, "im1")
    check_image(im2, "im2")
    if im1.device != im2.device:
        raise ValueError(f"im1 is on {im1.device} but im2 is on {im2.device}")
    if im1.dtype != im2.dtype:
        raise ValueError(f"im1 is {im1.dtype} but im2 is {im2.dtype}")
    if im1.shape[0] != im2.shape[0]:
        raise ValueError(f"im1 has {im1.shape[0]} channels but im2 has {im2.shape[0]}")
    if len(coord) != 2:
        raise ValueError(f"coord must be (left, upper), got {coord}")
    left, upper = coord
    _, height, width = im2.shape
    if not (
        0 <= left
        and left + width <= im1.shape[2]
        and 0 <= upper
        and upper + height <= im1.shape[1]
    ):
        raise ValueError(
            f"im2 ({height}x{width} pixels) placed at {tuple(coord)} leaves im1 "
            f"of shape {tuple(im1.shape)}"
        )


@torch.library.custom_op("mylib::paste", mutates_args=())
def paste(im1: torch.Tensor, im2: torch.Tensor, coord: Sequence[int]) -> torch.Tensor:
    check_paste(im1, im2, coord)
    check_pil_channels(im1, "im1")
    canvas = to_pil_image(im1.cpu())
    canvas.paste(to_pil_image(im2.cpu()), tuple(coord))
    return (pil_to_tensor(canvas) / 255).to(device=im1.device, dtype=im1.dtype)


@paste.register_fake
def _(im1, im2, coord):
    check_paste(im1, im2, coord)
    check_pil_channels(im1, "im1")
    channels, height, width = im1.shape
    return im1.new_empty(height, width, channels).permute(2, 0, 1)


# %%
# ``register_autograd`` takes two functions. ``setup_context`` runs after the
# forward and stores what the backward needs: here the input's shape and the
# box's top-left corner, both plain Python values. ``backward`` receives the
# gradient of the output and returns one gradient per input, ``None`` for the
# box, which is not a tensor.
#
# PyTorch's documentation recommends ``register_autograd`` over wrapping the
# operator in a ``torch.autograd.Function``: the latter can combine badly with
# the operator's registration and give wrong results under ``torch.compile``.


def crop_setup_context(ctx, inputs, output):
    pic, box = inputs
    ctx.pic_shape = pic.shape
    ctx.corner = (box[0], box[1])


def crop_backward(ctx, grad_output):
    zeros = grad_output.new_zeros(ctx.pic_shape)
    return paste(zeros, grad_output, ctx.corner), None


crop.register_autograd(crop_backward, setup_context=crop_setup_context)

# %%
# Summing the crop and calling ``backward`` gives the gradient of the sum with
# respect to every input pixel: 1 inside the box, 0 outside. In the picture
# that is a white square on black, exactly where the box was.

pic = image.clone().requires_grad_()
crop(pic, box).sum().backward()
inside_box = torch.zeros_like(image)
inside_box[:, box[1] : box[3], box[0] : box[2]] = 1
torch.testing.assert_close(pic.grad, inside_box)
show(pic.grad, "gradient of crop(pic).sum()")

# %%
# Testing Python custom operators
# -------------------------------
#
# ``torch.library.opcheck`` tests that an operator is *registered* correctly:
# its schema matches what it does (no hidden mutation, no aliasing of inputs),
# the fake kernel agrees with the real one on shapes, strides, dtype and
# device, the autograd registration is the supported kind, and the results and
# gradients are the same with and without compilation. It does not check that
# the operator computes the right thing; ``torch.autograd.gradcheck`` and
# comparisons with a reference do that.
#
# Give ``opcheck`` examples that cover what the operator promises: tensors
# that require grad and tensors that don't, every dtype, every device, and
# memory layouts other than the row-major one a fresh tensor has. A kernel or
# fake kernel that quietly assumes a contiguous input is a common bug, so two
# examples are laid out differently: every other column of a wider image (not
# contiguous), and an image stored channels-last (dense, but permuted).


def crop_examples(device):
    """Sample (pic, box) arguments for crop on one device."""
    every_other_column = torch.randn(3, 40, 96, device=device)[..., ::2]
    channels_last = torch.randn(48, 48, 3, device=device).permute(2, 0, 1)
    return [
        (torch.randn(3, 64, 64, device=device), (0, 0, 10, 10)),
        (torch.randn(3, 91, 91, device=device, requires_grad=True), (10, 0, 20, 10)),
        (torch.randn(3, 60, 60, dtype=torch.float64, device=device), (3, 4, 32, 20)),
        (
            torch.randn(
                3, 512, 512, dtype=torch.float64, device=device, requires_grad=True
            ),
            (3, 4, 32, 45),
        ),
        (every_other_column, (5, 5, 30, 25)),
        (channels_last.requires_grad_(), (8, 2, 40, 30)),
    ]


*_, (strided, _), (permuted, _) = crop_examples("cpu")
assert not strided.is_contiguous() and not permuted.is_contiguous()
assert permuted.stride()[0] == 1  # the channels of a pixel sit side by side


for device in devices:
    for args in crop_examples(device):
        torch.library.opcheck(crop, args)
print(f"opcheck passed for mylib::crop on {devices}")

# %%
# Every example passed. Yet those examples feed ``randn`` values, which fall
# far outside [0, 1], to a crop that squeezes them through 8 bits. Compare with
# the obvious reference, slicing:

pic, box_ = crop_examples("cpu")[2]
left, upper, right, lower = box_
error_8bit = (crop(pic, box_) - pic[:, upper:lower, left:right]).abs().max().item()
print(f"largest error of mylib::crop on randn input: {error_8bit:.3f}")
assert error_8bit > 0.5

# %%
# The error is huge because ``to_pil_image`` multiplies by 255 and casts to
# unsigned 8-bit integers: every value is rounded down to a multiple of 1/255,
# and values outside [0, 1] cannot be represented at all. ``opcheck`` did not
# notice because it compares the operator with itself, not with the truth.
#
# The gradient suffers too. The summed crop above had an upstream gradient of
# exactly 1, which survives the trip through 8 bits. Scale the output by 3 and
# the gradient inside the box should be 3:

pic = image.clone().requires_grad_()
(crop(pic, box) * 3).sum().backward()
grad_inside = pic.grad[0, box[1], box[0]].item()
print(f"gradient inside the box: {grad_inside:.4f} (should be 3)")
assert abs(grad_inside - 3) > 1

# %%
# ``gradcheck`` catches it
# ~~~~~~~~~~~~~~~~~~~~~~~~
#
# ``torch.autograd.gradcheck`` compares the backward formula with finite
# differences of the forward, on double-precision inputs. It needs no
# reference implementation, and it fails loudly here: the tiny steps it takes
# vanish in 8-bit rounding, so the numerical derivative is zero (nearly
# everywhere) while the analytical one is not. The same central differences,
# taken by hand after the failure, show it.

small = torch.rand(3, 8, 8, dtype=torch.float64, requires_grad=True)
try:
    torch.autograd.gradcheck(crop, (small, (2, 2, 6, 6)))
except GradcheckError as error:
    print(f"{type(error).__name__}: {str(error).splitlines()[0]}")
else:
    raise AssertionError("expected gradcheck to reject the 8-bit crop")

step = 1e-6  # gradcheck's default step
plain = small.detach()
up, down = crop(plain + step, (2, 2, 6, 6)), crop(plain - step, (2, 2, 6, 6))
numerical = (up - down) / (2 * step)
nonzero = numerical.count_nonzero().item()
print(f"finite differences: {nonzero} nonzero of {numerical.numel()} entries")
assert nonzero <= numerical.numel() // 10

# %%
# Fixing the operators: let PIL move bytes, not colours
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
#
# The schema, the fake-kernel idea and the backward-is-a-paste idea were all
# right. What was wrong is asking PIL to *interpret* the values. Cropping and
# pasting only move pixels around, so PIL can do the job without understanding
# the pixels at all: view each channel's raw memory as a grayscale image of
# bytes, ``element_size()`` bytes per pixel, and scale the horizontal
# coordinates by the same factor. Every dtype survives bit for bit, and the
# kernels keep the story of the page: PIL crops, PIL pastes.


def to_byte_planes(pic: torch.Tensor) -> list[Image.Image]:
    """One 8-bit PIL image per channel holding that channel's raw bytes."""
    channels, height, width = pic.shape
    raw = torch.empty(channels, height, width * pic.element_size(), dtype=torch.uint8)
    raw.view(pic.dtype).copy_(pic.detach())  # a row-major copy, seen as bytes
    return [Image.fromarray(plane.numpy()) for plane in raw]


def from_byte_planes(planes, like: torch.Tensor, height, width) -> torch.Tensor:
    """Undo ``to_byte_planes``: stack the planes and view them as ``like``'s dtype."""
    raw = torch.empty(
        len(planes), height, width * like.element_size(), dtype=torch.uint8
    )
    for index, plane in enumerate(planes):  # not np.stack: there may be no planes
        raw[index] = torch.from_numpy(np.array(plane))
    return raw.view(like.dtype).to(like.device)


@torch.library.custom_op("mylib::crop_exact", mutates_args=())
def crop_exact(pic: torch.Tensor, box: Sequence[int]) -> torch.Tensor:
    check_box(pic, box)
    left, upper, right, lower = box
    n = pic.element_size()
    planes = [p.crop((left * n, upper, right * n, lower)) for p in to_byte_planes(pic)]
    return from_byte_planes(planes, pic, lower - upper, right - left)


@torch.library.custom_op("mylib::paste_exact", mutates_args=())
def paste_exact(
    im1: torch.Tensor, im2: torch.Tensor, coord: Sequence[int]
) -> torch.Tensor:
    check_paste(im1, im2, coord)
    left, upper = coord
    n = im1.element_size()
    canvases = to_byte_planes(im1)
    for canvas, patch in zip(canvases, to_byte_planes(im2), strict=True):
        canvas.paste(patch, (left * n, upper))
    return from_byte_planes(canvases, im1, *im1.shape[1:])


# %%
# Both helpers allocate their byte buffers themselves. A first version viewed
# the input with ``.contiguous().view(torch.uint8)`` and joined the planes with
# ``np.stack``; the empty ``opcheck`` example further down broke both: an
# empty tensor may have zero strides, which ``view`` refuses to reinterpret,
# and an image with no channels gives no planes to stack.
#
# The new kernels return freshly stacked, contiguous tensors, so the fake
# kernels become simpler: a plain ``new_empty`` has the right strides.


@crop_exact.register_fake
def _(pic, box):
    check_box(pic, box)
    left, upper, right, lower = box
    return pic.new_empty(pic.shape[0], lower - upper, right - left)


@paste_exact.register_fake
def _(im1, im2, coord):
    check_paste(im1, im2, coord)
    return im1.new_empty(im1.shape)


# %%
# Crop and paste are each other's backward. The gradient of a crop is the
# incoming gradient pasted into zeros; the gradient of a paste is, for the
# canvas, the incoming gradient with the patch area zeroed (a paste of zeros),
# and for the patch, a crop of the incoming gradient. Because both backward
# formulas are built from these same differentiable operators, second
# derivatives work as well. The crop needs the same saved values as before, so
# it reuses ``crop_setup_context``.


def crop_exact_backward(ctx, grad_output):
    zeros = grad_output.new_zeros(ctx.pic_shape)
    return paste_exact(zeros, grad_output, ctx.corner), None


def paste_exact_setup_context(ctx, inputs, output):
    im1, im2, coord = inputs
    left, upper = coord
    _, height, width = im2.shape
    ctx.coord = (left, upper)
    ctx.box = (left, upper, left + width, upper + height)
    ctx.patch_shape = im2.shape


def paste_exact_backward(ctx, grad_output):
    hole = grad_output.new_zeros(ctx.patch_shape)
    grad_im1 = paste_exact(grad_output, hole, ctx.coord)
    grad_im2 = crop_exact(grad_output, ctx.box)
    return grad_im1, grad_im2, None


crop_exact.register_autograd(crop_exact_backward, setup_context=crop_setup_context)
paste_exact.register_autograd(
    paste_exact_backward, setup_context=paste_exact_setup_context
)

# %%
# Now the checks that caught the old operators pass. First, values: the crop
# equals slicing bit for bit, for every dtype we try, including values far
# outside [0, 1]; and pasting the crop back where it came from rebuilds the
# input.
#
# "Bit for bit" means comparing raw bytes. ``torch.equal`` compares values,
# and for values ``-0.0`` equals ``0.0`` while NaN equals nothing, not even
# itself: it would pass a crop that lost a sign and fail one that kept a NaN.
# So the floating-point test images hold both inside the box, and
# ``same_bytes`` compares the tensors' memory viewed as bytes.


def same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same dtype, same shape and the same bytes, element by element."""
    as_bytes = [t.contiguous().view(torch.uint8) for t in (a, b)]
    return (a.dtype, a.shape) == (b.dtype, b.shape) and torch.equal(*as_bytes)


zeros, nan = torch.tensor([-0.0, 0.0]), torch.tensor([float("nan")])
assert torch.equal(zeros[:1], zeros[1:]) and not same_bytes(zeros[:1], zeros[1:])
assert not torch.equal(nan, nan) and same_bytes(nan, nan)

dtypes = [
    *(torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64),
    *(torch.uint8, torch.int32, torch.int64, torch.bool),
]
test_box = (3, 4, 32, 20)
for dtype in dtypes:
    pic = (torch.randn(3, 60, 60) * 100).to(dtype)
    if dtype.is_floating_point or dtype.is_complex:
        pic[0, 5, 4], pic[1, 6, 5] = -0.0, float("nan")  # both inside test_box
    piece = crop_exact(pic, test_box)
    assert same_bytes(piece, pic[:, 4:20, 3:32]), dtype
    assert same_bytes(paste_exact(pic, piece, test_box[:2]), pic), dtype
print(f"crop_exact equals slicing byte for byte for {len(dtypes)} dtypes")

# %%
# Second, gradients: ``gradcheck`` and ``gradgradcheck`` pass for both
# operators, and an upstream gradient of 3 arrives as 3.

small = torch.rand(3, 8, 8, dtype=torch.float64, requires_grad=True)
patch = torch.rand(3, 3, 4, dtype=torch.float64, requires_grad=True)
assert torch.autograd.gradcheck(crop_exact, (small, (2, 2, 6, 6)))
assert torch.autograd.gradgradcheck(crop_exact, (small, (2, 2, 6, 6)))
assert torch.autograd.gradcheck(paste_exact, (small, patch, (1, 4)))
assert torch.autograd.gradgradcheck(paste_exact, (small, patch, (1, 4)))

pic = image.clone().requires_grad_()
(crop_exact(pic, box) * 3).sum().backward()
torch.testing.assert_close(pic.grad, 3 * inside_box)
print("gradcheck and gradgradcheck pass; upstream gradient 3 arrives as 3")

# %%
# Third, registration: ``opcheck`` passes on the same examples as before, on
# every device this run has, plus one the 8-bit crop had to refuse: an empty
# image, with no channels at all. The crop still compiles with
# ``fullgraph=True``, and its compiled gradient matches eager mode.

for device in devices:
    empty = torch.randn(0, 16, 16, device=device, requires_grad=True)
    for pic, box_ in [*crop_examples(device), (empty, (2, 2, 6, 6))]:
        torch.library.opcheck(crop_exact, (pic, box_))
        piece = crop_exact(pic.detach(), box_).requires_grad_(pic.requires_grad)
        torch.library.opcheck(paste_exact, (pic, piece, box_[:2]))
print(f"opcheck passed for crop_exact and paste_exact on {devices}")


def crop_exact_then_brighten(pic):
    return crop_exact(pic, box) * 1.25


compiled = torch.compile(crop_exact_then_brighten, fullgraph=True)
for device in devices:
    eager_pic = image.to(device, copy=True).requires_grad_()
    compiled_pic = image.to(device, copy=True).requires_grad_()
    crop_exact_then_brighten(eager_pic).sum().backward()
    compiled(compiled_pic).sum().backward()
    torch.testing.assert_close(compiled_pic.grad, eager_pic.grad)
print(f"compiled and eager gradients agree on {devices}")

# %%
# The figure puts the two versions side by side on ``randn`` input: the error
# of each crop against slicing, and the gradient each one gives for an upstream
# gradient of 3.

pic = torch.randn(3, 64, 64, dtype=torch.float64)
reference = pic[:, box[1] : box[3], box[0] : box[2]]
errors = {
    "8-bit crop": (crop(pic, box) - reference).abs().amax(dim=0).numpy(),
    "crop_exact": (crop_exact(pic, box) - reference).abs().amax(dim=0).numpy(),
}
grads = {}
for name, op in [("8-bit crop", crop), ("crop_exact", crop_exact)]:
    leaf = image.clone().requires_grad_()
    (op(leaf, box) * 3).sum().backward()
    grads[name] = leaf.grad[0].numpy()

largest_error = max(error.max() for error in errors.values())
fig, axes = plt.subplots(2, 2, figsize=(6, 5.6), layout="constrained")
for column, name in enumerate(errors):
    top = axes[0, column].imshow(errors[name], vmin=0, vmax=largest_error, cmap="magma")
    axes[0, column].set_title(f"{name}: |error|")
    bottom = axes[1, column].imshow(grads[name], vmin=0, vmax=3, cmap="viridis")
    axes[1, column].set_title(f"{name}: gradient")
for ax in axes.flat:
    ax.set_axis_off()
fig.colorbar(top, ax=axes[0, :], shrink=0.8)
fig.colorbar(bottom, ax=axes[1, :], shrink=0.8)
plt.show()
assert errors["crop_exact"].max() == 0 < errors["8-bit crop"].max()

# %%
# Bad input is rejected
# ~~~~~~~~~~~~~~~~~~~~~
#
# A box that leaves the image, a box turned inside out, an image that is not
# three-dimensional, or two images that disagree on device or dtype all raise
# a ``ValueError`` naming the problem.

# A second device to disagree with: the GPU if there is one, else "meta", a
# device whose tensors have shapes but no data.
other = "cuda" if torch.cuda.is_available() else "meta"
bad_calls = {
    "box leaves the image": lambda: crop_exact(image, (50, 50, 70, 60)),
    "right < left": lambda: crop_exact(image, (30, 10, 20, 40)),
    "not a 3-D image": lambda: crop_exact(image[0], box),
    "dtypes differ": lambda: paste_exact(image, image.double()[:, :4, :4], (0, 0)),
    "devices differ": lambda: paste_exact(image, image[:, :4, :4].to(other), (0, 0)),
    "patch leaves the canvas": lambda: paste_exact(image, image[:, :8, :8], (60, 0)),
}
for problem, call in bad_calls.items():
    try:
        call()
    except ValueError as error:
        print(f"{problem:>24}: ValueError: {error}")
    else:
        raise AssertionError(f"expected a ValueError for: {problem}")

# %%
# The fake kernels run the same checks, so under ``torch.compile`` a bad box
# is caught while compiling, before any real computation. Dynamo reports it as
# a ``TorchRuntimeError`` that quotes our ``ValueError``:

crop_outside = torch.compile(
    lambda pic: crop_exact(pic, (50, 50, 70, 60)), fullgraph=True
)
try:
    crop_outside(image)
except torch._dynamo.exc.TorchRuntimeError as error:
    quoted = next(line for line in str(error).splitlines() if "ValueError" in line)
    print(quoted.strip())
    assert "fake tensors" in quoted
    assert "must satisfy 0 <= left < right <= 64" in quoted
else:
    raise AssertionError("expected compiling a bad crop to fail")

# %%
# Mutable Python custom operators
# -------------------------------
#
# Many low-level routines do not return a result: they write it into a buffer
# that the caller provides. A custom operator can do the same, as long as it
# says so. ``mutates_args`` names every argument the function writes into, and
# the function returns ``None``.
#
# Here NumPy's ``np.sin`` writes into ``output`` through a NumPy view that
# shares the tensor's memory. ``device_types="cpu"`` registers the kernel for
# CPU tensors only, since NumPy cannot read GPU memory. Because the operator
# declares what it writes and returns nothing, there is no output to describe:
# PyTorch generates the (empty) fake kernel itself, and ``torch.compile`` needs
# none from us.


@torch.library.custom_op(
    "mylib::numpy_sin", mutates_args={"output"}, device_types="cpu"
)
def numpy_sin(input: torch.Tensor, output: torch.Tensor) -> None:
    if input.shape != output.shape or input.dtype != output.dtype:
        raise ValueError(
            f"output ({tuple(output.shape)}, {output.dtype}) must match input "
            f"({tuple(input.shape)}, {input.dtype})"
        )
    np.sin(input.numpy(), out=output.numpy())


# %%
# A compiled function can allocate the buffer, call the operator and return the
# buffer; the result matches ``torch.sin``.


@torch.compile(fullgraph=True)
def sin_through_numpy(x):
    out = torch.empty_like(x)
    numpy_sin(x, out)
    return out


x = torch.randn(3)
torch.testing.assert_close(sin_through_numpy(x), x.sin())
print(f"compiled numpy_sin: {sin_through_numpy(x)}")

# %%
# ``opcheck`` checks, among other things, that the operator writes into no
# argument it has not declared. The examples include an empty tensor, a
# double-precision four-dimensional one, and buffers in unusual layouts: a
# non-contiguous one (every other column) and a transposed one (dense, but
# column-major). NumPy writes through views with any strides, so the operator
# handles them all. None requires grad: an operator that fills a buffer has
# no derivative, and this one registers none.

wide_buffer = torch.empty(4, 10)
sin_examples = [
    (torch.randn(3), torch.empty(3)),
    (torch.randn(0, 3), torch.empty(0, 3)),
    (torch.randn(1, 2, 3, 4).double(), torch.empty(1, 2, 3, 4).double()),
    (torch.randn(4, 5), wide_buffer[:, ::2]),
    (torch.randn(6, 4).t(), torch.empty(6, 4).t()),
]
for x, output in sin_examples:
    torch.library.opcheck(numpy_sin, (x, output))
    numpy_sin(x, output)
    torch.testing.assert_close(output, x.sin())
print(f"opcheck passed for mylib::numpy_sin on {len(sin_examples)} examples")

# %%
# Leave ``output`` out of ``mutates_args`` and ``opcheck`` fails, because the
# operator now writes into an argument it promised to leave alone. The
# compiler relies on that promise to reorder and reuse memory, so breaking it
# can lead to wrong results, not only to a failed test:
# :ref:`sphx_glr_tutorials_mutable_custom_ops.py` shows a compiled function
# that silently drops such a call. With ``raise_exception=False`` we see every
# test's verdict:


@torch.library.custom_op(
    "mylib::numpy_sin_undeclared", mutates_args=(), device_types="cpu"
)
def numpy_sin_undeclared(input: torch.Tensor, output: torch.Tensor) -> None:
    np.sin(input.numpy(), out=output.numpy())


x = torch.randn(3)
results = torch.library.opcheck(
    numpy_sin_undeclared, (x, torch.empty_like(x)), raise_exception=False
)
for test, outcome in results.items():
    verdict = "SUCCESS" if outcome == "SUCCESS" else str(outcome).splitlines()[0]
    print(f"{test}: {verdict}")
assert "not defined as mutable but was mutated" in str(results["test_schema"])
assert results["test_faketensor"] != "SUCCESS"

# %%
# ``test_schema`` names the problem. The fake-tensor tests fail as a
# consequence: PyTorch supplies the empty fake kernel itself only for an
# operator that declares what it writes, so this one has no fake kernel at all.

# %%
# Conclusion
# ----------
#
# ``torch.library.custom_op`` turns a Python function into an operator that
# ``torch.compile`` treats as one opaque node and that autograd can
# differentiate once you register a backward formula. A fake kernel describes
# the output's metadata, strides included; ``opcheck`` verifies that the pieces
# are registered consistently, and ``gradcheck`` verifies the mathematics that
# ``opcheck`` never looks at. The 8-bit crop passed ``opcheck`` and still
# returned wrong values and wrong gradients; the byte-exact crop passes both
# tests.
#
# Next, :ref:`sphx_glr_tutorials_mutable_custom_ops.py` looks more closely at
# operators that write into their inputs, and
# :ref:`sphx_glr_tutorials_custom_op_registrations.py` covers the other
# registrations (``register_kernel``, ``register_vmap``, ``register_autocast``).
# For reference, see the `torch.library documentation
# <https://pytorch.org/docs/stable/library.html>`_ and the `custom operators
# manual <https://pytorch.org/tutorials/advanced/custom_ops_landing_page.html>`_.
