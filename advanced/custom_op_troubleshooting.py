"""
Troubleshooting Custom Operators
================================

A field guide to the mistakes people make with ``torch.library.custom_op``.
Each section makes one on purpose, shows the error PyTorch reports, and
repairs the operator until ``opcheck``, ``gradcheck`` or a reference agrees.
When you meet one of these errors, look up its first line in the table below.

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

.. admonition:: Checklist
   :class: checklist

   #. Compare the operator's output with a plain PyTorch reference:
      ``opcheck`` never checks the numbers.
   #. Run ``torch.library.opcheck(op, args, raise_exception=False)`` on empty,
      non-contiguous, permuted and ``requires_grad`` samples, on every device
      you support, and read which sub-test failed.
   #. Run ``gradcheck`` and ``gradgradcheck`` in float64 on anything with a
      backward formula.
   #. Call the operator inside ``torch.compile(..., fullgraph=True)`` once.
   #. Look up the first line of any error in the index below and go to its
      section.

Error index
-----------

Each fragment comes from the first line of an error this page provokes, and
the page's last cell checks every one against the messages it recorded. Three
rows depend on the release (``Stride mismatch`` for CPU tensors from PyTorch
2.13, and the wording of a failing fake kernel call from 2.11); the last cell
says which this build raised.

.. list-table::
   :header-rows: 1
   :widths: 45 55

   * - The first line of the error contains
     - Go to
   * - ``Stride mismatch``
     - `Fake kernel with the wrong strides`_
   * - ``view size is not compatible``
     - `Fake kernel with the wrong strides`_
   * - ``data-dependent expression``
     - `Fake kernel that reads tensor data`_
   * - ``is not defined as mutable but was mutated``
     - `Mutation missing from mutates_args`_
   * - ``must not also be an input to this custom operator``
     - `Returning an input or a view of it`_
   * - ``RuntimeError when making fake tensor call``
     - `No fake kernel under torch.compile`_
   * - ``Dynamo failed to run FX node with fake tensors``
     - `No fake kernel under torch.compile`_
   * - ``There was no fake impl registered``
     - `No fake kernel under torch.compile`_
   * - ``has unsupported type``
     - `Unsupported argument types`_
   * - ``Jacobian mismatch``
     - `A backward written in NumPy`_
   * - ``is not supported for tensor subclasses``
     - `A backward written in NumPy`_
   * - ``modified by an inplace operation``
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

import importlib
import logging
import textwrap
import warnings

import matplotlib.pyplot as plt
import numpy as np
import numpy.typing as npt
from torch import Tensor
from torch.autograd.gradcheck import GradcheckError

torch.manual_seed(0)
np.random.seed(0)
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")
release = tuple(int(part) for part in torch.__version__.split(".")[:2])
# sphinx_gallery_start_ignore
# Recent releases log a warning before rejecting an unsupported argument type
# (section "Unsupported argument types"); the error itself says it all.
logging.getLogger("torch._library.opaque_object").setLevel(logging.ERROR)
# sphinx_gallery_end_ignore

# %%
# ``GradcheckError`` is public (``torch.autograd.gradcheck`` lists it in
# ``__all__``). ``opcheck(..., raise_exception=False)`` runs every sub-test and
# returns each one's ``"SUCCESS"`` or exception, so the page can check *which*
# test caught a mistake. ``record`` prints an error's first line and files it
# for the error index and the map at the end; ``opcheck_report`` records the
# failing sub-tests.

gradcheck_module = importlib.import_module("torch.autograd.gradcheck")
assert "GradcheckError" in gradcheck_module.__all__

caught: dict[str, list[str]] = {}
detections: dict[str, dict[str, str]] = {}


# sphinx_gallery_start_ignore
def wrap(text: str) -> str:
    """Wrap a long message for printing without splitting paths or words."""
    return textwrap.fill(
        text, 88, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
    )


def first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else ""


def note(section: str, detector: str, outcome: str) -> None:
    """Remember that ``detector`` ran on ``section``'s mistake: caught or passed."""
    outcomes = detections.setdefault(section, {})
    if outcomes.get(detector) != "caught":
        outcomes[detector] = outcome


