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

Each fragment below is copied from the first line of an error that this page
provokes while it runs. The last cell of the page checks every fragment
against the messages it actually recorded, so the index cannot drift away
from what PyTorch says. Three rows depend on the release: ``opcheck``
reports ``Stride mismatch`` for CPU tensors from PyTorch 2.13 on (for CUDA
tensors on every release), and ``torch.compile`` words a failing fake kernel
call differently from 2.11 on. The last cell says which rows this build
raised.

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

# %%
# ``GradcheckError``, raised by ``gradcheck`` and ``gradgradcheck``, is public:
# the module ``torch.autograd.gradcheck`` lists it in ``__all__``. ``opcheck``
# needs no exception class at all. Called with ``raise_exception=False``, it
# runs every one of its sub-tests and returns a dictionary from each sub-test's
# name to ``"SUCCESS"`` or to the exception it raised, so the page can check
# *which* test caught a mistake rather than only that something failed.
#
# Every error the page provokes goes through ``record``: it prints the
# exception's type and the first line of its message, files that line under
# the section's title for the final check of the error index, and notes which
# detector caught the mistake for the map drawn at the end. ``opcheck_report``
# runs all of ``opcheck``'s sub-tests and records the failures.

gradcheck_module = importlib.import_module("torch.autograd.gradcheck")
assert "GradcheckError" in gradcheck_module.__all__

caught: dict[str, list[str]] = {}
detections: dict[str, dict[str, str]] = {}


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
# Operators have to cope with every layout a caller may hand them, so each
# repaired operator is tested on the same input in several layouts: ordinary
# row-major, non-contiguous (every other column), *permuted* (dense, but
# column-major) and empty. ``layouts`` makes them.


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
# The shapes agree, so nothing looks wrong in eager mode. The compiler,
# though, plans memory and picks kernels from the fake kernel's answer.
# Flattening the result with ``reshape`` works in eager mode, where
# ``reshape`` sees the real column-major tensor and copies it. Under
# ``torch.compile`` it was traced against the row-major fake tensor, where a
# free ``view`` does the job, and that view then meets the real tensor:


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
# ``opcheck``'s ``test_faketensor`` compares the fake kernel's output with
# the real one, strides included, but the release matters: PyTorch compared
# strides of CUDA outputs on every release and added CPU outputs in 2.13. The
# cell says what this release did; on older ones the compiled run above is the
# detector that fires on a CPU-only machine.

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
# Fake tensors have no data. Some operators produce an output whose *size*
# depends on the input's *values*: here each row of ``x`` is repeated as many
# times as ``counts`` says, so the number of output rows is
# ``counts.sum()``. Calling ``.item()`` (or ``.tolist()``) on a fake tensor
# cannot produce a number.

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
# Both tests that run the fake kernel fail. Inside it, ``.item()`` returned a
# symbol standing for an unknown integer, and converting that symbol to a
# Python ``int`` needs the value, which does not exist. The fix is to say
# "this size is only known at run time" with
# ``torch.library.get_ctx().new_dynamic_size()``. The real kernel also checks
# the values it can only see there: negative counts.


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
# ``mutates_args`` is a promise. The compiler reorders, deduplicates and
# deletes operator calls based on it, so an operator that writes into an
# argument without listing it can silently lose the write. Here the kernel
# clamps its input in place but declares no mutation. (It returns nothing,
# and its fake kernel says so.)

UNDECLARED_MUTATION = "Mutation missing from mutates_args"


@torch.library.custom_op("troubleshoot::relu_in_place_bad", mutates_args=())
def relu_in_place_bad(x: Tensor) -> None:
    x.clamp_(min=0)


relu_in_place_bad.register_fake(lambda x: None)

failures = opcheck_report(UNDECLARED_MUTATION, relu_in_place_bad, (torch.randn(5),))
assert set(failures) == {"test_schema"}

# %%
# ``test_schema`` compared the input before and after the call and found it
# changed. Naming ``x`` in ``mutates_args`` marks it as written in the schema
# (the ``!`` in ``Tensor(a0!) x``), and the test passes. A mutating operator
# that returns nothing needs no fake kernel of its own: there is no output to
# describe.


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
# An operator made with ``custom_op`` must return fresh tensors. Two
# innocent-looking shortcuts break this: a fast path that hands back the input
# when there is nothing to do, and returning a view (a reshape, a slice) that
# shares the input's memory. PyTorch checks each call and refuses both:

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
# Both messages state the same rule: an output may neither be an input nor
# share memory with one. The compiler relies on that rule when it decides
# which buffers it may reuse or overwrite, so the fix is to pay for a copy.
# The test for "nothing to clip" is written with ``all()``, which is also
# true for an empty tensor; ``x.abs().max()`` would raise on one.


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
# ``empty_like`` keeps the input's strides when the input is dense (row-major
# or permuted), like ``clone`` and ``clamp`` in the kernel, and falls back to
# row-major otherwise, as they do; so this fake kernel stays correct for every
# layout above.
#
# No fake kernel under torch.compile
# ----------------------------------
#
# An operator built on NumPy works in eager mode without a fake kernel.
# ``torch.compile`` traces with fake tensors, so the first compiled call
# needs one. We compile with the ``aot_eager`` backend, which captures the
# graph and runs AOTAutograd's tracing like the default backend but skips
# Inductor's code generation, to keep the page fast.

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
# From PyTorch 2.11 on, the first line only says that the call on fake
# tensors failed, and the reason follows a few lines further down; older
# releases put everything into one long first line that starts with
# ``Dynamo failed to run FX node with fake tensors``. ``TorchRuntimeError``
# lives in the private module ``torch._dynamo.exc`` because it is Dynamo's own
# wrapper around errors raised while tracing. ``opcheck`` spots the same problem
# without ``torch.compile``, in both of the tests that use the fake kernel,
# and puts the reason in the first line:

