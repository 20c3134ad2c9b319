"""
Troubleshooting Custom Operators
================================

This page is a field guide to the mistakes people really make when they write
custom operators with ``torch.library.custom_op``. Each section commits one
mistake on purpose, shows the exact error PyTorch reports, and then repairs the
operator until ``torch.library.opcheck``, ``torch.autograd.gradcheck`` or a
comparison with a reference agrees. When you meet one of these errors in your
own code, look up a distinctive piece of its first line in the table below and
jump to the section that explains it.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * How to read the errors from ``opcheck``, ``gradcheck`` and
         ``torch.compile`` and trace each one back to its cause
       * How to fix fake kernels, schemas, aliasing, backward formulas and
         device handling
       * Why ``opcheck`` and ``gradcheck`` belong in every operator's tests

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later
       * :ref:`sphx_glr_tutorials_python_custom_ops.py`

Error index
-----------

Each fragment below is copied from the first line of an error that this page
provokes while it runs. The last cell of the page checks every fragment
against the messages it actually recorded, so the index cannot drift away
from what PyTorch says.

.. list-table::
   :header-rows: 1
   :widths: 45 55

   * - The first line of the error contains
     - Go to
   * - ``Stride mismatch``
     - `Fake kernel with the wrong strides`_
   * - ``data-dependent expression``
     - `Fake kernel that reads tensor data`_
   * - ``is not defined as mutable but was mutated``
     - `Mutation missing from mutates_args`_
   * - ``must not also be an input to this custom operator``
     - `Returning an input or a view of it`_
   * - ``RuntimeError when making fake tensor call``
     - `No fake kernel under torch.compile`_
   * - ``There was no fake impl registered``
     - `No fake kernel under torch.compile`_
   * - ``has unsupported type``
     - `Unsupported argument types`_
   * - ``Jacobian mismatch``
     - `A backward written in NumPy`_
   * - ``is not supported for tensor subclasses``
     - `A backward written in NumPy`_
   * - ``Could not run``
     - `Tensors on the wrong device`_
"""

# %%
# Setting up
# ----------
#
# The page runs on the CPU and, when a CUDA device is present, also checks
# the repaired operators there.

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import textwrap
import warnings

import numpy as np
from torch import Tensor
from torch.autograd.gradcheck import GradcheckError
from torch.testing._internal.optests.generate_tests import OpCheckError

torch.manual_seed(0)
np.random.seed(0)
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")

# %%
# ``OpCheckError`` (raised by ``opcheck``) and ``GradcheckError`` (raised by
# ``gradcheck``) have no public home, so we import them from the modules that
# define them. Catching these exact classes, rather than any ``Exception``,
# proves that the test we meant to trip is the one that fired.
#
# Every error the page provokes goes through ``record``: it prints the
# exception's type and the first line of its message, and files that line
# under the section's title for the final check of the error index.

caught: dict[str, list[str]] = {}


def wrap(text: str) -> str:
    """Wrap a long message for printing without splitting paths or words."""
    return textwrap.fill(
        text, 88, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
    )


def record(section: str, error: BaseException) -> str:
    """Print an expected error and remember its first line under ``section``."""
    first_line = str(error).strip().splitlines()[0]
    caught.setdefault(section, []).append(first_line)
    shown = first_line if len(first_line) <= 240 else first_line[:237] + "..."
    print(wrap(f"{type(error).__name__}: {shown}"))
    return first_line


# %%
# The two detectors
# -----------------
#
# ``torch.library.opcheck(op, args)`` runs the operator on the arguments you
# give it several times, under different subsystems, and compares what
# happens with what the registration promised. The individual tests are:
#
# * ``test_schema``: does the kernel mutate or alias exactly what the schema
#   says it does?
# * ``test_autograd_registration``: is training support registered the
#   supported way?
# * ``test_faketensor``: does the fake kernel produce the same shapes, strides,
#   dtype and device as the real one?
# * ``test_aot_dispatch_dynamic``: do the forward and backward survive the
#   tracing that ``torch.compile`` performs?
#
# ``opcheck`` never checks that the numbers are right. Here is an operator
# meant to negate its input that doubles it as well: every test reports
# success, and only a comparison with a reference finds the bug.