def record(section: str, detector: str | None, error: BaseException) -> str:
    """Print an expected error and remember its first line under ``section``."""
    line = first_line(error)
    caught.setdefault(section, []).append(line)
    if detector is not None:
        note(section, detector, "caught")
    shown = line if len(line) <= 240 else line[:237] + "..."
    print(wrap(f"[{detector or 'repaired'}] {type(error).__name__}: {shown}"))
    return line


# sphinx_gallery_end_ignore


def opcheck_report(section: str, op, args, kwargs=None) -> dict[str, str]:
    """Run every opcheck sub-test; record the failures, return {test: first line}."""
    results = torch.library.opcheck(op, args, kwargs, raise_exception=False)
    failures = {}
    for test, outcome in results.items():
        if outcome == "SUCCESS":
            note(section, test, "passed")
        else:
            failures[test] = record(section, test, outcome)
    return failures


OPCHECK_TESTS = (
    "test_schema",
    "test_autograd_registration",
    "test_faketensor",
    "test_aot_dispatch_dynamic",
)

# %%
# Each repaired operator is tested on every layout a caller may hand it:
# row-major, non-contiguous (every other column), *permuted* (dense, but
# column-major) and empty.


def layouts(rows=3, cols=4, device="cpu", dtype=torch.float32, scale=1.0):
    """The same kind of 2-D input in every layout an operator must handle."""

    def make(*shape):
        return scale * torch.randn(*shape, device=device, dtype=dtype)

    return {
        "row-major": make(rows, cols),
        "non-contiguous": make(rows, 2 * cols)[:, ::2],
        "permuted": make(cols, rows).t(),
        "empty": make(0, cols),
    }


samples = layouts()
print({name: (tuple(x.shape), x.stride()) for name, x in samples.items()})
assert not samples["non-contiguous"].is_contiguous()
permuted = samples["permuted"]
assert not permuted.is_contiguous() and permuted.t().is_contiguous()

# %%
# The two detectors
# -----------------
#
# ``torch.library.opcheck(op, args)`` runs the operator under several
# subsystems and compares what happens with what the registration promised:
#
# * ``test_schema``: does the kernel mutate or alias exactly what the schema
#   says?
# * ``test_autograd_registration``: is training support registered the
#   supported way?
# * ``test_faketensor``: does the fake kernel give the real output's shapes,
#   strides, dtype and device?
# * ``test_aot_dispatch_dynamic``: do forward and backward survive
#   ``torch.compile``'s tracing?
#
# It never compares the numbers with a reference: ``test_aot_dispatch_dynamic``
# compares the traced run with the eager one, which is wrong the same way.
# This operator, meant to negate, also doubles: every test passes, and only a
# reference finds the bug.

WRONG_VALUES = "Wrong values"


@torch.library.custom_op("troubleshoot::negate_wrongly", mutates_args=())
def negate_wrongly(x: Tensor) -> Tensor:
    return x * -2  # the bug: should be x * -1


negate_wrongly.register_fake(lambda x: torch.empty_like(x))

sample = torch.randn(3)
failures = opcheck_report(WRONG_VALUES, negate_wrongly, (sample,))
print(f"opcheck sub-tests that failed: {failures}")
assert failures == {} and set(detections[WRONG_VALUES]) == set(OPCHECK_TESTS)
try:
    torch.testing.assert_close(negate_wrongly(sample), -sample)
except AssertionError as error:
    record(WRONG_VALUES, "reference", error)
else:
    raise AssertionError("expected the doubled result to differ from -sample")
caught.pop(WRONG_VALUES)  # the index lists PyTorch's errors, not our own

# %%
# Values are checked by ``gradcheck`` (the backward, against finite
# differences) and by a plain PyTorch reference. Every fix below passes
# ``opcheck`` and at least one of these.
#
# Fake kernel with the wrong strides
# ----------------------------------
#
# A fake kernel must describe the output's *strides*, not only its shape.
# Here the real kernel returns ``x.t().clone()``, and ``clone`` keeps the
# transposed view's column-major layout; the fake kernel allocates a
# row-major tensor.

WRONG_STRIDES = "Fake kernel with the wrong strides"


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
assert transposed_copy_bad(matrix).shape == (matrix.shape[1], matrix.shape[0])

# %%
# Eager mode sees nothing wrong. The compiler, though, plans from the fake
# kernel's answer: ``reshape`` traced on the row-major fake becomes a free
# ``view``, which then meets the real column-major tensor:


def flatten_transposed(x):
    return transposed_copy_bad(x).reshape(-1)