failures = opcheck_report(NO_FAKE, numpy_cube, (vector,))
assert set(failures) == {"test_faketensor", "test_aot_dispatch_dynamic"}

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
    for sample in layouts(device=device).values():
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
# dictionary of options or a NumPy array is not among them, and the mistake
# surfaces right at the decorator, before any call. Long error messages are
# cut short here; this one goes on to list every supported type.

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
# The remedy is to spell the options out as typed arguments with defaults, and
# to pass arrays as tensors. Here the operator smooths a 1-D signal with a
# kernel given as a tensor; ``padding_mode`` and ``normalize`` replace the
# dictionary. Padding needs a signal longer than half the kernel, so shorter
# signals, the empty one included, are refused with a ``ValueError`` instead
# of an error from deep inside ``pad``.


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
# The backward formula registered with ``register_autograd`` is ordinary
# Python, so it is tempting to compute it with the same NumPy code as the
# forward. First derivatives even come out right, which is what makes this
# mistake easy to miss. This operator makes a second, quieter mistake as well:
# ``setup_context`` keeps the input as an attribute of ``ctx``.

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
    record(NUMPY_BACKWARD, "gradgradcheck", error)
else:
    raise AssertionError("expected gradgradcheck to reject the NumPy backward")

# %%
# Compilation is the other casualty. ``torch.compile`` traces the backward
# with fake tensors too, and a fake tensor has no data to hand to NumPy.
# ``opcheck`` fails in ``test_aot_dispatch_dynamic``, the test that mimics
# this tracing, and in no other. (While the test fails, autograd's anomaly
# mode prints a warning with a stack trace; we silence it to keep the output
# short.)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    failures = opcheck_report(NUMPY_BACKWARD, numpy_sin_bad, (angles,))
assert set(failures) == {"test_aot_dispatch_dynamic"}

# %%
# The attribute is the quieter problem. Autograd protects the tensors saved
# with ``ctx.save_for_backward``: each tensor has a *version counter* that
# every in-place operation bumps, and backward checks that the saved
# version is still current. An attribute escapes that check. Modify the
# input in place after the forward pass, and the backward silently uses the
# new values:

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
# ``save_for_backward``. The forward may stay in NumPy, because the operator
# boundary hides it. If the backward itself needs foreign code, make that
# code a custom operator of its own, with a fake kernel, and register a
# backward for it too if you need second derivatives.


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
# The same in-place modification now stops the backward, with the error
# autograd raises for any saved tensor that changed:

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
# ``device_types="cpu"`` registers the kernel for one *dispatch key*, the
# label PyTorch uses to pick a kernel for each kind of tensor. Every other
# backend is left without a kernel. CUDA is one of them, and so is the
# sparse CPU layout, which is what this page uses to show the error on any
# machine. The fake kernel is registered under the ``Meta`` key, which is why
# meta tensors (which carry no data) still work.

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
# same way: the CUDA kernel runs and is handed a CPU tensor. The cell below
# checks this with a probe operator whose kernels only report where they were
# called, when this run has a GPU.


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
# The operator has to defend itself: check devices and layouts in the real
# kernel *and* in the fake kernel, since either one may be the kernel that
# runs. Registering for every device (no ``device_types``) and moving data
# through NumPy with ``force=True`` makes the kernel usable on CUDA too, and
# a mismatch now produces a clear ``ValueError``. NumPy picks the memory order
# of its result from both inputs, so the kernel returns a row-major copy and
# the fake kernel promises exactly that, whatever the layouts it is given.


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
# Every detector the page ran on a broken operator left a note: the mistake
# it caught, or the mistake it let through. Drawn as a map, the notes show why
# no single check is enough. ``opcheck`` catches most registration mistakes,
# but not wrong values, and on older releases not wrong CPU strides. Running
# the code eagerly (or defining the operator) catches aliasing, unsupported
# types and missing kernels. ``gradgradcheck`` and the compiler catch what a
# first derivative and eager mode hide.

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
# The table at the top of the page lists one fragment per row. The same rows
# are repeated here as data and compared with the first lines recorded while
# the page ran. If a future PyTorch rewords a message, this cell fails and the
# index gets updated instead of going stale. A row that belongs to other
# releases is listed with the reason, and the cell asserts that this release
# did not raise it.

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
# Most custom-operator bugs are broken promises: the fake kernel promises a
# layout, the schema promises which arguments change, the decorator promises
# fresh outputs, and the backward promises to be differentiable and traceable.
# Eager mode rarely notices; ``torch.compile`` and second derivatives do.
# Running ``opcheck`` on representative inputs (every layout, every device you
# support), ``gradcheck`` plus ``gradgradcheck`` on anything with a backward,
# and a comparison with a reference turns these silent problems into the loud
# errors above.
#
# For the machinery behind these checks, read
# :ref:`sphx_glr_tutorials_custom_op_internals.py`. Fake kernels for
# data-dependent shapes are covered in depth in
# :ref:`sphx_glr_tutorials_fake_kernels_and_shapes.py`, in-place operators in
# :ref:`sphx_glr_tutorials_mutable_custom_ops.py`, and what a working operator
# costs at run time in :ref:`sphx_glr_tutorials_custom_op_performance.py`.