@torch.library.custom_op("troubleshoot::negate_wrongly", mutates_args=())
def negate_wrongly(x: Tensor) -> Tensor:
    return x * -2  # the bug: should be x * -1


negate_wrongly.register_fake(lambda x: torch.empty_like(x))

sample = torch.randn(3)
report = torch.library.opcheck(negate_wrongly, (sample,), raise_exception=False)
print(report)
assert set(report) == {
    "test_schema",
    "test_autograd_registration",
    "test_faketensor",
    "test_aot_dispatch_dynamic",
}
assert all(outcome == "SUCCESS" for outcome in report.values())
try:
    torch.testing.assert_close(negate_wrongly(sample), -sample)
except AssertionError as error:
    print(f"against a reference: {type(error).__name__}: {str(error).splitlines()[0]}")
else:
    raise AssertionError("expected the doubled result to differ from -sample")

# %%
# Checking values is the job of ``torch.autograd.gradcheck`` (for the
# backward, against finite differences) and of comparisons with a plain
# PyTorch reference. Every fix below passes ``opcheck`` and at least one of
# these value checks.
#
# Fake kernel with the wrong strides
# ----------------------------------
#
# A fake kernel describes the output of the operator without computing it.
# "Describes" includes the *strides*, the steps through memory for each
# dimension, not only the shape. Here the real kernel returns a copy of the
# transposed matrix. ``clone`` keeps the memory layout of the tensor it
# copies, so the copy of a transposed view is laid out column by column.
# The fake kernel, written with the shape in mind, allocates a row-major
# tensor.


def check_matrix(x: Tensor) -> None:
    if x.dim() != 2:
        raise ValueError(f"expected a 2-D matrix, got shape {tuple(x.shape)}")


@torch.library.custom_op("troubleshoot::transposed_copy_bad", mutates_args=())
def transposed_copy_bad(x: Tensor) -> Tensor:
    check_matrix(x)
    return x.t().clone()


@transposed_copy_bad.register_fake
def _(x):
    check_matrix(x)
    return x.new_empty(x.shape[1], x.shape[0])


matrix = torch.randn(3, 4)
print(f"real output strides: {transposed_copy_bad(matrix).stride()}")
assert transposed_copy_bad(matrix).stride() == matrix.t().stride()  # column-major

# %%
# The shapes agree, so nothing looks wrong in eager mode. ``opcheck``
# compares every piece of metadata and fails in ``test_faketensor``:

assert transposed_copy_bad(matrix).shape == (matrix.shape[1], matrix.shape[0])
try:
    torch.library.opcheck(transposed_copy_bad, (matrix,))
except OpCheckError as error:
    assert "test_faketensor" in record("Fake kernel with the wrong strides", error)
else:
    raise AssertionError("expected opcheck to reject the row-major fake kernel")

# %%
# The compiler plans memory and picks kernels from the fake kernel's answer,
# so a wrong stride can turn into wrong results or crashes in compiled code.
# Either side can be changed to agree with the other. Making the real
# kernel return a predictable layout is usually the easier one: here it
# always returns a fresh row-major copy. Unlike ``contiguous()``,
# ``clone(memory_format=...)`` copies even when the transposed view happens to
# be row-major already, which matters because returning a view of the input
# is another mistake (see `Returning an input or a view of it`_).


@torch.library.custom_op("troubleshoot::transposed_copy", mutates_args=())
def transposed_copy(x: Tensor) -> Tensor:
    check_matrix(x)
    return x.t().clone(memory_format=torch.contiguous_format)


@transposed_copy.register_fake
def _(x):
    check_matrix(x)
    return x.new_empty(x.shape[1], x.shape[0])