torch.testing.assert_close(flatten_transposed(matrix), matrix.t().reshape(-1))
note(WRONG_STRIDES, "eager code", "passed")
try:
    torch.compile(flatten_transposed, backend="aot_eager", fullgraph=True)(matrix)
except RuntimeError as error:
    record(WRONG_STRIDES, "torch.compile", error)
else:
    raise AssertionError("expected the compiled flatten to fail at run time")

# %%
# ``opcheck``'s ``test_faketensor`` compares strides of CUDA outputs on every
# release and of CPU outputs from PyTorch 2.13; on older releases the
# compiled run above is the detector that fires on a CPU-only machine.

cpu_strides_checked = release >= (2, 13)
print(f"opcheck compares CPU strides on PyTorch {torch.__version__}: ", end="")
print("yes" if cpu_strides_checked else "no (from 2.13)")
for device in devices:
    failures = opcheck_report(
        WRONG_STRIDES, transposed_copy_bad, (torch.randn(3, 4, device=device),)
    )
    strides_checked = device == "cuda" or cpu_strides_checked
    print(f"{device}: sub-tests that failed: {sorted(failures)}")
    assert set(failures) == ({"test_faketensor"} if strides_checked else set())

# %%
# The easier fix is usually a predictable real layout: a fresh row-major copy.
# Unlike ``contiguous()``, ``clone(memory_format=...)`` copies even when the
# view is row-major already, and returning a view of the input is another
# mistake (see `Returning an input or a view of it`_).


@torch.library.custom_op("troubleshoot::transposed_copy", mutates_args=())
def transposed_copy(x: Tensor) -> Tensor:
    check_matrix(x)
    return x.t().clone(memory_format=torch.contiguous_format)


@transposed_copy.register_fake
def _(x):
    check_matrix(x)
    return x.new_empty(x.shape[1], x.shape[0])


def flatten_transposed_fixed(x):
    return transposed_copy(x).reshape(-1)


compiled_flatten = torch.compile(
    flatten_transposed_fixed, backend="aot_eager", fullgraph=True
)
for device in devices:
    for x in layouts(device=device).values():
        torch.library.opcheck(transposed_copy, (x,))
        torch.testing.assert_close(transposed_copy(x), x.t())
        torch.testing.assert_close(compiled_flatten(x), x.t().reshape(-1))
print(f"opcheck and the compiled flatten pass for every layout on {devices}")

# %%
# Fake kernel that reads tensor data
# ----------------------------------
#
# Here each row of ``x`` is repeated ``counts`` times, so the output's size
# depends on the input's *values*. A fake tensor has none, so ``.item()`` on
# it cannot produce a number.

READS_DATA = "Fake kernel that reads tensor data"


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
failures = opcheck_report(READS_DATA, repeat_rows_bad, (rows, counts))
assert set(failures) == {"test_faketensor", "test_aot_dispatch_dynamic"}

# %%
# Both tests that run the fake kernel fail: ``.item()`` returned a symbol,
# and ``int()`` needs its value. The fix says "known only at run time" with
# ``torch.library.get_ctx().new_dynamic_size()`` (see
# :ref:`sphx_glr_tutorials_fake_kernels_and_shapes.py`). The real kernel
# checks what only it can see: negative counts.


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
    for x in layouts(device=device).values():
        repeats = torch.randint(0, 3, (x.shape[0],), device=device)
        torch.library.opcheck(repeat_rows, (x, repeats))
        torch.testing.assert_close(
            repeat_rows(x, repeats), x.repeat_interleave(repeats, dim=0)
        )
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
# The compiler reorders and deletes calls based on ``mutates_args``, so an
# undeclared write can be silently lost (see
# :ref:`sphx_glr_tutorials_mutable_custom_ops.py`). This kernel clamps its
# input in place but declares no mutation:

UNDECLARED_MUTATION = "Mutation missing from mutates_args"


@torch.library.custom_op("troubleshoot::relu_in_place_bad", mutates_args=())
def relu_in_place_bad(x: Tensor) -> None:
    x.clamp_(min=0)


relu_in_place_bad.register_fake(lambda x: None)

failures = opcheck_report(UNDECLARED_MUTATION, relu_in_place_bad, (torch.randn(5),))
assert set(failures) == {"test_schema"}

