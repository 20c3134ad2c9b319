"""
Custom Python Operators
=======================

After this page you will be able to turn a Python function that PyTorch cannot
see inside, such as a call into an image library, into an operator that works
with ``torch.compile`` and autograd, and to test it with the two checks that
tell you whether you got it right.

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
      reference.

Wrapping a function as a *custom operator* buys two things: ``torch.compile``
treats it as a black box instead of breaking the graph around it, and autograd
can learn its derivative. C++ operators are made differently (see
:ref:`sphx_glr_tutorials_cpp_custom_ops.py`), and a function that is already
made of PyTorch operators needs no custom operator at all.
"""

# %%
# Setting up
# ----------
#
# Everything runs on the CPU; when a CUDA device is present, the operators are
# also exercised on it.

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import logging
import warnings
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from PIL import Image
from torch.autograd.gradcheck import GradcheckError
from torchvision.transforms.functional import pil_to_tensor, to_pil_image

# sphinx_gallery_start_ignore
# Two warnings beside the point: Dynamo's, when it steps through a cache inside
# Pillow while tracing the plain crop below, and Inductor's C++ build's, on a
# machine that has a CUDA toolkit but no GPU.
warnings.filterwarnings("ignore", message=r".*functools\.lru_cache")
logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
# sphinx_gallery_end_ignore

torch.manual_seed(0)
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")

# %%
# Two private names appear below because nothing public does their job:
# ``torch._dynamo.explain`` counts graph breaks, and ``torch._dynamo.exc``
# holds Dynamo's exceptions.
#
# Example: wrapping PIL's crop
# ----------------------------
#
# Our stand-in for a library PyTorch knows nothing about is
# `Pillow <https://pillow.readthedocs.io>`_, whose ``Image.crop`` cuts a
# ``(left, upper, right, lower)`` box out of an image. Like the published
# version of this tutorial, the plain version goes through an 8-bit RGB
# picture. Keep that detail in mind.


def pil_crop(pic: torch.Tensor, box: Sequence[int]) -> torch.Tensor:
    """Crop a (C, H, W) float image in [0, 1] through an 8-bit PIL image."""
    as_pil = to_pil_image(pic.cpu())
    cropped = pil_to_tensor(as_pil.crop(tuple(box)))
    return (cropped / 255).to(device=pic.device, dtype=pic.dtype)


# sphinx_gallery_start_ignore
def show(pic: torch.Tensor, title: str) -> None:
    """Draw a (C, H, W) image tensor with values in [0, 1]."""
    fig, ax = plt.subplots(figsize=(2.6, 2.6), layout="constrained")
    ax.imshow(pic.detach().cpu().permute(1, 2, 0).clamp(0, 1).numpy())
    ax.set_title(title)
    ax.set_axis_off()
    plt.show()


# sphinx_gallery_end_ignore


# %%
# The test image is a ramp from black (top left) to white (bottom right).

ramp = torch.linspace(0, 1, 64)
image = torch.ones(3, 64, 64) * torch.outer(ramp, ramp)
print(f"image: shape {tuple(image.shape)}, dtype {image.dtype}")
show(image, "test image")

# %%
# The box ``(10, 10, 50, 50)`` keeps a 40 by 40 square from the middle.

box = (10, 10, 50, 50)
cropped = pil_crop(image, box)
print(f"cropped: shape {tuple(cropped.shape)}")
assert cropped.shape == (3, 40, 40)
show(cropped, "pil_crop(image, box)")

# %%
# Graph breaks
# ------------
#
# ``torch.compile`` traces Python into a graph of PyTorch operators. Where it
# gets stuck inside PIL, it splits the function and runs that part in plain
# Python. Such a *graph break* costs speed and hides both sides from the
# optimizer:


def crop_then_brighten(pic):
    return pil_crop(pic, box) * 1.25


explanation = torch._dynamo.explain(crop_then_brighten)(image)
print(f"graph breaks with pil_crop: {explanation.graph_break_count}")
assert explanation.graph_break_count >= 1