for device in devices:
    square = torch.randn(3, 4, device=device)
    for sample in (square, square.t()):
        torch.library.opcheck(transposed_copy, (sample,))
        torch.testing.assert_close(transposed_copy(sample), sample.t())
print(f"opcheck passed for row-major and column-major inputs on {devices}")

# %%
# Fake kernel that reads tensor data
# ----------------------------------
#
# Fake tensors have no data. Some operators produce an output whose *size*
# depends on the input's *values*: here each row of ``x`` is repeated as many
# times as ``counts`` says, so the number of output rows is
# ``counts.sum()``. Calling ``.item()`` (or ``.tolist()``) on a fake tensor
# cannot produce a number.


def check_repeat_args(x: Tensor, counts: Tensor) -> None:
    if counts.dim() != 1 or counts.dtype != torch.int64:
        raise ValueError(f"counts must be a 1-D int64 tensor, got {counts.dtype}")
    if x.dim() == 0 or counts.shape[0] != x.shape[0]:
        raise ValueError(
            f"need one count per row: x has shape {tuple(x.shape)}, "
            f"counts has {counts.shape[0]} entries"
        )


@torch.library.custom_op("troubleshoot::repeat_rows_bad", mutates_args=())
def repeat_rows_bad(x: Tensor, counts: Tensor) -> Tensor:
    check_repeat_args(x, counts)
    return x.repeat_interleave(counts, dim=0)


@repeat_rows_bad.register_fake
def _(x, counts):
    check_repeat_args(x, counts)
    total_rows = int(counts.sum().item())
    return x.new_empty(total_rows, *x.shape[1:])


rows = torch.randn(3, 2)
counts = torch.tensor([1, 0, 2])
try:
    torch.library.opcheck(repeat_rows_bad, (rows, counts))
except OpCheckError as error:
    record("Fake kernel that reads tensor data", error)
else:
    raise AssertionError("expected opcheck to reject a fake kernel that calls item")

# %%
# Inside the fake kernel, ``.item()`` returned a symbol standing for an
# unknown integer, and converting that symbol to a Python ``int`` needs the
# value, which does not exist. The fix is to say "this size is only known
# at run time" with ``torch.library.get_ctx().new_dynamic_size()``. The real
# kernel also checks the values it can only see there: negative counts.


@torch.library.custom_op("troubleshoot::repeat_rows", mutates_args=())
def repeat_rows(x: Tensor, counts: Tensor) -> Tensor:
    check_repeat_args(x, counts)
    if (counts < 0).any():
        raise ValueError(f"counts must be non-negative, got {counts.tolist()}")
    return x.repeat_interleave(counts, dim=0)


@repeat_rows.register_fake
def _(x, counts):
    check_repeat_args(x, counts)
    total_rows = torch.library.get_ctx().new_dynamic_size()
    return x.new_empty(total_rows, *x.shape[1:])


for device in devices:
    torch.library.opcheck(repeat_rows, (rows.to(device), counts.to(device)))
    expected = torch.stack([rows[0], rows[2], rows[2]]).to(device)
    torch.testing.assert_close(
        repeat_rows(rows.to(device), counts.to(device)), expected
    )
print(f"opcheck passed for troubleshoot::repeat_rows on {devices}")

try:
    repeat_rows(rows, torch.tensor([1, -1, 2]))
except ValueError as error:
    print(f"{type(error).__name__}: {error}")
else:
    raise AssertionError("expected a negative count to be rejected")

# %%
# Mutation missing from mutates_args
# ----------------------------------
#
# ``mutates_args`` is a promise. The compiler reorders, deduplicates and
# deletes operator calls based on it, so an operator that writes into an
# argument without listing it can silently lose the write. Here the kernel
# clamps its input in place but declares no mutation:


@torch.library.custom_op("troubleshoot::relu_in_place_bad", mutates_args=())
def relu_in_place_bad(x: Tensor) -> None:
    x.clamp_(min=0)


try:
    torch.library.opcheck(relu_in_place_bad, (torch.randn(5),))