# %%
# ``test_schema`` found the input changed. Naming ``x`` in ``mutates_args``
# marks it as written (``Tensor(a0!) x``); an operator that returns nothing
# needs no fake kernel of its own.


@torch.library.custom_op("troubleshoot::relu_in_place", mutates_args={"x"})
def relu_in_place(x: Tensor) -> None:
    x.clamp_(min=0)


schema = torch.ops.troubleshoot.relu_in_place.default._schema
print(f"schema: {schema}")
assert schema.arguments[0].alias_info.is_write
for device in devices:
    for values in layouts(device=device).values():
        torch.library.opcheck(relu_in_place, (values.clone(),))
        clamped = values.clone()
        relu_in_place(clamped)
        torch.testing.assert_close(clamped, values.relu())
print(f"opcheck passed for troubleshoot::relu_in_place on {devices}")

# %%
# Returning an input or a view of it
# ----------------------------------
#
# A ``custom_op`` must return fresh tensors. Two innocent shortcuts break
# this, a fast path that hands back the input and a view that shares its
# memory, and PyTorch refuses both:

ALIASING = "Returning an input or a view of it"


@torch.library.custom_op("troubleshoot::clip_unit_bad", mutates_args=())
def clip_unit_bad(x: Tensor) -> Tensor:
    if bool((x.abs() <= 1).all()):
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
        message = record(ALIASING, "eager code", error)
        rules.append(message.split("The output of this custom operator")[1])
    else:
        raise AssertionError("expected the aliasing check to fire")
assert rules[0] == rules[1]

# %%
# Both state one rule: no output may be or share memory with an input, which
# the compiler relies on to reuse buffers. The fix is to pay for a copy.
# (``all()`` is also true for an empty tensor, where ``x.abs().max()`` would
# raise.)


@torch.library.custom_op("troubleshoot::clip_unit", mutates_args=())
def clip_unit(x: Tensor) -> Tensor:
    if bool((x.abs() <= 1).all()):
        return x.clone()
    return x.clamp(-1, 1)


@torch.library.custom_op("troubleshoot::flatten", mutates_args=())
def flatten(x: Tensor) -> Tensor:
    return x.reshape(-1).clone()


clip_unit.register_fake(lambda x: torch.empty_like(x))
flatten.register_fake(lambda x: x.new_empty(x.numel()))

for device in devices:
    small = layouts(device=device, scale=0.1)
    large = layouts(device=device, scale=5.0)
    for x in [*small.values(), *large.values()]:
        torch.library.opcheck(clip_unit, (x,))
        torch.testing.assert_close(clip_unit(x), x.clamp(-1, 1))
        torch.library.opcheck(flatten, (x,))
        flat = flatten(x)
        assert torch.equal(flat, x.reshape(-1))
        assert x.numel() == 0 or flat.data_ptr() != x.data_ptr()
print(f"opcheck passed for clip_unit and flatten on {devices}")

# %%
# ``empty_like`` keeps a dense input's strides and falls back to row-major
# otherwise, as ``clone`` and ``clamp`` do, so the fake kernel is right for
# every layout.
#
# No fake kernel under torch.compile
# ----------------------------------
#
# A NumPy operator works eagerly without a fake kernel, but ``torch.compile``
# traces with fake tensors. (The ``aot_eager`` backend traces like the default
# one but skips Inductor's code generation, to keep the page fast.)

NO_FAKE = "No fake kernel under torch.compile"


@torch.library.custom_op("troubleshoot::numpy_cube", mutates_args=())
def numpy_cube(x: Tensor) -> Tensor:
    cubed = np.power(x.numpy(force=True), 3)
    return torch.from_numpy(cubed).to(x.device)


def cube_plus_one(x):
    return numpy_cube(x) + 1


vector = torch.randn(4)
torch.testing.assert_close(cube_plus_one(vector), vector**3 + 1)  # eager works
note(NO_FAKE, "eager code", "passed")
try:
    torch.compile(cube_plus_one, fullgraph=True, backend="aot_eager")(vector)
except torch._dynamo.exc.TorchRuntimeError as error:
    record(NO_FAKE, "torch.compile", error)
    explanation = next(
        line for line in str(error).splitlines() if "no fake impl" in line
    )
    print(wrap(explanation.strip()))
else:
    raise AssertionError("expected torch.compile to fail without a fake kernel")