# %%
# With ``fullgraph=True``, a graph break is an error instead:

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
# 1. Decorate a function with ``torch.library.custom_op``. ``"mylib::crop"``
#    is a namespace and a name; the type hints become the operator's schema.
#    ``mutates_args=()`` promises that it writes into none of its inputs, and
#    the result must be a new tensor.
# 2. Register a *fake kernel* with ``register_fake``. The compiler traces with
#    fake tensors, which have a shape, strides, dtype and device but no data;
#    the fake kernel says what the output looks like without computing it.
#
# The operators check their arguments first and raise a ``ValueError``: PIL
# itself pads a box that leaves the image with zeros, a wrong tensor rather
# than an error, and a PIL image holds only 1 to 4 channels.


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
# ``torch.library.infer_schema`` shows the schema read from the type hints:
# ``Sequence[int]`` became a list of (symbolic) integers.

crop_schema = torch.library.infer_schema(pil_crop, mutates_args=())
print(f"schema of mylib::crop: {crop_schema}")
assert crop_schema == "(Tensor pic, SymInt[] box) -> Tensor"

# %%
# The fake kernel must describe the real output exactly, strides included.
# ``pil_to_tensor`` returns a ``(C, H, W)`` view of memory laid out as
# ``(H, W, C)``, so the fake kernel allocates ``(H, W, C)`` and permutes it.


@crop.register_fake
def _(pic, box):
    check_box(pic, box)
    check_pil_channels(pic)
    left, upper, right, lower = box
    channels_last = pic.new_empty(lower - upper, right - left, pic.shape[0])
    return channels_last.permute(2, 0, 1)


# %%
# Calling the operator on a ``meta`` tensor (metadata, no data) runs the fake
# kernel, a public way to compare it with the real one:

real = crop(image, box)
fake = crop(image.to("meta"), box)
print(f"real output: shape {tuple(real.shape)}, strides {real.stride()}")
print(f"fake output: shape {tuple(fake.shape)}, strides {fake.stride()}")
assert (fake.shape, fake.stride()) == (real.shape, real.stride())

# %%
# ``opcheck``, below, makes this comparison too (which releases compare CPU
# strides is shown in :ref:`sphx_glr_tutorials_operator_signatures.py`). With
# ``crop`` in place of ``pil_crop``, the computation now compiles in one
# graph, with ``mylib::crop`` as a single node:


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
# A custom operator is opaque to autograd too. Without a backward formula,
# PyTorch refuses to train through it rather than guess:

pic = image.clone().requires_grad_()
try:
    crop(pic, box).sum().backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).splitlines()[0]}")
    assert "no autograd formula" in str(error)
else:
    raise AssertionError("expected backward through mylib::crop to fail")

# %%
# The derivative of a crop is a paste: the output's gradient pasted into zeros
# at the box. The backward must itself be made of operators PyTorch
# understands, so the paste becomes a custom operator too, around PIL's
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
# forward and stores what the backward needs: the input's shape and the box's
# corner. ``backward`` returns one gradient per input, ``None`` for the box.


def crop_setup_context(ctx, inputs, output):
    pic, box = inputs
    ctx.pic_shape = pic.shape
    ctx.corner = (box[0], box[1])


def crop_backward(ctx, grad_output):
    zeros = grad_output.new_zeros(ctx.pic_shape)
    return paste(zeros, grad_output, ctx.corner), None


crop.register_autograd(crop_backward, setup_context=crop_setup_context)

# %%
# The gradient of the summed crop is 1 inside the box and 0 outside: a white
# square where the box was.

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
# the schema matches what it does, the fake kernel agrees with the real one,
# the autograd registration is the supported kind, and compiled results equal
# eager ones. It does not check that the operator computes the right thing.
#
# Give it examples that cover what the operator promises: with and without
# ``requires_grad``, every dtype and device, and layouts other than row-major
# (assuming a contiguous input is a common bug): every other column of a wider
# image, and a channels-last image (dense, but permuted).


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
# Every example passed. Yet they fed ``randn`` values, far outside [0, 1], to
# a crop that squeezes them through 8 bits. Compare with slicing:

pic, box_ = crop_examples("cpu")[2]
left, upper, right, lower = box_
error_8bit = (crop(pic, box_) - pic[:, upper:lower, left:right]).abs().max().item()
print(f"largest error of mylib::crop on randn input: {error_8bit:.3f}")
assert error_8bit > 0.5