except OpCheckError as error:
    assert "test_schema" in record("Mutation missing from mutates_args", error)
else:
    raise AssertionError("expected opcheck to catch the undeclared mutation")

# %%
# ``test_schema`` compared the input before and after the call and found it
# changed. Naming ``x`` in ``mutates_args`` marks it as written in the schema
# (the ``!`` in ``Tensor(a0!) x``), and the test passes.


@torch.library.custom_op("troubleshoot::relu_in_place", mutates_args={"x"})
def relu_in_place(x: Tensor) -> None:
    x.clamp_(min=0)


schema = torch.ops.troubleshoot.relu_in_place.default._schema
print(f"schema: {schema}")
assert schema.arguments[0].alias_info.is_write
for device in devices:
    values = torch.randn(5, device=device)
    torch.library.opcheck(relu_in_place, (values.clone(),))
    clamped = values.clone()
    relu_in_place(clamped)
    torch.testing.assert_close(clamped, values.relu())
print(f"opcheck passed for troubleshoot::relu_in_place on {devices}")

# %%
# Returning an input or a view of it
# ----------------------------------
#
# An operator made with ``custom_op`` must return fresh tensors. Two
# innocent-looking shortcuts break this: a fast path that hands back the input
# when there is nothing to do, and returning a view (a reshape, a slice) that
# shares the input's memory. PyTorch checks each call and refuses both:


@torch.library.custom_op("troubleshoot::clip_unit_bad", mutates_args=())
def clip_unit_bad(x: Tensor) -> Tensor:
    if x.abs().max() <= 1:
        return x  # nothing to clip, so skip the copy
    return x.clamp(-1, 1)


@torch.library.custom_op("troubleshoot::flatten_bad", mutates_args=())
def flatten_bad(x: Tensor) -> Tensor:
    return x.view(-1)


rules = []
for call in (
    lambda: clip_unit_bad(torch.rand(4)),
    lambda: flatten_bad(torch.randn(2, 3)),
):
    try:
        call()
    except RuntimeError as error:
        message = record("Returning an input or a view of it", error)
        rules.append(message.split("The output of this custom operator")[1])
    else:
        raise AssertionError("expected the aliasing check to fire")
assert rules[0] == rules[1]

# %%
# Both messages state the same rule: an output may neither be an input nor
# share memory with one. The compiler relies on that rule when it decides
# which buffers it may reuse or overwrite, so the fix is to pay for a copy.


@torch.library.custom_op("troubleshoot::clip_unit", mutates_args=())
def clip_unit(x: Tensor) -> Tensor:
    if x.abs().max() <= 1:
        return x.clone()
    return x.clamp(-1, 1)


@torch.library.custom_op("troubleshoot::flatten", mutates_args=())
def flatten(x: Tensor) -> Tensor:
    return x.reshape(-1).clone()


clip_unit.register_fake(lambda x: torch.empty_like(x))
flatten.register_fake(lambda x: x.new_empty(x.numel()))

for device in devices:
    small, large = torch.rand(4, device=device), 5 * torch.randn(4, device=device)
    transposed = (5 * torch.randn(3, 4, device=device)).t()
    for x in (small, large, transposed):
        torch.library.opcheck(clip_unit, (x,))
        torch.testing.assert_close(clip_unit(x), x.clamp(-1, 1))
    grid = torch.randn(2, 3, device=device)
    torch.library.opcheck(flatten, (grid,))
    flat = flatten(grid)
    assert torch.equal(flat, grid.reshape(-1)) and flat.data_ptr() != grid.data_ptr()
print(f"opcheck passed for clip_unit and flatten on {devices}")

# %%
# ``empty_like`` keeps the input's strides, like ``clone`` in the kernel, so
# this fake kernel stays correct for non-contiguous inputs too.
#
# No fake kernel under torch.compile
# ----------------------------------
#
# An operator built on NumPy works in eager mode without a fake kernel.
# ``torch.compile`` traces with fake tensors, so the first compiled call
# needs one. We compile with the ``aot_eager`` backend, which traces like the
# default backend but skips code generation, to keep the page fast.