# %%
# From PyTorch 2.11 the reason follows a few lines below the first; older
# releases put it all in one line starting ``Dynamo failed to run FX node``.
# (``TorchRuntimeError`` is Dynamo's private wrapper, in ``torch._dynamo.exc``.)
# ``opcheck`` spots the problem without compiling, reason first:

failures = opcheck_report(NO_FAKE, numpy_cube, (vector,))
assert set(failures) == {"test_faketensor", "test_aot_dispatch_dynamic"}

# %%
# A fake kernel repairs it; compiled and eager results agree.


@numpy_cube.register_fake
def _(x):
    return torch.empty_like(x)


compiled_cube_plus_one = torch.compile(
    cube_plus_one, fullgraph=True, backend="aot_eager"
)
for device in devices:
    for sample in layouts(device=device).values():
        torch.library.opcheck(numpy_cube, (sample,))
        torch.testing.assert_close(compiled_cube_plus_one(sample), sample**3 + 1)
print(f"compiled numpy_cube matches sample**3 + 1 on {devices}")

# %%
# Unsupported argument types
# --------------------------
#
# A schema knows a limited set of types: tensors, numbers, booleans, strings,
# dtypes, devices, flat lists of tensors or numbers, and optional versions of
# these. A dictionary or a NumPy array fails right at the decorator (the
# message, cut short here, lists every supported type).

UNSUPPORTED_TYPES = "Unsupported argument types"


def smooth_with_options(x: Tensor, options: dict[str, float]) -> Tensor:
    return x


def smooth_with_kernel(x: Tensor, kernel: npt.NDArray[np.float64]) -> Tensor:
    return x


for function in (smooth_with_options, smooth_with_kernel):
    try:
        torch.library.custom_op(f"troubleshoot::{function.__name__}", mutates_args=())(
            function
        )
    except ValueError as error:
        record(UNSUPPORTED_TYPES, "eager code", error)
    else:
        raise AssertionError(f"expected {function.__name__} to be rejected")
    assert not hasattr(torch.ops.troubleshoot, function.__name__)
print("neither operator was registered")

# %%
# Spell the options out as typed arguments with defaults, and pass arrays as
# tensors: ``padding_mode`` and ``normalize`` replace the dictionary. Signals
# shorter than half the kernel, the empty one included, get a ``ValueError``
# instead of an error from deep inside ``pad``.


def check_smooth_args(x: Tensor, kernel: Tensor, padding_mode: str) -> None:
    if x.dim() != 1 or kernel.dim() != 1 or kernel.numel() % 2 == 0:
        raise ValueError("need a 1-D signal and a 1-D kernel of odd length")
    if x.numel() <= kernel.numel() // 2:
        raise ValueError(
            f"a signal of length {x.numel()} is too short for a kernel of length "
            f"{kernel.numel()}"
        )
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
    return x.new_empty(x.shape)


print(f"schema: {torch.ops.troubleshoot.smooth.default._schema}")
for device in devices:
    box_kernel = torch.ones(3, device=device)
    signals = {
        "contiguous": torch.randn(16, device=device),
        "non-contiguous": torch.randn(32, device=device)[::2],
    }
    for signal in signals.values():
        for mode in ("reflect", "replicate"):
            torch.library.opcheck(smooth, (signal, box_kernel), {"padding_mode": mode})
        padded = torch.cat([signal[:1], signal, signal[-1:]])
        torch.testing.assert_close(
            smooth(signal, box_kernel, padding_mode="replicate"),
            padded.unfold(0, 3, 1).mean(dim=1),
        )
    try:
        smooth(torch.empty(0, device=device), box_kernel)
    except ValueError as error:
        print(f"{device}, empty signal: ValueError: {error}")
    else:
        raise AssertionError("expected an empty signal to be refused")
print(f"opcheck passed for troubleshoot::smooth on {devices} (1-D: nothing to permute)")

# %%
# A backward written in NumPy
# ---------------------------
#
# It is tempting to write the backward in the same NumPy as the forward, and
# first derivatives even come out right. This operator also makes a quieter
# mistake: ``setup_context`` keeps the input as an attribute of ``ctx``.

NUMPY_BACKWARD = "A backward written in NumPy"


@torch.library.custom_op("troubleshoot::numpy_sin_bad", mutates_args=())
def numpy_sin_bad(x: Tensor) -> Tensor:
    return torch.from_numpy(np.sin(x.numpy(force=True))).to(x.device)


