"""
Check Your Own Operator
=======================

Each page of this course teaches a check: ``opcheck``, ``gradcheck``, a
comparison with eager mode, compiling, exporting. This page gathers them into
one function, ``check_operator``, that you can copy into your tests. Give it
your operator and one sample: it derives the inputs a caller may really
hand the operator (other memory layouts, empty tensors, with and without
gradients, both float precisions, every device), runs every check on each, and
returns one table. The second half applies it to a correct operator and to six
broken ones, one per mistake the course teaches, and shows which check catches
which.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * How to run every check of this course on an operator in one call
       * Which check catches which mistake, and why some mistakes fail
         several checks
       * What the checks cost, and how to keep them fast

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later
       * NumPy and Matplotlib
       * :ref:`sphx_glr_tutorials_custom_op_troubleshooting.py`

.. admonition:: Checklist
   :class: checklist

   #. Copy the cells of `The checker`_ into your test suite, or download this
      page's script.
   #. Write one sample per operator: a tuple of arguments holding small,
      ordinary, row-major tensors. The checker derives the variants.
   #. Call ``report = check_operator(op, samples)``, print the report, and
      assert ``report.passed``. For an operator without a backward, whose
      gradient checks are skipped, assert ``not report.failed`` instead.
   #. For every failed row, read the page that teaches that check (the table
      in `What the checker runs`_).
   #. Keep samples small and few: the cost is compiling, once per variant.
"""

# %%
# Setting up
# ----------

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import contextlib
import dataclasses
import itertools
import logging
import math
import os
import tempfile
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
from torch import Tensor
from torch._dynamo.utils import counters

RELEASE = tuple(int(part) for part in torch.__version__.split(".")[:2])
torch.manual_seed(0)
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")
if not torch.cuda.is_available():
    print("No GPU in this run: the checker made no CUDA variants.")

# %%
# One import is private: ``torch._dynamo.utils.counters`` holds Dynamo's
# statistics, and ``counters["stats"]["unique_graphs"]`` grows by one with
# every graph Dynamo compiles, whatever the backend. The public ways count
# less: a counting backend counts only what it compiles itself, not what
# Inductor compiles, and ``torch.compiler.set_stance("fail_on_recompile")``
# turns the first recompilation into an error
# (:ref:`sphx_glr_tutorials_fake_kernels_and_shapes.py` shows both).
#
# What the checker runs
# ---------------------
#
# .. list-table::
#    :header-rows: 1
#    :widths: 30 42 28
#
#    * - check
#      - fails when
#      - taught in
#    * - ``test_schema``
#      - the operator writes or aliases an argument against its schema
#      - :ref:`sphx_glr_tutorials_custom_op_troubleshooting.py`
#    * - ``test_autograd_registration``
#      - autograd support is registered in an unsupported way
#      - :ref:`sphx_glr_tutorials_custom_op_troubleshooting.py`
#    * - ``test_faketensor``
#      - the fake kernel's output differs from the real one
#      - :ref:`sphx_glr_tutorials_python_custom_ops.py`
#    * - ``test_aot_dispatch_dynamic``
#      - the forward or the backward fails or differs when traced
#      - :ref:`sphx_glr_tutorials_custom_op_troubleshooting.py`
#    * - ``layout``
#      - the result on a variant differs from the result on its row-major copy
#      - :ref:`sphx_glr_tutorials_strides_and_runtime.py`
#    * - ``gradcheck``, ``gradgradcheck``
#      - in float64, the backward disagrees with finite differences of the
#        forward, or its own derivative disagrees with it
#      - :ref:`sphx_glr_tutorials_python_custom_ops.py`
#    * - ``compiled``, ``compiled dynamic``
#      - ``torch.compile(fullgraph=True)``, with static or dynamic shapes,
#        fails or differs from eager mode, bit for bit
#      - :ref:`sphx_glr_tutorials_python_custom_ops.py`
#    * - ``export + load``
#      - ``torch.export`` fails, or the program saved and loaded again
#        differs from eager mode
#      - :ref:`sphx_glr_tutorials_custom_ops_in_export.py`
#    * - ``recompiles``
#      - the dynamic compilation compiles again for new sizes
#      - :ref:`sphx_glr_tutorials_fake_kernels_and_shapes.py`
#
# The checker
# -----------
#
# Variants
# ~~~~~~~~
#
# A sample is a tuple of arguments. From each the checker derives variants:
# its tensors row-major (``contiguous``), reversed in memory (``permuted``:
# dense, but column-major), as every other element of a wider buffer
# (``strided``), and with a leading size of zero (``empty``), each in float32
# and float64, with and without ``requires_grad``, on every device. Integer
# tensors keep their dtype and never require grad, nor does an argument the
# schema says the operator writes.