@torch.library.custom_op("troubleshoot::numpy_cube", mutates_args=())
def numpy_cube(x: Tensor) -> Tensor:
    cubed = np.power(x.numpy(force=True), 3)
    return torch.from_numpy(cubed).to(x.device)


def cube_plus_one(x):
    return numpy_cube(x) + 1


vector = torch.randn(4)
torch.testing.assert_close(cube_plus_one(vector), vector**3 + 1)  # eager works
try:
    torch.compile(cube_plus_one, fullgraph=True, backend="aot_eager")(vector)
except torch._dynamo.exc.TorchRuntimeError as error:
    record("No fake kernel under torch.compile", error)
    explanation = next(
        line for line in str(error).splitlines() if "no fake impl" in line
    )
    print(wrap(explanation.strip()))
else:
    raise AssertionError("expected torch.compile to fail without a fake kernel")

# %%
# The first line only says that running the operator on fake tensors failed;
# the reason is a few lines further down. ``TorchRuntimeError`` lives in the
# private module ``torch._dynamo.exc`` because it is Dynamo's own wrapper
# around errors raised while tracing. ``opcheck`` spots the same problem
# without ``torch.compile``, and puts the reason in its first line:

try:
    torch.library.opcheck(numpy_cube, (vector,))
except OpCheckError as error:
    record("No fake kernel under torch.compile", error)
else:
    raise AssertionError("expected opcheck to miss a fake kernel")

# %%
# Registering a fake kernel repairs the operator. The compiled function now
# gives the same numbers as eager mode.


@numpy_cube.register_fake
def _(x):
    return torch.empty_like(x)


compiled_cube_plus_one = torch.compile(
    cube_plus_one, fullgraph=True, backend="aot_eager"
)
for device in devices:
    sample = torch.randn(4, device=device)
    torch.library.opcheck(numpy_cube, (sample,))
    torch.testing.assert_close(compiled_cube_plus_one(sample), sample**3 + 1)
print(f"compiled numpy_cube matches sample**3 + 1 on {devices}")

# %%
# Unsupported argument types
# --------------------------
#
# ``custom_op`` turns the type hints into a schema, and a schema knows a
# limited set of types: tensors, numbers, booleans, strings, dtypes, devices,
# flat lists of tensors or numbers, and optional versions of these. A
# ``dict`` of options or a NumPy array is not among them, and the mistake
# surfaces right at the decorator, before any call. Long error messages are
# cut short here; this one goes on to list every supported type.


def smooth_with_options(x: Tensor, options: dict) -> Tensor:
    return x


def smooth_with_kernel(x: Tensor, kernel: np.ndarray) -> Tensor:
    return x


for function in (smooth_with_options, smooth_with_kernel):
    try:
        torch.library.custom_op(f"troubleshoot::{function.__name__}", mutates_args=())(
            function
        )
    except ValueError as error:
        record("Unsupported argument types", error)
    else:
        raise AssertionError(f"expected {function.__name__} to be rejected")
    assert not hasattr(torch.ops.troubleshoot, function.__name__)
print("neither operator was registered")

# %%
# The remedy is to spell the options out as typed arguments with defaults, and
# to pass arrays as tensors. Here the operator smooths a 1-D signal with a
# kernel given as a tensor; ``padding_mode`` and ``normalize`` replace the
# dictionary.


def check_smooth_args(x: Tensor, kernel: Tensor, padding_mode: str) -> None:
    if x.dim() != 1 or kernel.dim() != 1 or kernel.numel() % 2 == 0:
        raise ValueError("need a 1-D signal and a 1-D kernel of odd length")
    if padding_mode not in ("reflect", "replicate"):
        raise ValueError(f"padding_mode must be reflect or replicate: {padding_mode}")
    if x.device != kernel.device:
        raise ValueError(f"x is on {x.device}, kernel is on {kernel.device}")