numpy_sin_bad.register_fake(lambda x: torch.empty_like(x))


def keep_input_as_attribute(ctx, inputs, output):
    (ctx.x,) = inputs


def numpy_cos_backward(ctx, grad):
    derivative = torch.from_numpy(np.cos(ctx.x.numpy(force=True)))
    return grad * derivative.to(grad.device)


numpy_sin_bad.register_autograd(
    numpy_cos_backward, setup_context=keep_input_as_attribute
)

angles = torch.randn(5, dtype=torch.float64, requires_grad=True)
assert torch.autograd.gradcheck(numpy_sin_bad, (angles,))
note(NUMPY_BACKWARD, "gradcheck", "passed")
print("gradcheck passed: the first derivative is right")

# %%
# Autograd cannot see inside NumPy, so the gradient is cut off from the graph
# even with ``create_graph=True``, and ``gradgradcheck`` reports the missing
# second derivative:

(first_derivative,) = torch.autograd.grad(
    numpy_sin_bad(angles).sum(), angles, create_graph=True
)
print(f"gradient has a grad_fn: {first_derivative.grad_fn is not None}")
assert first_derivative.grad_fn is None

try:
    torch.autograd.gradgradcheck(numpy_sin_bad, (angles,))
except GradcheckError as error:
    record(NUMPY_BACKWARD, "gradgradcheck", error)
else:
    raise AssertionError("expected gradgradcheck to reject the NumPy backward")

# %%
# Compilation is the other casualty: the backward is traced with fake
# tensors, which have no data for NumPy. Only ``test_aot_dispatch_dynamic``
# fails. (We silence the anomaly-mode warning it prints meanwhile.)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    failures = opcheck_report(NUMPY_BACKWARD, numpy_sin_bad, (angles,))
assert set(failures) == {"test_aot_dispatch_dynamic"}

# %%
# The attribute is the quieter problem. Tensors saved with
# ``ctx.save_for_backward`` carry a *version*, checked by backward against
# in-place changes; an attribute escapes that check, so after an in-place
# change the backward silently uses the new values:

inputs = angles.detach().clone().requires_grad_()
shifted = inputs * 1.0  # a non-leaf, which may be modified in place
output = numpy_sin_bad(shifted)
shifted.add_(1.0)
(silent_grad,) = torch.autograd.grad(output.sum(), inputs)
torch.testing.assert_close(silent_grad, (inputs + 1).cos().detach())
assert not torch.allclose(silent_grad, inputs.cos())
note(NUMPY_BACKWARD, "eager code", "passed")
print("with ctx.x, backward used the modified input without a word")

# %%
# Write the backward with PyTorch operators and save the input with
# ``save_for_backward``; the forward may stay in NumPy. A backward that needs
# foreign code should call a custom operator of its own.


@torch.library.custom_op("troubleshoot::numpy_sin", mutates_args=())
def numpy_sin(x: Tensor) -> Tensor:
    return torch.from_numpy(np.sin(x.numpy(force=True))).to(x.device)


numpy_sin.register_fake(lambda x: torch.empty_like(x))