# %%
# ``to_pil_image`` rounds every value to a multiple of 1/255 and cannot hold
# values outside [0, 1]. ``opcheck`` compares the operator with itself, not
# with the truth, so it did not notice.
#
# The gradient suffers too. An upstream gradient of 1 survives 8 bits; scale
# the output by 3 and the gradient inside the box should be 3:

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
# differences of the forward, in double precision, with no reference needed.
# Its tiny steps vanish in 8-bit rounding, so the numerical derivative is
# (nearly) zero, as the same differences taken by hand show:

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
# The registrations were right; asking PIL to *interpret* the values was
# wrong. Cropping and pasting only move pixels, so give PIL each channel's raw
# memory as a grayscale image of bytes, ``element_size()`` bytes per pixel,
# and scale the horizontal coordinates to match. PIL still crops and pastes,
# and every dtype survives unchanged.


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
# The new kernels return contiguous tensors, so a plain ``new_empty`` has the
# right strides:


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
# Crop and paste are each other's backward: a paste's gradient is, for the
# canvas, the incoming gradient with the patch area pasted over with zeros,
# and for the patch, a crop of it. Built from differentiable operators, the
# backward formulas can be differentiated again.


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
# Now the checks that caught the old operators pass. First, values: on
# several dtypes and values far outside [0, 1], the crop equals slicing, and
# pasting it back rebuilds the input.

dtypes = [
    *(torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64),
    *(torch.uint8, torch.int32, torch.int64, torch.bool),
]
test_box = (3, 4, 32, 20)
for dtype in dtypes:
    pic = (torch.randn(3, 60, 60) * 100).to(dtype)
    piece = crop_exact(pic, test_box)
    assert torch.equal(piece, pic[:, 4:20, 3:32]), dtype
    assert torch.equal(paste_exact(pic, piece, test_box[:2]), pic), dtype
print(f"crop_exact equals slicing for {len(dtypes)} dtypes")

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
# Third, registration: ``opcheck`` passes on the same examples, plus an image
# with no channels, which the 8-bit crop had to refuse. The compiled gradient
# matches eager mode.

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
# The figure follows one row of ``randn`` input through both crops: the 8-bit
# crop only returns values in [0, 1], while ``crop_exact`` matches slicing
# exactly.

pic = torch.randn(3, 64, 64, dtype=torch.float64)
reference = pic[:, box[1] : box[3], box[0] : box[2]]
crops = {"slicing": reference, "8-bit crop": crop(pic, box)}
crops["crop_exact"] = crop_exact(pic, box)
fig, ax = plt.subplots(figsize=(6, 2.8), layout="constrained")
for (name, piece), style in zip(crops.items(), ["-", "o", "x"], strict=True):
    ax.plot(piece[0, 20].numpy(), style, label=name)
ax.set(xlabel="column inside the box", ylabel="channel 0, row 20")
fig.legend(loc="outside upper center", ncols=3, frameon=False)
plt.show()
errors = {name: (piece - reference).abs().max().item() for name, piece in crops.items()}
assert errors["crop_exact"] == 0 < errors["8-bit crop"]
assert 0 <= crops["8-bit crop"].min() and crops["8-bit crop"].max() <= 1

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
# Operators that write into a buffer
# ----------------------------------
#
# An operator may instead write its result into a buffer the caller passes.
# It names that argument in ``mutates_args`` and returns ``None``, and PyTorch
# then writes its (empty) fake kernel itself. Here NumPy writes through a view
# of ``output``, so the kernel is registered for CPU tensors only.
# :ref:`sphx_glr_tutorials_mutable_custom_ops.py` shows what goes wrong when
# the declaration is missing, and what the compiler does with such operators.


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


x, output = torch.randn(3), torch.empty(3)
torch.library.opcheck(numpy_sin, (x, output))
numpy_sin(x, output)
torch.testing.assert_close(output, x.sin())
print(f"numpy_sin passes opcheck with no register_fake: {output}")

# %%
# Conclusion
# ----------
#
# ``torch.library.custom_op`` turns a Python function into an operator that
# ``torch.compile`` treats as one opaque node, and that autograd
# differentiates once you register a backward. The fake kernel describes the
# output, strides included. ``opcheck`` verifies the registrations;
# ``gradcheck`` and a reference verify the mathematics: the 8-bit crop passed
# the first and failed the others.
#
# Next, :ref:`sphx_glr_tutorials_mutable_custom_ops.py` looks at operators
# that write into their inputs, and
# :ref:`sphx_glr_tutorials_custom_op_registrations.py` covers the other
# registrations. See also the `torch.library documentation
# <https://pytorch.org/docs/stable/library.html>`_.