@torch.library.custom_op("troubleshoot::smooth", mutates_args=())
def smooth(
    x: Tensor, kernel: Tensor, padding_mode: str = "reflect", normalize: bool = True
) -> Tensor:
    check_smooth_args(x, kernel, padding_mode)
    weights = kernel / kernel.sum() if normalize else kernel
    half = kernel.numel() // 2
    padded = torch.nn.functional.pad(x[None, None], (half, half), mode=padding_mode)
    return torch.nn.functional.conv1d(padded, weights.flip(0)[None, None])[0, 0]


@smooth.register_fake
def _(x, kernel, padding_mode="reflect", normalize=True):
    check_smooth_args(x, kernel, padding_mode)
    return torch.empty_like(x)


print(f"schema: {torch.ops.troubleshoot.smooth.default._schema}")
for device in devices:
    signal = torch.randn(16, device=device)
    box_kernel = torch.ones(3, device=device)
    torch.library.opcheck(smooth, (signal, box_kernel), {"padding_mode": "replicate"})
    padded = torch.cat([signal[:1], signal, signal[-1:]])
    torch.testing.assert_close(
        smooth(signal, box_kernel, padding_mode="replicate"),
        padded.unfold(0, 3, 1).mean(dim=1),
    )
print(f"opcheck passed for troubleshoot::smooth on {devices}")

# %%
# A backward written in NumPy
# ---------------------------
#
# The backward formula registered with ``register_autograd`` is ordinary
# Python, so it is tempting to compute it with the same NumPy code as the
# forward. First derivatives even come out right, which is what makes this
# mistake easy to miss:


@torch.library.custom_op("troubleshoot::numpy_sin_bad", mutates_args=())
def numpy_sin_bad(x: Tensor) -> Tensor:
    return torch.from_numpy(np.sin(x.numpy(force=True))).to(x.device)


numpy_sin_bad.register_fake(lambda x: torch.empty_like(x))


def save_input(ctx, inputs, output):
    (ctx.x,) = inputs


def numpy_cos_backward(ctx, grad):
    derivative = torch.from_numpy(np.cos(ctx.x.numpy(force=True)))
    return grad * derivative.to(grad.device)


numpy_sin_bad.register_autograd(numpy_cos_backward, setup_context=save_input)

angles = torch.randn(5, dtype=torch.float64, requires_grad=True)
assert torch.autograd.gradcheck(numpy_sin_bad, (angles,))
print("gradcheck passed: the first derivative is right")

# %%
# Autograd cannot see inside NumPy, so the gradient it returns is cut off from
# the graph even when a graph was requested with ``create_graph=True``.
# Anything that differentiates twice finds no path from the gradient back to
# the input. ``gradgradcheck`` compares that missing second derivative with
# finite differences of the gradient and reports the mismatch:

(first_derivative,) = torch.autograd.grad(
    numpy_sin_bad(angles).sum(), angles, create_graph=True
)
print(f"gradient has a grad_fn: {first_derivative.grad_fn is not None}")
assert first_derivative.grad_fn is None

try:
    torch.autograd.gradgradcheck(numpy_sin_bad, (angles,))
except GradcheckError as error:
    record("A backward written in NumPy", error)
else:
    raise AssertionError("expected gradgradcheck to reject the NumPy backward")

# %%
# Compilation is the other casualty. ``torch.compile`` traces the backward
# with fake tensors too, and a fake tensor has no data to hand to NumPy.
# ``opcheck`` fails in ``test_aot_dispatch_dynamic``, the test that mimics
# this tracing. (While the test fails, autograd's anomaly mode prints a
# warning with a stack trace; we silence it to keep the output short.)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    try:
        torch.library.opcheck(numpy_sin_bad, (angles,))
    except OpCheckError as error:
        first_line = record("A backward written in NumPy", error)
        assert "test_aot_dispatch_dynamic" in first_line
    else:
        raise AssertionError("expected opcheck to reject the NumPy backward")