def save_input(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def cos_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * x.cos()


numpy_sin.register_autograd(cos_backward, setup_context=save_input)

for device in devices:
    for angles in layouts(device=device, dtype=torch.float64).values():
        angles.requires_grad_()
        assert torch.autograd.gradcheck(numpy_sin, (angles,))
        assert torch.autograd.gradgradcheck(numpy_sin, (angles,))
        torch.library.opcheck(numpy_sin, (angles,))
print(f"gradcheck, gradgradcheck and opcheck passed for every layout on {devices}")

# %%
# The same in-place change now stops the backward:

shifted = inputs * 1.0
output = numpy_sin(shifted)
shifted.add_(1.0)
try:
    output.sum().backward()
except RuntimeError as error:
    record(NUMPY_BACKWARD, None, error)
else:
    raise AssertionError("expected autograd to notice the modified input")

# %%
# Tensors on the wrong device
# ---------------------------
#
# ``device_types="cpu"`` registers the kernel for one *dispatch key*, leaving
# every other backend without one: CUDA, and the sparse CPU layout, which
# shows the error on any machine. Meta tensors still work, through the fake
# kernel.

WRONG_DEVICE = "Tensors on the wrong device"
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
        record(WRONG_DEVICE, "eager code", error)
    else:
        raise AssertionError("expected no kernel for this backend")

on_meta = torch.ones(3, device="meta")
assert weighted_sum_bad(on_meta, on_meta, 0.5).device.type == "meta"
print("meta tensors still work: the fake kernel answered")

# %%
# Mixing devices is subtler: the dispatcher picks the kernel of the
# highest-priority backend among the arguments without checking that they
# agree. With a CPU and a meta tensor, the fake kernel runs and returns an
# uninitialised CPU tensor, with no error:

calls_before = calls_to_cpu_kernel
mixed = weighted_sum_bad(torch.ones(3), torch.ones(3, device="meta"), 0.5)
print(f"result device: {mixed.device}; real kernel calls: {calls_to_cpu_kernel}")
assert mixed.device.type == "cpu" and calls_to_cpu_kernel == calls_before

# %%
# Mixing CPU and CUDA tensors goes the same way: the CUDA kernel is handed a
# CPU tensor. A probe operator checks this when the run has a GPU.


@torch.library.custom_op(
    "troubleshoot::which_kernel", mutates_args=(), device_types="cpu"
)
def which_kernel(x: Tensor, y: Tensor) -> Tensor:
    kernel_calls.append(("CPU kernel", x.device.type, y.device.type))
    return x.clone()


@which_kernel.register_kernel("cuda")
def _(x, y):
    kernel_calls.append(("CUDA kernel", x.device.type, y.device.type))
    return x.clone()


kernel_calls = []
which_kernel(torch.ones(3), torch.ones(3))
assert kernel_calls == [("CPU kernel", "cpu", "cpu")]
if torch.cuda.is_available():
    which_kernel(torch.ones(3), torch.ones(3, device="cuda"))
    print(f"CPU tensor x, CUDA tensor y -> {kernel_calls[-1]}")
    assert kernel_calls[-1] == ("CUDA kernel", "cpu", "cuda")
else:
    print("No GPU in this run: the CPU-and-CUDA case was not checked here.")

# %%
# The operator must check devices and layouts in the real kernel *and* the
# fake kernel, since either may run. Registered for every device and moving
# data with ``numpy(force=True)``, it works on CUDA too. NumPy picks its
# result's memory order from both inputs, so the kernel returns a row-major
# copy, as the fake kernel promises.


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
    result = np.ascontiguousarray(x.numpy(force=True) + alpha * y.numpy(force=True))
    return torch.from_numpy(result).to(x.device)


@weighted_sum.register_fake
def _(x, y, alpha):
    check_weighted_sum_args(x, y)
    return x.new_empty(x.shape)


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
    xs, ys = layouts(device=device), layouts(device=device)
    pairs = [*zip(xs.values(), ys.values(), strict=True)]
    pairs.append((xs["permuted"], ys["row-major"]))  # mixed layouts
    for x, y in pairs:
        torch.library.opcheck(weighted_sum, (x, y, 0.5))
        torch.testing.assert_close(weighted_sum(x, y, 0.5), x + 0.5 * y)
print(f"opcheck passed for troubleshoot::weighted_sum on {devices}")

# %%
# Which check catches which mistake
# ---------------------------------
#
# Every detector the page ran on a broken operator noted whether it caught
# the mistake. The map shows why no single check is enough: ``opcheck``
# misses wrong values; eager code catches aliasing, unsupported types and
# missing kernels; ``gradgradcheck`` and the compiler catch what a first
# derivative and eager mode hide.

sections = list(detections)
detectors = [
    "eager code",
    "reference",
    *OPCHECK_TESTS,
    "gradcheck",
    "gradgradcheck",
    "torch.compile",
]
assert {d for outcomes in detections.values() for d in outcomes} <= set(detectors)

# sphinx_gallery_start_ignore
short_names = [name.removeprefix("test_") for name in detectors]
fig, ax = plt.subplots(figsize=(7.5, 4.8), layout="constrained")
for row, section in enumerate(sections):
    for column, detector in enumerate(detectors):
        outcome = detections[section].get(detector)
        if outcome == "caught":
            ax.plot(column, row, "s", markersize=15, color="#b03a2e")
        elif outcome == "passed":
            ax.plot(column, row, "o", markersize=11, mfc="white", mec="#5d6d7e")
ax.set_xticks(range(len(detectors)), short_names, rotation=35, ha="right")
ax.set_yticks(range(len(sections)), sections)
ax.set_xlim(-0.6, len(detectors) - 0.4)
ax.set_ylim(len(sections) - 0.5, -0.5)
ax.grid(color="0.9")
ax.set_axisbelow(True)
first, last = detectors.index(OPCHECK_TESTS[0]), detectors.index(OPCHECK_TESTS[-1])
ax.plot([first - 0.3, last + 0.3], [-0.75, -0.75], color="0.3", clip_on=False)
ax.text((first + last) / 2, -0.85, "opcheck sub-tests", ha="center", va="bottom")
ax.plot([], [], "s", color="#b03a2e", label="caught the mistake")
ax.plot([], [], "o", mfc="white", mec="#5d6d7e", label="ran and let it through")
fig.legend(loc="outside lower center", ncols=2, frameon=False)
version = torch.__version__.split("+")[0]
ax.set_title(f"Which check caught which mistake, PyTorch {version}", pad=28)
plt.show()
# sphinx_gallery_end_ignore

assert detections[WRONG_VALUES] == {
    **dict.fromkeys(OPCHECK_TESTS, "passed"),
    "reference": "caught",
}
assert detections[WRONG_STRIDES]["torch.compile"] == "caught"
assert detections[NUMPY_BACKWARD]["gradcheck"] == "passed"
assert detections[NUMPY_BACKWARD]["gradgradcheck"] == "caught"

# %%
# Checking the error index
# ------------------------
#
# The index's rows, repeated as data, are compared with the first lines
# recorded while the page ran, so a reworded message fails this cell instead
# of leaving the index stale. A row of other releases must not appear here.

error_index = [
    ("Stride mismatch", "Fake kernel with the wrong strides"),
    ("view size is not compatible", "Fake kernel with the wrong strides"),
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
    (
        "Dynamo failed to run FX node with fake tensors",
        "No fake kernel under torch.compile",
    ),
    ("There was no fake impl registered", "No fake kernel under torch.compile"),
    ("has unsupported type", "Unsupported argument types"),
    ("Jacobian mismatch", "A backward written in NumPy"),
    ("is not supported for tensor subclasses", "A backward written in NumPy"),
    ("modified by an inplace operation", "A backward written in NumPy"),
    ("Could not run", "Tensors on the wrong device"),
]

not_raised_here = {}
if not (cpu_strides_checked or "cuda" in devices):
    not_raised_here["Stride mismatch"] = "CPU strides are compared from PyTorch 2.13"
if release >= (2, 11):
    not_raised_here["Dynamo failed to run FX node with fake tensors"] = (
        "the wording before PyTorch 2.11"
    )
else:
    not_raised_here["RuntimeError when making fake tensor call"] = (
        "the wording from PyTorch 2.11 on"
    )

assert {section for _, section in error_index} == set(caught)
print(f"{'fragment':<50} {'section':<36} seen")
for fragment, section in error_index:
    seen = sum(fragment in line for line in caught[section])
    print(f"{fragment:<50.50} {section:<36} {seen}")
    if fragment in not_raised_here:
        assert seen == 0, f"{fragment!r} was raised after all"
        print(f"    not raised on this release: {not_raised_here[fragment]}")
    else:
        assert seen > 0, f"{fragment!r} not found in the errors of {section!r}"
print(
    f"{len(error_index) - len(not_raised_here)} of {len(error_index)} fragments "
    f"found in {len(caught)} sections on PyTorch {torch.__version__}"
)

# %%
# Conclusion
# ----------
#
# Most custom-operator bugs are broken promises about layouts, mutation,
# fresh outputs or a differentiable backward. Eager mode rarely notices.
# ``opcheck`` on every layout and device, ``gradcheck`` and ``gradgradcheck``
# on anything with a backward, and a reference turn them into loud errors.
#
# For the machinery behind these checks, read
# :ref:`sphx_glr_tutorials_custom_op_internals.py`. Fake kernels for
# data-dependent shapes are covered in depth in
# :ref:`sphx_glr_tutorials_fake_kernels_and_shapes.py`, in-place operators in
# :ref:`sphx_glr_tutorials_mutable_custom_ops.py`, and what a working operator
# costs at run time in :ref:`sphx_glr_tutorials_custom_op_performance.py`.