def map_tensors(fn, value):
    """Apply ``fn`` to every tensor in ``value``, a tensor or a list or tuple."""
    if isinstance(value, Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(map_tensors(fn, item) for item in value)
    return value


def tensors_in(value):
    found = []
    map_tensors(found.append, value)
    return found


def relayout(t, layout):
    """A copy of ``t`` with the same values, laid out as ``layout`` says."""
    if layout == "permuted" and t.dim() >= 2:
        reverse = list(range(t.dim()))[::-1]
        return t.permute(reverse).contiguous().permute(reverse)
    if layout == "strided" and t.dim() >= 1:
        wide = t.new_zeros(*t.shape[:-1], 2 * t.shape[-1])
        wide[..., ::2] = t
        return wide[..., ::2]
    return t.clone(memory_format=torch.contiguous_format)


def layouts_of(sample):
    """The layouts that make at least one tensor of the sample differ."""
    tensors = tensors_in(sample)
    layouts = ["contiguous"]
    if any(sum(size > 1 for size in t.shape) >= 2 for t in tensors):
        layouts.append("permuted")
    if any(t.numel() > 1 for t in tensors):
        layouts.append("strided")
    if tensors and tensors[0].dim() >= 1 and tensors[0].shape[0] > 0:
        layouts.append("empty")
    return layouts


def shrink(sample):
    """Every tensor whose leading size is the first tensor's gets size 0 there."""
    lead = tensors_in(sample)[0].shape[0]
    return map_tensors(lambda t: t[:0] if t.dim() and t.shape[0] == lead else t, sample)


def grow(sample, extra):
    """Every size above one grown by ``extra``, the values repeated."""

    def grown(t):
        shape = [size + extra if size > 1 else size for size in t.shape]
        count, flat = math.prod(shape), t.detach().reshape(-1)
        if flat.numel() == 0:
            return t.new_zeros(shape)
        return flat.repeat(count // flat.numel() + 1)[:count].reshape(shape)

    return map_tensors(grown, sample)


def convert(sample, device, dtype):
    def moved(t):
        return t.detach().to(device, dtype if t.is_floating_point() else t.dtype)

    return map_tensors(moved, sample)


# %%
# A ``Variant`` makes fresh arguments for every call, so that no check sees
# what an earlier call wrote. Reading which arguments the operator writes
# needs its schema, through two private attributes: ``_opoverload`` of a
# ``CustomOpDef`` and ``_schema`` of an ``OpOverload``.


def schema_of(op):
    overload = getattr(op, "default", None) or getattr(op, "_opoverload", op)
    return overload._schema


@dataclasses.dataclass
class Variant:
    name: str
    base: tuple  # the sample on one device, in one dtype, row-major
    layout: str
    requires_grad: bool
    written: list  # per argument: does the schema say the operator writes it?
    first: bool  # the first variant of its sample
    compiled: object = None  # its dynamic compilation, once made

    def args(self, layout=None):
        """Fresh arguments in this variant's layout, or in ``layout``."""

        def make(value, written):
            def copy(t):
                t = relayout(t.detach(), layout or self.layout)
                grad = self.requires_grad and t.is_floating_point() and not written
                return t.requires_grad_(grad)

            return map_tensors(copy, value)

        return tuple(map(make, self.base, self.written))

    @property
    def dtype(self):
        floats = [t.dtype for t in tensors_in(self.base) if t.is_floating_point()]
        return floats[0] if floats else None


def variants(op, samples, devices, dtypes):
    arguments = schema_of(op).arguments
    written = [bool(a.alias_info and a.alias_info.is_write) for a in arguments]
    for index, sample in enumerate(samples):
        floats = any(t.is_floating_point() for t in tensors_in(sample))
        combinations = itertools.product(
            layouts_of(sample),
            devices,
            dtypes if floats else [None],
            (False, True) if floats else (False,),
        )
        for number, (layout, device, dtype, grad) in enumerate(combinations):
            shaped = tuple(shrink(sample) if layout == "empty" else sample)
            kind = str(dtype).removeprefix("torch.") if floats else "integers"
            name = f"#{index} {layout} {kind}{' grad' * grad} {device}"
            stored = "contiguous" if layout == "empty" else layout
            base = convert(shaped, device, dtype)
            yield Variant(name, base, stored, grad, written, first=number == 0)


# %%
# A float matrix and an integer vector, for instance, give these variants on
# the CPU (``aten::neg`` stands in for an operator; only its schema is read):

both = (torch.float32, torch.float64)
for sample in [(torch.randn(3, 4),), (torch.arange(5),)]:
    names = [v.name for v in variants(torch.ops.aten.neg, [sample], ["cpu"], both)]
    shown = names if len(names) < 5 else [*names[:3], "...", names[-1]]
    print(f"{len(names):>2} variants: {', '.join(shown)}")
assert not any("grad" in name or "float" in name for name in names)

# %%
# The report
# ~~~~~~~~~~
#
# Every check on every variant adds one row: the check, the variant, the
# outcome (``passed``, ``failed`` or ``skipped``) and a detail, the first line
# of the error or the reason for skipping. Printing the report groups the rows
# of a check that share an outcome and a detail. ``passed`` is true only when
# every row passed: a skipped check is not a passed one.


@dataclasses.dataclass
class Row:
    check: str
    variant: str
    outcome: str
    detail: str = ""


def first_line(error):
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


@dataclasses.dataclass
class Report:
    operator: str
    rows: list = dataclasses.field(default_factory=list)
    seconds: dict = dataclasses.field(default_factory=dict)  # per check

    def add(self, check, variant, result):
        """A row from a check's result: an exception, a reason to skip, or other."""
        if isinstance(result, Exception):
            self.rows.append(Row(check, variant.name, "failed", first_line(result)))
        elif isinstance(result, str):
            self.rows.append(Row(check, variant.name, "skipped", result))
        else:
            self.rows.append(Row(check, variant.name, "passed"))

    @property
    def passed(self):
        return bool(self.rows) and all(row.outcome == "passed" for row in self.rows)

    @property
    def failed(self):
        return [row for row in self.rows if row.outcome == "failed"]

    def outcome(self, check):
        """``failed`` if any variant failed, else ``passed`` if any passed."""
        outcomes = {row.outcome for row in self.rows if row.check == check}
        return next((o for o in ("failed", "passed", "skipped") if o in outcomes), "")

    def __str__(self):
        count = len({row.variant for row in self.rows})
        verdict = "passed" if self.passed else f"{len(self.failed)} rows failed"
        total = sum(self.seconds.values())
        table = [("check", "variant", "outcome", "detail")]
        for check in CHECKS:
            rows = [row for row in self.rows if row.check == check]
            groups = {}
            for row in rows:
                groups.setdefault((row.outcome, row.detail[:50]), []).append(row)
            for (outcome, detail), group in groups.items():
                shown = group[0].variant + f" +{len(group) - 1}" * (len(group) > 1)
                if len(group) == len(rows) > 1:
                    shown = f"all {len(rows)}"
                table.append((check, shown, outcome, detail))
        widths = [max(len(line[column]) for line in table) for column in range(3)]
        lines = [f"{self.operator}: {count} variants, {verdict}, {total:.1f} s"]
        for line in table:
            cells = [line[column].ljust(widths[column]) for column in range(3)]
            lines.append("  ".join([*cells, line[3]]).rstrip())
        return "\n".join(lines)


# %%
# The checks
# ~~~~~~~~~~
#
# Each check is a function of the operator, a variant and ``exact`` that
# raises on failure, or returns a string saying why it does not apply.
# ``outcome_of`` calls the operator, or its compiled or exported form, and
# returns what a caller can observe: the outputs, and every tensor argument
# after the call, so that a write into an argument is part of the result.
# ``same`` compares two of those, bit for bit when ``exact``.


def outcome_of(fn, args):
    outputs = fn(*args)
    return map_tensors(lambda t: t.detach(), (outputs, tensors_in(args)))


def same(actual, expected, exact):
    tolerances = {"rtol": 0, "atol": 0} if exact else {}
    torch.testing.assert_close(actual, expected, equal_nan=True, **tolerances)


def opcheck_test(test):
    """A check that runs one of ``opcheck``'s tests and raises what it found."""

    def check(op, variant, exact):
        args = variant.args()
        results = torch.library.opcheck(
            op, args, test_utils=test, raise_exception=False
        )
        if results[test] != "SUCCESS":
            raise results[test]

    return check


def check_layout(op, variant, exact):
    expected = outcome_of(op, variant.args("contiguous"))
    same(outcome_of(op, variant.args()), expected, exact=False)


def differentiable(op, args):
    """``op`` as a function of the tensors that require grad, and those."""
    inputs = [t for t in tensors_in(args) if t.requires_grad]

    def function(*tensors):
        remaining = iter(tensors)
        return op(
            *map_tensors(lambda t: next(remaining) if t.requires_grad else t, args)
        )

    return function, inputs


def check_gradcheck(op, variant, exact):
    torch.autograd.gradcheck(*differentiable(op, variant.args()))


def check_gradgradcheck(op, variant, exact):
    torch.autograd.gradgradcheck(*differentiable(op, variant.args()))


def check_compiled(op, variant, exact, dynamic=False):
    compiled = torch.compile(lambda *args: op(*args), fullgraph=True, dynamic=dynamic)
    expected = outcome_of(op, variant.args())
    same(outcome_of(compiled, variant.args()), expected, exact)
    if dynamic:
        variant.compiled = compiled  # for the recompilation count


def check_compiled_dynamic(op, variant, exact):
    check_compiled(op, variant, exact, dynamic=True)


class Calls(torch.nn.Module):
    """A module that calls the operator, for ``torch.export``."""

    def __init__(self, op):
        super().__init__()
        self.op = op

    def forward(self, *args):
        return self.op(*args)


def check_export(op, variant, exact):
    program = torch.export.export(Calls(op), variant.args())
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "operator.pt2")
        torch.export.save(program, path)
        loaded = torch.export.load(path).module()
    same(outcome_of(loaded, variant.args()), outcome_of(op, variant.args()), exact)


# %%
# The recompilation check reuses the variant's dynamic compilation (it
# compiles anew only if that one failed) and calls it on the sample grown by
# one and by two in every size above one: Dynamo specializes sizes 0 and 1
# even with ``dynamic=True``. It only counts; the values are the other
# checks' business.


def check_recompiles(op, variant, exact):
    compiled = variant.compiled or torch.compile(
        lambda *args: op(*args), fullgraph=True, dynamic=True
    )
    compiled(*variant.args())
    graphs = counters["stats"]["unique_graphs"]
    for extra in (1, 2):
        compiled(*dataclasses.replace(variant, base=grow(variant.base, extra)).args())
    recompilations = counters["stats"]["unique_graphs"] - graphs
    if recompilations:
        raise AssertionError(f"{recompilations} recompilations for 2 new sizes")


# %%
# ``plan`` lists the checks that apply to a variant: ``layout`` where the
# variant is not row-major, the gradient checks on float64 variants that
# require grad (or, to report them skipped, on the first variant of a sample
# without floating-point tensors), the recompilation count once per sample.

CHECKS = {
    "test_schema": opcheck_test("test_schema"),
    "test_autograd_registration": opcheck_test("test_autograd_registration"),
    "test_faketensor": opcheck_test("test_faketensor"),
    "test_aot_dispatch_dynamic": opcheck_test("test_aot_dispatch_dynamic"),
    "layout": check_layout,
    "gradcheck": check_gradcheck,
    "gradgradcheck": check_gradgradcheck,
    "compiled": check_compiled,
    "compiled dynamic": check_compiled_dynamic,
    "export + load": check_export,
    "recompiles": check_recompiles,
}


def plan(variant):
    def applies(check):
        if check == "layout":
            return variant.layout != "contiguous"
        if check in ("gradcheck", "gradgradcheck"):
            integers_only = variant.first and variant.dtype is None
            return (
                integers_only
                or variant.requires_grad
                and variant.dtype == torch.float64
            )
        return check != "recompiles" or variant.first

    return [check for check in CHECKS if applies(check)]


# %%
# Whether the gradient checks apply is decided once per operator: a backward
# through the operator on a float64 variant either runs or raises the error
# that says no backward is registered. Without one, every check is skipped on
# the ``requires_grad`` variants: ``opcheck`` and ``torch.compile`` would
# only report the same missing backward.


def skip_reason(variant, check, no_backward):
    """Why ``check`` does not apply to ``variant``, or None if it does."""
    if variant.requires_grad and no_backward:
        return no_backward
    if check in ("gradcheck", "gradgradcheck") and variant.dtype is None:
        return "no floating-point input"
    return None


def missing_backward(op, variant):
    """Why the gradient checks do not apply to ``op``, or None if they do."""
    args = variant.args()
    outputs = [t for t in tensors_in(op(*args)) if t.requires_grad]
    if not outputs:
        return "no output requires grad"
    inputs = [t for t in tensors_in(args) if t.requires_grad]
    try:
        torch.autograd.grad(outputs, inputs, [torch.ones_like(t) for t in outputs])
    except RuntimeError as error:
        if "autograd formula" in str(error) or "autograd kernel" in str(error):
            return "no backward registered"
    return None


@contextlib.contextmanager
def quiet():
    """Silence warnings and log messages: the rows say what went wrong."""
    logging.disable(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(logging.NOTSET)


# %%
# ``check_operator`` runs the plan of each variant in turn and turns each
# outcome into a row, so that one broken check never stops the others.
# Before each variant it resets Dynamo's caches. Every variant needs its own
# compilation anyway (dtype, layout and ``requires_grad`` are all guarded),
# and a fresh cache keeps Dynamo's limit of eight recompilations per function
# from sending later variants back to eager mode, where the compiled checks
# would pass without compiling anything.


def check_operator(
    op, samples, *, devices=None, dtypes=(torch.float32, torch.float64), exact=True
):
    """Run every check of this course on ``op`` for the variants of ``samples``.

    ``exact=False`` compares compiled and exported results with eager mode
    within ``assert_close``'s tolerances instead of bit for bit.
    """
    devices = devices or ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    report = Report(str(schema_of(op).name))
    every_variant = list(variants(op, samples, devices, dtypes))
    grad64 = [v for v in every_variant if v.requires_grad and v.dtype == torch.float64]
    no_backward = missing_backward(op, grad64[0]) if grad64 else None
    for variant in every_variant:
        torch.compiler.reset()
        for check in plan(variant):
            start = time.perf_counter()
            result = skip_reason(variant, check, no_backward)
            if result is None:
                try:
                    with quiet():
                        CHECKS[check](op, variant, exact)
                except Exception as error:  # a failed check is a row, not a crash
                    result = error
            report.add(check, variant, result)
            spent = time.perf_counter() - start
            report.seconds[check] = report.seconds.get(check, 0) + spent
    return report


# %%
# A correct operator
# ------------------
#
# The operator under test is SiLU, ``x * sigmoid(x)``, computed by NumPy so
# that PyTorch cannot see inside it. NumPy keeps the memory order of its
# input where it can, as ``torch.empty_like`` does, which is therefore the
# right fake kernel. The backward is made of PyTorch operators, so that it can
# be differentiated again.


def numpy_silu(x):
    array = x.numpy(force=True)
    return torch.from_numpy(array / (1 + np.exp(-array))).to(x.device)


def save_input(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def silu_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    sigmoid = torch.sigmoid(x)
    return grad * sigmoid * (1 + x * (1 - sigmoid))


@torch.library.custom_op("checkop::silu", mutates_args=())
def silu(x: Tensor) -> Tensor:
    return numpy_silu(x)


silu.register_fake(lambda x: torch.empty_like(x))
silu.register_autograd(silu_backward, setup_context=save_input)

matrix = torch.randn(3, 4)
torch.testing.assert_close(silu(matrix), torch.nn.functional.silu(matrix))

# %%
# Two samples, a matrix and a 3-D tensor, are all the checker needs:

samples = [(matrix,), (torch.randn(2, 3, 5),)]
start = time.perf_counter()
report = check_operator(silu, samples)
silu_seconds = time.perf_counter() - start
print(report)
assert report.passed

# %%
# Every check passed on every variant it ran on. ``layout`` runs on the
# variants that are not row-major, the gradient checks on the float64 ones
# that require grad, and ``recompiles`` once per sample.
#
# Six broken operators
# --------------------
#
# Each operator below is ``silu`` with one mistake the course teaches. The
# first two get the layout wrong. ``silu_wrong_strides`` has a fake kernel
# that ignores the input's layout and always promises a row-major result
# (:ref:`sphx_glr_tutorials_python_custom_ops.py`). ``silu_row_major`` reads
# its input's memory in address order, as a C loop over ``x.data_ptr()``
# does, which is the element order only for a row-major tensor; its result is
# always row-major, as its fake kernel says. Like many inference-only
# kernels, it has no backward.


def row_major_strides(shape):
    strides, step = [], 1
    for size in reversed(shape):
        strides.insert(0, step)
        step *= max(size, 1)
    return strides


@torch.library.custom_op("checkop::silu_wrong_strides", mutates_args=())
def silu_wrong_strides(x: Tensor) -> Tensor:
    return numpy_silu(x)


silu_wrong_strides.register_fake(lambda x: x.new_empty(x.shape))  # row-major
silu_wrong_strides.register_autograd(silu_backward, setup_context=save_input)


@torch.library.custom_op("checkop::silu_row_major", mutates_args=())
def silu_row_major(x: Tensor) -> Tensor:
    in_address_order = x.as_strided(x.shape, row_major_strides(x.shape))
    return numpy_silu(in_address_order)


silu_row_major.register_fake(lambda x: x.new_empty(x.shape))

# %%
# ``silu_ignores_grad`` has a backward that forgets to multiply by the
# incoming gradient, which is right only when that gradient is all ones.
# ``silu_no_fake`` has no fake kernel
# (:ref:`sphx_glr_tutorials_custom_op_troubleshooting.py`).


@torch.library.custom_op("checkop::silu_ignores_grad", mutates_args=())
def silu_ignores_grad(x: Tensor) -> Tensor:
    return numpy_silu(x)


def backward_without_grad(ctx, grad):
    (x,) = ctx.saved_tensors
    sigmoid = torch.sigmoid(x)
    return sigmoid * (1 + x * (1 - sigmoid))  # should be multiplied by grad


silu_ignores_grad.register_fake(lambda x: torch.empty_like(x))
silu_ignores_grad.register_autograd(backward_without_grad, setup_context=save_input)


@torch.library.custom_op("checkop::silu_no_fake", mutates_args=())
def silu_no_fake(x: Tensor) -> Tensor:
    return numpy_silu(x)


silu_no_fake.register_autograd(silu_backward, setup_context=save_input)

# %%
# ``silu_into`` writes its result into ``out`` without declaring it in
# ``mutates_args`` (:ref:`sphx_glr_tutorials_mutable_custom_ops.py`).
# ``silu_int_fake`` has a fake kernel whose size check calls ``int()`` on a
# size, which fixes it
# (:ref:`sphx_glr_tutorials_fake_kernels_and_shapes.py`).


@torch.library.custom_op("checkop::silu_into", mutates_args=())  # should be {"out"}
def silu_into(x: Tensor, out: Tensor) -> None:
    out.copy_(numpy_silu(x))


silu_into.register_fake(lambda x, out: None)


def check_size(x):
    if int(x.numel()) > 2**31:  # int() turns a symbolic size into a fixed one
        raise ValueError(f"too large: {tuple(x.shape)}")


@torch.library.custom_op("checkop::silu_int_fake", mutates_args=())
def silu_int_fake(x: Tensor) -> Tensor:
    check_size(x)
    return numpy_silu(x)


@silu_int_fake.register_fake
def _(x):
    check_size(x)
    return torch.empty_like(x)


silu_int_fake.register_autograd(silu_backward, setup_context=save_input)

# %%
# The verdicts
# ------------
#
# One sample each is enough to catch every mistake. For each operator, the
# cell prints the checks that failed, on how many variants, and the first line
# of one failure.

broken = {
    silu_wrong_strides: [(matrix,)],
    silu_row_major: [(matrix,)],
    silu_ignores_grad: [(matrix,)],
    silu_no_fake: [(matrix,)],
    silu_into: [(matrix, torch.zeros(3, 4))],
    silu_int_fake: [(matrix,)],
}
reports, seconds = {"silu": report}, {"silu": silu_seconds}
for op, op_samples in broken.items():
    start = time.perf_counter()
    op_report = check_operator(op, op_samples)
    name = op_report.operator.split("::")[1]
    reports[name], seconds[name] = op_report, time.perf_counter() - start
    print(f"{name}:")
    for check in CHECKS:
        failures = [row for row in op_report.failed if row.check == check]
        if failures:
            example = failures[0]
            print(f"  {check:<26} {len(failures):>2} failed, e.g. {example.variant}:")
            print(f"      {example.detail[:84]}")

# %%
# Which check caught which mistake
# --------------------------------
#
# The cell states, for each operator, the checks that must fail, and asserts
# that exactly those failed. ``test_faketensor`` compares the strides of CPU
# outputs from PyTorch 2.13 on, and of CUDA outputs on every release, so the
# expectation for ``silu_wrong_strides`` depends on the release.

strides_compared = RELEASE >= (2, 13) or torch.cuda.is_available()
traced = {"compiled", "compiled dynamic"}
expected_failures = {
    "silu": set(),
    "silu_wrong_strides": traced | ({"test_faketensor"} if strides_compared else set()),
    "silu_row_major": {"layout"},
    "silu_ignores_grad": {"gradcheck"},
    "silu_no_fake": traced
    | {"test_faketensor", "test_aot_dispatch_dynamic", "export + load", "recompiles"},
    "silu_into": traced | {"test_schema"},
    "silu_int_fake": {"recompiles"},
}
for name, op_report in reports.items():
    failed = {row.check for row in op_report.failed}
    assert failed == expected_failures[name], (name, failed)
    assert op_report.passed == (name == "silu")
print(f"each operator failed exactly its expected checks on {torch.__version__}")

# %%
# The figure puts the seven reports side by side. A cell is red when the check
# failed on at least one variant (the label says on how many, out of the
# variants it ran on), green when it passed on every variant it ran on, and
# grey when it was skipped on all of them.


colours = {"passed": "#b7dfc0", "failed": "#c0392b", "skipped": "#d5d5d5"}
fig, ax = plt.subplots(figsize=(8, 4.4), layout="constrained")
for row, op_report in enumerate(reports.values()):
    for column, check in enumerate(CHECKS):
        ran = [r for r in op_report.rows if r.check == check and r.outcome != "skipped"]
        failed = sum(r.outcome == "failed" for r in ran)
        colour = colours[op_report.outcome(check)]
        ax.add_patch(plt.Rectangle((column - 0.45, row - 0.45), 0.9, 0.9, color=colour))
        label = f"{failed}/{len(ran)}" if failed else ("" if ran else "skip")
        text_colour = "white" if failed else "0.3"
        ax.text(column, row, label, ha="center", va="center", color=text_colour)
short_names = [check.removeprefix("test_") for check in CHECKS]
ax.set_xticks(range(len(CHECKS)), short_names, rotation=40, ha="right")
ax.set_yticks(range(len(reports)), list(reports))
ax.set(xlim=(-0.5, len(CHECKS) - 0.5), ylim=(len(reports) - 0.5, -0.5))
ax.tick_params(length=0)
ax.spines[:].set_visible(False)
handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colours.values()]
fig.legend(handles, list(colours), loc="outside lower center", ncols=3, frameon=False)
version = torch.__version__.split("+")[0]
ax.set_title(f"check_operator's verdicts: failed / variants run, PyTorch {version}")
plt.show()

# %%
# Row by row
# ~~~~~~~~~~
#
# * ``silu_wrong_strides`` fails on the permuted variants only: for those the
#   real kernel returns a column-major tensor, while the fake kernel promised
#   a row-major one. ``test_faketensor`` sees it where the release compares
#   strides. Inductor checks the strides of every custom operator's output
#   when the compiled code runs (the ``expected size ... stride`` line), so
#   both compiled checks fail on every release.
# * ``silu_row_major`` fails ``layout`` only, on the permuted and strided
#   variants, where it reads the wrong elements. ``opcheck`` never compares
#   values, and the compiled and exported programs hand the kernel the same
#   strided input, so they reproduce its wrong values bit for bit. Without a
#   backward, its gradient checks and its ``requires_grad`` variants are
#   skipped, each with the reason:

compiled_failures = [
    row for row in reports["silu_wrong_strides"].failed if "compiled" in row.check
]
assert all("expected size" in row.detail for row in compiled_failures)
assert all("permuted" in row.variant for row in reports["silu_wrong_strides"].failed)

row_major_report = reports["silu_row_major"]
print(row_major_report)
skipped = [row for row in row_major_report.rows if row.outcome == "skipped"]
assert skipped and all(row.detail == "no backward registered" for row in skipped)
assert {row.variant for row in skipped} == {
    row.variant for row in row_major_report.rows if "grad" in row.variant.split()
}

# %%
# * ``silu_ignores_grad`` fails ``gradcheck`` only. ``gradcheck`` builds the
#   Jacobian one output element at a time, with an incoming gradient that is
#   one in a single place and zero elsewhere. ``test_aot_dispatch_dynamic``
#   compares compiled gradients with eager ones, which are equally wrong, and
#   ``gradgradcheck`` compares the backward with its own derivative, which
#   agree. The empty variant has no element to get wrong. After
#   ``.sum().backward()``, whose incoming gradient is all ones, the gradient is
#   right:

x, reference = matrix.clone().requires_grad_(), matrix.clone().requires_grad_()
silu_ignores_grad(x).sum().backward()
torch.nn.functional.silu(reference).sum().backward()
torch.testing.assert_close(x.grad, reference.grad)
print("with an incoming gradient of ones, silu_ignores_grad's gradient is right")

# %%
# * ``silu_no_fake`` fails everything that traces with fake tensors: two
#   ``opcheck`` tests, both compilations, export and the recompilation count.
#   The eager checks pass.
# * ``silu_into`` fails ``test_schema`` (except on the empty variants, where
#   there is nothing to write) and both compiled checks. Believing the
#   operator pure, and seeing its result unused, the compiler dropped the
#   call, so ``out`` keeps its zeros:

out = torch.zeros(3, 4)
torch.compile(lambda x, out: silu_into(x, out), fullgraph=True)(matrix, out)
print(f"out after the compiled call is all zeros: {not out.any()}")
assert not out.any()
skipped = [row for row in reports["silu_into"].rows if row.outcome == "skipped"]
assert skipped and all(row.detail == "no output requires grad" for row in skipped)

# %%
# ``torch.export`` kept the call, so a test that only exported would have
# missed this mistake. ``silu_into`` returns nothing to differentiate, so its
# ``requires_grad`` variants are skipped too.
#
# * ``silu_int_fake`` fails ``recompiles`` only. Its fake kernel gives the
#   right result at every size, so ``opcheck``, which tests one size at a
#   time, and both compiled checks pass. Only new sizes show that ``int()``
#   fixed the size: each one compiled again.

(recompiled,) = reports["silu_int_fake"].failed
print(recompiled.detail)
assert recompiled.detail.endswith(": 2 recompilations for 2 new sizes")

# %%
# What it costs
# -------------
#
# The time of each call to ``check_operator`` in this build, and where the
# time went for ``silu``:

for name, op_report in reports.items():
    count = len({row.variant for row in op_report.rows})
    print(f"{name:<20} {count:>3} variants {seconds[name]:6.1f} s")
print("silu, seconds per check:")
print({check: round(value, 1) for check, value in report.seconds.items()})
compiling = report.seconds["compiled"] + report.seconds["compiled dynamic"]
assert compiling + report.seconds["export + load"] > sum(report.seconds.values()) / 2

# %%
# Compiling and exporting took most of the time. To keep a test suite fast,
# give each operator one or two small samples, and narrow ``dtypes`` or
# ``devices`` where they add nothing. The operator may also come from
# ``torch.ops``, as an ``OpOverloadPacket``:

start = time.perf_counter()
packet_report = check_operator(
    torch.ops.checkop.silu, [(matrix,)], devices=["cpu"], dtypes=(torch.float64,)
)
count = len({row.variant for row in packet_report.rows})
print(f"torch.ops.checkop.silu, float64 only: {count} variants")
print(f"{time.perf_counter() - start:.1f} s")
assert packet_report.passed

# %%
# Conclusion
# ----------
#
# No single check caught every mistake: ``opcheck`` missed the wrong values
# and the wrong gradient, ``gradcheck`` missed everything about tracing,
# export missed the dropped write, and only new sizes showed the fixed one.
# ``check_operator`` runs them all, on the inputs a caller may really pass,
# and the table in `What the checker runs`_ says which page to read when a
# row fails. Copy it, give it your operators and a sample each, and assert
# ``report.passed`` in your tests.
#
# The checks themselves are taught in
# :ref:`sphx_glr_tutorials_python_custom_ops.py` (``opcheck``,
# ``gradcheck``), :ref:`sphx_glr_tutorials_custom_op_troubleshooting.py` (the
# errors), :ref:`sphx_glr_tutorials_strides_and_runtime.py` (layouts),
# :ref:`sphx_glr_tutorials_custom_ops_in_export.py` (export) and
# :ref:`sphx_glr_tutorials_fake_kernels_and_shapes.py` (recompilations).
# The next page, :ref:`sphx_glr_tutorials_cpp_custom_ops.py`, moves the kernel
# to C++; such an operator reaches Python as an ``OpOverloadPacket`` in
# ``torch.ops``, which ``check_operator`` accepts as shown above.