# %%
# Write the backward with PyTorch operators. The forward may stay in NumPy,
# because the operator boundary hides it. If the backward itself needs foreign
# code, make that code a custom operator of its own, with a fake kernel, and
# register a backward for it too if you need second derivatives.


@torch.library.custom_op("troubleshoot::numpy_sin", mutates_args=())
def numpy_sin(x: Tensor) -> Tensor:
    return torch.from_numpy(np.sin(x.numpy(force=True))).to(x.device)


numpy_sin.register_fake(lambda x: torch.empty_like(x))


def cos_backward(ctx, grad):
    return grad * ctx.x.cos()


numpy_sin.register_autograd(cos_backward, setup_context=save_input)

for device in devices:
    angles = torch.randn(5, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradcheck(numpy_sin, (angles,))
    assert torch.autograd.gradgradcheck(numpy_sin, (angles,))
    torch.library.opcheck(numpy_sin, (angles,))
print(f"gradcheck, gradgradcheck and opcheck passed on {devices}")

# %%
# Tensors on the wrong device
# ---------------------------
#
# ``device_types="cpu"`` registers the kernel for one *dispatch key*, the
# label PyTorch uses to pick a kernel for each kind of tensor. Every other
# backend is left without a kernel. CUDA is one of them, and so is the
# sparse CPU layout, which is what this page uses to show the error on any
# machine. The fake kernel is registered under the ``Meta`` key, which is why
# meta tensors (which carry no data) still work.

calls_to_cpu_kernel = 0


@torch.library.custom_op(
    "troubleshoot::weighted_sum_bad", mutates_args=(), device_types="cpu"
)
def weighted_sum_bad(x: Tensor, y: Tensor, alpha: float) -> Tensor:
    global calls_to_cpu_kernel
    calls_to_cpu_kernel += 1
    return torch.from_numpy(x.numpy() + alpha * y.numpy())


weighted_sum_bad.register_fake(lambda x, y, alpha: torch.empty_like(x))

wrong_backends = [torch.randn(3).to_sparse()]
if torch.cuda.is_available():
    wrong_backends.append(torch.randn(3, device="cuda"))
for tensor in wrong_backends:
    try:
        weighted_sum_bad(tensor, tensor, 0.5)
    except NotImplementedError as error:
        record("Tensors on the wrong device", error)
    else:
        raise AssertionError("expected no kernel for this backend")

on_meta = torch.ones(3, device="meta")
assert weighted_sum_bad(on_meta, on_meta, 0.5).device.type == "meta"
print("meta tensors still work: the fake kernel answered")

# %%
# Mixing devices in one call is subtler. The dispatcher looks at all tensor
# arguments together and picks the kernel for the highest-priority backend
# among them; it does not check that they agree. Give the operator one CPU
# tensor and one meta tensor, and the fake kernel runs instead of the real
# one. It returns an uninitialised CPU tensor, with no error at all:

calls_before = calls_to_cpu_kernel
mixed = weighted_sum_bad(torch.ones(3), torch.ones(3, device="meta"), 0.5)
print(f"result device: {mixed.device}; real kernel calls: {calls_to_cpu_kernel}")
assert mixed.device.type == "cpu" and calls_to_cpu_kernel == calls_before

# %%
# For an operator with a CUDA kernel, mixing CPU and CUDA tensors goes the
# same way: the CUDA kernel runs and is handed a CPU tensor. The operator has
# to defend itself: check devices and layouts in the real kernel *and* in the
# fake kernel, since either one may be the kernel that runs. Registering for
# every device (no ``device_types``) and moving data through NumPy with
# ``force=True`` makes the kernel usable on CUDA too, and a mismatch now
# produces a clear ``ValueError``.


def check_weighted_sum_args(x: Tensor, y: Tensor) -> None:
    if x.device != y.device:
        raise ValueError(f"x is on {x.device} but y is on {y.device}")
    if x.layout != torch.strided or y.layout != torch.strided:
        raise ValueError(f"expected dense tensors, got {x.layout} and {y.layout}")
    if x.shape != y.shape:
        raise ValueError(f"shapes differ: {tuple(x.shape)} and {tuple(y.shape)}")


@torch.library.custom_op("troubleshoot::weighted_sum", mutates_args=())
def weighted_sum(x: Tensor, y: Tensor, alpha: float) -> Tensor:
    check_weighted_sum_args(x, y)
    result = x.numpy(force=True) + alpha * y.numpy(force=True)
    return torch.from_numpy(result).to(x.device)


@weighted_sum.register_fake
def _(x, y, alpha):
    check_weighted_sum_args(x, y)
    return torch.empty_like(x)


bad_pairs = {
    "CPU and meta": (torch.ones(3), torch.ones(3, device="meta")),
    "sparse": (torch.ones(3).to_sparse(), torch.ones(3).to_sparse()),
}
if torch.cuda.is_available():
    bad_pairs["CPU and CUDA"] = (torch.ones(3), torch.ones(3, device="cuda"))
for problem, (x, y) in bad_pairs.items():
    try:
        weighted_sum(x, y, 0.5)
    except ValueError as error:
        print(f"{problem:>12}: ValueError: {error}")
    else:
        raise AssertionError(f"expected a ValueError for {problem} inputs")

for device in devices:
    x, y = torch.randn(3, device=device), torch.randn(3, device=device)
    torch.library.opcheck(weighted_sum, (x, y, 0.5))
    torch.testing.assert_close(weighted_sum(x, y, 0.5), x + 0.5 * y)
print(f"opcheck passed for troubleshoot::weighted_sum on {devices}")

# %%
# Checking the error index
# ------------------------
#
# The table at the top of the page lists one fragment per row. The same rows
# are repeated here as data and compared with the first lines recorded while
# the page ran. If a future PyTorch rewords a message, this cell fails and the
# index gets updated instead of going stale.

error_index = [
    ("Stride mismatch", "Fake kernel with the wrong strides"),
    ("data-dependent expression", "Fake kernel that reads tensor data"),
    (
        "is not defined as mutable but was mutated",
        "Mutation missing from mutates_args",
    ),
    (
        "must not also be an input to this custom operator",
        "Returning an input or a view of it",
    ),
    ("RuntimeError when making fake tensor call", "No fake kernel under torch.compile"),
    ("There was no fake impl registered", "No fake kernel under torch.compile"),
    ("has unsupported type", "Unsupported argument types"),
    ("Jacobian mismatch", "A backward written in NumPy"),
    ("is not supported for tensor subclasses", "A backward written in NumPy"),
    ("Could not run", "Tensors on the wrong device"),
]

assert {section for _, section in error_index} == set(caught)
print(f"{'fragment':<52} {'section':<36} seen")
for fragment, section in error_index:
    seen = sum(fragment in line for line in caught[section])
    print(f"{fragment:<52.52} {section:<36} {seen}")
    assert seen > 0, f"{fragment!r} not found in the errors of {section!r}"
print(f"all {len(error_index)} fragments found in {len(caught)} sections")

# %%
# Conclusion
# ----------
#
# Most custom-operator bugs are broken promises: the fake kernel promises a
# layout, the schema promises which arguments change, the decorator promises
# fresh outputs, and the backward promises to be differentiable and traceable.
# Eager mode rarely notices; ``torch.compile`` and second derivatives do.
# Running ``opcheck`` on representative inputs, for every device you support,
# and ``gradcheck`` plus ``gradgradcheck`` on anything with a backward, turns
# these silent problems into the loud errors above.
#
# For the machinery behind these checks, read
# :ref:`sphx_glr_tutorials_custom_op_internals.py`. Fake kernels for
# data-dependent shapes are covered in depth in
# :ref:`sphx_glr_tutorials_fake_kernels_and_shapes.py`, in-place operators in
# :ref:`sphx_glr_tutorials_mutable_custom_ops.py`, and what a working operator
# costs at run time in :ref:`sphx_glr_tutorials_custom_op_performance.py`.
