"""
Check Your Own Operator
=======================

Each page of this course teaches a check: ``opcheck``, ``gradcheck``, a
comparison with eager mode, compiling, exporting. This page gathers them into
one function, ``check_operator``, in a module you download,
:download:`operator_checker.py </tutorial_modules/operator_checker.py>`,
and import in your tests; it needs only PyTorch. Give it your operator and
one sample: it derives the inputs a caller may really pass (other memory
layouts, empty tensors, other precisions, with and without gradients, every
device), runs every check on each, and returns a table whose rows say what
is a bug, what is a limitation of the operator, and what it could not check.
The page runs the module's own code on a correct operator, on eleven that do
not pass and on two of torchvision's operators.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * How to run every check of this course on an operator in one call,
         from your test suite
       * Which check catches which mistake, and how to tell a bug from a
         limitation
       * What the checker finds in operators you did not write

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later
       * torchvision, NumPy, Matplotlib and pytest
       * :ref:`sphx_glr_tutorials_custom_op_troubleshooting.py`

.. admonition:: Checklist
   :class: checklist

   #. Download
      :download:`operator_checker.py </tutorial_modules/operator_checker.py>`
      and put it beside your tests. It imports only ``torch``.
   #. Give each operator one small sample of ordinary row-major tensors,
      ``Sample(*args, **kwargs)``, or record samples from calls your code
      already makes with ``capture_samples``. The checker derives the rest.
   #. In a test, call ``report = check_operator(op, samples)``, print the
      report, and assert ``report.passed``: no row failed. Limitations are
      listed, not failed.
   #. For each failed row, read the page and section its ``fix:`` line names.
   #. Declare what you know, so that the report shows it:
      ``nondifferentiable=``, ``limitations=`` and ``skip=``, each with a
      reason.
"""

# %%
# Setting up
# ----------

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import types
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torchvision

RELEASE = tuple(int(part) for part in torch.__version__.split(".")[:2])
torch.manual_seed(0)
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")
if not torch.cuda.is_available():
    print("No GPU in this run: the checker made no CUDA variants.")

# %%
# What the checker runs
# ---------------------
#
# Every check runs on the variants where it can say something, in brackets,
# and names the page that teaches it:
#
# .. list-table::
#    :header-rows: 1
#    :widths: 35 65
#
#    * - check
#      - fails when
#    * - ``test_schema`` (all)
#      - the operator writes or aliases an argument against its schema:
#        :ref:`sphx_glr_tutorials_mutable_custom_ops.py`
#    * - ``test_autograd_registration`` (all)
#      - autograd support is registered in an unsupported way:
#        :ref:`sphx_glr_tutorials_custom_op_troubleshooting.py`
#    * - ``test_faketensor`` (all)
#      - the fake kernel's output differs from the real one in shape,
#        strides, dtype or device:
#        :ref:`sphx_glr_tutorials_custom_op_troubleshooting.py`
#    * - ``test_aot_dispatch_dynamic`` (all)
#      - the forward or the backward, traced by AOTAutograd with symbolic
#        sizes, fails or gives other values than eager mode:
#        :ref:`sphx_glr_tutorials_custom_op_troubleshooting.py`
#    * - ``layout`` (other layouts)
#      - the outputs or gradients on a variant differ from those on its
#        row-major copy: :ref:`sphx_glr_tutorials_strides_and_runtime.py`
#    * - ``gradcheck``, ``gradgradcheck`` (float64 with gradients)
#      - the backward disagrees with finite differences, or its own
#        derivative disagrees with it:
#        :ref:`sphx_glr_tutorials_python_custom_ops.py`
#    * - ``forward AD`` (float64 with gradients)
#      - forward-mode derivatives (``jvp``) disagree with finite
#        differences: :ref:`sphx_glr_tutorials_custom_op_transforms.py`
#    * - ``vmap`` (the sample)
#      - ``torch.func.vmap`` gives other results than a loop:
#        :ref:`sphx_glr_tutorials_custom_op_registrations.py`
#    * - ``compiled`` (all), ``compiled dynamic`` (the sample, permuted,
#        empty, with gradients)
#      - ``torch.compile`` with ``fullgraph=True`` and Inductor fails, or
#        its results (bit for bit) or gradients (within tolerance) differ
#        from eager mode: :ref:`sphx_glr_tutorials_python_custom_ops.py`
#    * - ``export + load``, ``export decomposed`` (without gradients)
#      - ``torch.export`` fails, or the program saved and loaded, or after
#        ``run_decompositions()``, gives other results than eager mode:
#        :ref:`sphx_glr_tutorials_custom_ops_in_export.py`
#    * - ``recompiles`` (the sample)
#      - a dynamic compilation compiles again for larger sizes:
#        :ref:`sphx_glr_tutorials_fake_kernels_and_shapes.py`
#
# Every row of the report has one of five outcomes:
#
# * **failed**: a bug of the operator, with the page and section that teach
#   the fix;
# * **limitation**: true and by design, such as no backward, no double
#   backward, no forward-mode derivative, an argument that gets no gradient,
#   or a clear refusal of some layout, with the remedy where the course has
#   one;
# * **not applicable**: a variant the eager kernel refuses (no bfloat16
#   kernel, say), or a check that makes no sense for the operator, with the
#   reason;
# * **skipped**: what you declared not to check, with your reason;
# * **passed**.
#
# ``report.passed`` means that no row failed. A check that does not apply is
# a row that says why, never a gap.
#
# The checker
# -----------
#
# This section is the module:
# :download:`operator_checker.py </tutorial_modules/operator_checker.py>` is
# made from its cells, and the rest of the page runs them. It imports only
# ``torch``; the private names it uses are marked where they are used.

import contextlib
import dataclasses
import itertools
import logging
import os
import re
import tempfile
import textwrap
import time
import warnings

import torch
from torch import Tensor
from torch.autograd.gradcheck import GradcheckError
from torch.overrides import TorchFunctionMode

# %%
# Samples
# ~~~~~~~
#
# A sample is the arguments of one call: a tuple of positional arguments, or
# ``Sample(*args, **kwargs)`` for keyword-only ones. It is bound to the
# operator's schema, which gives every tensor its argument's name. The schema
# comes from two private attributes, ``_opoverload`` of a ``custom_op`` and
# ``_schema`` of an ``OpOverload``; nothing public exposes it. An
# ``OpOverloadPacket`` (``torch.ops.ns.name``) runs the first overload whose
# schema the sample fits, whatever the overloads are called.


class Sample:
    """The arguments of one call of the operator, positional and by keyword."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs
        self.names = [f"argument {i}" for i in range(len(args))]  # until bound

    def __repr__(self):
        def shown(value):
            if isinstance(value, Tensor):
                return f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)}"
            if isinstance(value, (list, tuple)):
                return "[" + ", ".join(map(shown, value)) + "]"
            return repr(value)

        parts = [shown(a) for a in self.args]
        parts += [f"{k}={shown(v)}" for k, v in self.kwargs.items()]
        return f"Sample({', '.join(parts)})"

    def map(self, fn):
        """A new sample with ``fn(value, argument name)`` applied to every
        value, inside lists too."""

        def walk(value, name):
            if isinstance(value, (list, tuple)):
                return type(value)(walk(item, name) for item in value)
            return fn(value, name)

        mapped = Sample(
            *(
                walk(value, name)
                for value, name in zip(self.args, self.names, strict=True)
            ),
            **{key: walk(value, key) for key, value in self.kwargs.items()},
        )
        mapped.names = self.names
        return mapped

    def tensors(self):
        return self.named_tensors()[0]

    def named_tensors(self):
        found, names = [], []
        for value, name in self._leaves():
            if is_tensor(value):
                found.append(value)
                names.append(name)
        return found, names

    def _leaves(self):
        leaves = []
        self.map(lambda value, name: leaves.append((value, name)))
        return leaves

    def with_tensors(self, tensors):
        replacements = iter(tensors)
        return self.map(lambda v, n: next(replacements) if is_tensor(v) else v)


class Slot:
    """Where a tensor goes in a call's arguments (see ``Run.caller``)."""

    def __init__(self, index):
        self.index = index


def is_tensor(value):
    return isinstance(value, (Tensor, Slot))


def as_sample(sample):
    return sample if isinstance(sample, Sample) else Sample(*sample)


def bind(schema, sample):
    """The names of the sample's positional arguments, or ``TypeError``."""
    positional = [a for a in schema.arguments if not a.kwarg_only]
    if len(sample.args) > len(positional):
        raise TypeError(f"{len(sample.args)} positional arguments for {schema}")
    given = {a.name: value for a, value in zip(positional, sample.args, strict=False)}
    for key, value in sample.kwargs.items():
        if key in given or key not in {a.name for a in schema.arguments}:
            raise TypeError(f"no keyword argument {key!r} in {schema}")
        given[key] = value
    for argument in schema.arguments:
        if argument.name not in given and not argument.has_default_value():
            raise TypeError(f"argument {argument.name!r} missing for {schema}")
        if str(argument.type) == "Tensor" and not is_tensor(given.get(argument.name)):
            raise TypeError(f"argument {argument.name!r} must be a tensor")
    return [a.name for a in positional[: len(sample.args)]]


def overload_for(op, sample):
    """The ``OpOverload`` that ``op`` runs for ``sample``; binds the sample."""
    op = getattr(op, "_opoverload", op)  # a custom_op's CustomOpDef
    if isinstance(op, torch._ops.OpOverload):
        sample.names = bind(op._schema, sample)
        return op
    if not isinstance(op, torch._ops.OpOverloadPacket):
        raise TypeError(
            f"{op!r} is not an operator: pass a custom_op, torch.ops.ns.name "
            "or one of its overloads"
        )
    reasons = []
    for name in op.overloads():
        overload = getattr(op, name)
        try:
            sample.names = bind(overload._schema, sample)
            return overload
        except TypeError as reason:
            reasons.append(f"{name}: {reason}")
    raise TypeError(f"no overload of {op} takes {sample}: {'; '.join(reasons)}")


# %%
# Variants
# ~~~~~~~~
#
# From each sample the checker derives variants: the sample row-major
# (``contiguous``), in column-major order (``permuted``), as every other
# element of a wider buffer (``strided``), with every row the first one
# (``expanded``: stride 0, other values in the memory behind the view), one
# element into its storage (``offset``), and with a size of zero (``empty``);
# in each dtype of ``dtypes``; with gradients, in its own precision and in
# float64; on every device. Layouts
# are tried in the sample's precision without gradients, precisions in
# row-major order. A ``dtype`` or ``device`` argument equal to the sample's
# follows the variant (an accumulation dtype, say), and tensors of another
# dtype (integer indices) keep theirs. An argument the operator writes keeps
# its row-major layout and never requires grad.

LAYOUTS = ("permuted", "strided", "expanded", "offset")
DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def relayout(t, layout):
    """A copy of ``t`` with the same values, laid out as ``layout`` says."""
    t = t.detach()
    if layout == "permuted" and sum(size > 1 for size in t.shape) >= 2:
        reverse = list(range(t.dim()))[::-1]
        return t.permute(reverse).contiguous().permute(reverse)
    if layout == "strided" and t.numel() > 1:
        wide = t.new_zeros(*t.shape[:-1], 2 * t.shape[-1])
        wide[..., ::2] = t
        return wide[..., ::2]
    if layout == "expanded" and t.dim() and t.shape[0] > 1:
        memory = t.new_zeros(t.shape)  # behind the view: zeros, not the rows
        memory[:1] = t[:1]
        return memory[:1].expand(t.shape)
    if layout == "offset" and t.numel():
        storage = t.new_zeros(t.numel() + 1)
        storage[1:] = t.reshape(-1)
        return storage[1:].view(t.shape)
    return t.clone(memory_format=torch.contiguous_format)


def changes(t, layout):
    """Whether ``layout`` gives ``t`` other strides or a storage offset."""
    other = relayout(t, layout)
    return other.stride() != t.contiguous().stride() or other.storage_offset() > 0


def first_row_everywhere(value, written=False):
    """The values an expanded view holds: every row equal to the first. A
    tensor the operator writes keeps its own."""
    if not isinstance(value, Tensor) or written or not value.dim():
        return value
    return value[:1].expand(value.shape).contiguous()


def dtype_name(dtype):
    return str(dtype).removeprefix("torch.") if dtype else "integers"


@dataclasses.dataclass
class Variant:
    name: str
    index: int  # of the sample
    base: Sample  # on the variant's device and in its dtype, row-major
    layout: str  # contiguous, permuted, strided, expanded, offset or empty
    dtype: torch.dtype  # of its floating-point tensors (None: there are none)
    device: str
    grad: bool
    differentiable: frozenset  # argument names that may require grad
    written: frozenset  # argument names the operator writes
    given: bool  # the sample as given: contiguous, its own dtype and device

    def args(self, layout=None, grad=None):
        """Fresh arguments in this variant's layout, or in ``layout``."""
        layout, grad = layout or self.layout, self.grad if grad is None else grad

        def make(value, name):
            if not is_tensor(value):
                return value
            copy = relayout(value, "contiguous" if name in self.written else layout)
            wants = grad and name in self.differentiable and copy.is_floating_point()
            return copy.requires_grad_(wants)

        return self.base.map(make)


def convert(sample, device, dtype):
    """The sample on ``device``; the tensors and dtype arguments of its first
    floating-point dtype in ``dtype``."""
    tensors = sample.tensors()
    floats = [t.dtype for t in tensors if t.is_floating_point()]
    own_dtype = floats[0] if floats else None
    own_device = tensors[0].device if tensors else None

    def moved(value, name):
        if is_tensor(value):
            follows = dtype is not None and value.dtype == own_dtype
            return value.detach().to(device, dtype if follows else value.dtype)
        if isinstance(value, torch.dtype) and dtype and value == own_dtype:
            return dtype
        if isinstance(value, torch.device) and value == own_device:
            return torch.device(device)
        return value

    return sample.map(moved)


# %%
# Sizes that move together
# ~~~~~~~~~~~~~~~~~~~~~~~~
#
# The ``empty`` variant and the recompilation check change sizes, and real
# operators tie sizes together: four box coordinates, five columns per region
# of interest, channels divisible by a pool size. The checker changes a size
# only where the eager kernel accepts the change, trying first the sizes
# equal to it, which Dynamo's duck sizing treats as one size anyway. Values
# are tiled along a grown dimension, so that indices stay in range.
#
# To empty, it tries the tensors from the last to the first: an operator's
# first tensor is often the data that later ones index (the images that
# boxes point into), and a kernel that does not check its indices may read
# out of bounds on an emptied first tensor instead of refusing it.


def resized(sample, sizes):
    """``sample`` with the sizes ``{(tensor, dim): new size}``."""
    tensors = sample.tensors()
    for (index, dim), size in sizes.items():
        t = tensors[index]
        rows = torch.arange(size, device=t.device) % max(t.shape[dim], 1)
        tensors[index] = t.index_select(dim, rows)
    return sample.with_tensors(tensors)


def subsets(slots, limit=12):
    """``slots``, then with one slot left out, then two, at most ``limit``."""
    found = [list(slots)]
    for count in range(1, len(slots)):
        for left_out in itertools.combinations(range(len(slots)), count):
            found.append([s for i, s in enumerate(slots) if i not in left_out])
            if len(found) >= limit:
                return found
    return found


def refusal(run, sample):
    """What the eager kernel says to ``sample``: None if it runs."""
    try:
        with quiet():
            run.call(sample)
    except Exception as error:
        return cause(error)
    return None


def empty_sizes(run, sample):
    """The sizes to set to zero for the ``empty`` variant, or why there is none."""
    shapes = [t.shape for t in sample.tensors()]
    slots = [(i, d) for i, shape in enumerate(shapes) for d in range(len(shape))]
    order = sorted(slots, key=lambda slot: (slot[1] != 0, -slot[0], slot[1]))
    first_refusal, tries = None, 0
    for slot in order:
        size = shapes[slot[0]][slot[1]]
        if size == 0:
            return "the sample is empty already"
        equal = [s for s in slots if s != slot and shapes[s[0]][s[1]] == size]
        for others in subsets(equal, limit=6):
            sizes = dict.fromkeys([slot, *others], 0)
            said = refusal(run, resized(sample, sizes))
            if said is None:
                return sizes
            first_refusal, tries = first_refusal or said, tries + 1
            if tries >= 40:
                return f"the kernel refuses every empty size tried: {first_refusal}"
    return f"the kernel refuses every empty size tried: {first_refusal}"


def grown_samples(run, sample):
    """Three samples with larger sizes that the eager kernel accepts, for one
    dynamic compilation to serve; or why there are none. No grown size may
    equal a size that stays, or Dynamo would have tied them."""
    shapes = [t.shape for t in sample.tensors()]
    by_size = {}
    for i, shape in enumerate(shapes):
        for d, size in enumerate(shape):
            if size >= 2:  # Dynamo specializes sizes 0 and 1
                by_size.setdefault(size, []).append((i, d))
    grow = []
    for _, slots in sorted(by_size.items()):
        for chosen in subsets(slots):
            sizes = {(i, d): shapes[i][d] + 1 for i, d in grow + chosen}
            if refusal(run, resized(sample, sizes)) is None:
                grow += chosen
                break
    if not grow:
        return "the kernel accepts no larger size"
    fixed = {s for i, shape in enumerate(shapes) for d, s in enumerate(shape)}
    fixed -= {shapes[i][d] for i, d in grow}
    samples = []
    for extra in range(1, 12):
        sizes = {(i, d): shapes[i][d] + extra for i, d in grow}
        if set(sizes.values()) & fixed:
            continue
        grown = resized(sample, sizes)
        if refusal(run, grown) is None:
            samples.append(grown)
        if len(samples) == 3:
            return samples
    return "the kernel accepts fewer than three larger sizes"


# %%
# The report
# ~~~~~~~~~~
#
# Every check on every variant adds one ``Row``. Printing the report groups
# the rows of a check that share an outcome and a cause (numbers aside), and
# names the page and section that teach the fix of a failure, or the remedy
# of a limitation.

OUTCOMES = ("failed", "limitation", "not applicable", "skipped", "passed")
CHECKS = (
    "eager",
    "test_schema",
    "test_autograd_registration",
    "test_faketensor",
    "test_aot_dispatch_dynamic",
    "layout",
    "gradients",
    "gradcheck",
    "gradgradcheck",
    "forward AD",
    "vmap",
    "compiled",
    "compiled dynamic",
    "export + load",
    "export decomposed",
    "recompiles",
)


@dataclasses.dataclass
class Row:
    check: str
    variant: str
    outcome: str  # one of OUTCOMES
    detail: str = ""
    see: str = ""  # the course's page and section with the fix or remedy


@dataclasses.dataclass
class Report:
    operator: str
    variants: int = 0
    rows: list = dataclasses.field(default_factory=list)
    seconds: dict = dataclasses.field(default_factory=dict)  # per check

    @property
    def passed(self):
        return bool(self.rows) and not self.failed

    @property
    def failed(self):
        return [row for row in self.rows if row.outcome == "failed"]

    @property
    def limitations(self):
        return [row for row in self.rows if row.outcome == "limitation"]

    def spent(self, what, start):
        """Add the seconds since ``start`` to ``what``'s time."""
        self.seconds[what] = self.seconds.get(what, 0) + time.perf_counter() - start

    def outcome(self, check):
        """The worst outcome of ``check`` over the variants."""
        outcomes = {row.outcome for row in self.rows if row.check == check}
        return next((o for o in OUTCOMES if o in outcomes), "")

    def groups(self):
        """The rows, grouped by check, outcome and cause."""
        grouped = {}
        order = sorted(self.rows, key=lambda row: CHECKS.index(row.check))
        for row in order:
            cause_key = re.sub(r"\d+", "#", row.detail)
            grouped.setdefault((row.check, row.outcome, cause_key), []).append(row)
        return list(grouped.values())

    def __str__(self):
        limits = len({row.detail for row in self.limitations})
        verdict = "passed" if self.passed else f"{len(self.failed)} rows failed"
        seconds = sum(self.seconds.values())
        lines = [
            f"{self.operator}: {self.variants} variants, {verdict}, "
            f"{limits} limitation{'s' * (limits != 1)}, {seconds:.1f} s"
        ]
        for group in self.groups():
            first, ran = group[0], [r for r in self.rows if r.check == group[0].check]
            shown = first.variant
            if len(group) == len(ran) > 1:
                shown = f"all {len(ran)} variants"
            elif len(group) > 1:
                shown += f" and {len(group) - 1} more"
            lines.append(f"  {first.check}: {first.outcome}, {shown}")
            notes = [first.detail]
            if first.see:
                label = "fix" if first.outcome == "failed" else "remedy"
                notes.append(f"{label}: {first.see}")
            for note in filter(None, notes):
                lines += textwrap.wrap(
                    note, 68, initial_indent=" " * 6, subsequent_indent=" " * 8
                )
        return "\n".join(lines)


# %%
# Causes and fixes
# ~~~~~~~~~~~~~~~~
#
# A row's detail is the deepest error of the chain, whole, without the
# traceback and the hints PyTorch appends: a C++ check's file and line go,
# the message that Dynamo's wrapper quotes comes out. The detail then picks
# the page and section that teach the fix, first match first.

NOISE = re.compile(
    r"\n\s*(from user code:|Set TORCH_LOGS|Exception raised from|While executing"
    r"|Original traceback|For more information|Developer debug context"
    r"|Explanation:|Hint:|To execute this test|The above exception)"
)
CPP_LOCATION = re.compile(r"^[^,]+, \S+\.(?:cpp|cu|cuh|h|hpp):\d+, ")
QUOTED = re.compile(r"got (\w+)\((['\"])(.*?)\2\)", re.S)
DEBUG_CONTEXT = re.compile(r"Developer debug context: (\w+(?:Error|Exception)) (.*)")


def deepest(error):
    """The innermost error that ``error`` names as its cause and that has a
    message. An error raised while another was handled is not caused by it."""
    chain = [error]
    while True:
        inner = getattr(chain[-1], "inner_exception", None) or chain[-1].__cause__
        if not isinstance(inner, BaseException) or inner in chain:
            break
        chain.append(inner)
    return next((e for e in reversed(chain) if str(e).strip()), error)


def cause(error):
    """The deepest error's type and message, on one line."""
    inner = deepest(error)
    kind, text = type(inner).__name__, str(inner).strip()
    quoted = QUOTED.search(text)  # what Dynamo's run with fake tensors got
    context = DEBUG_CONTEXT.search(text)
    if quoted:
        kind, text = quoted.group(1), quoted.group(3).replace("\\'", "'")
    elif context:
        kind, text = context.groups()
    text = NOISE.split("\n" + text)[0]
    text = re.split(r",?\s*numerical:", text)[0]  # gradcheck's Jacobians
    return f"{kind}: {CPP_LOCATION.sub('', ' '.join(text.split()))}"


SHAPES = "Fake Kernels and Dynamic Shapes"
TROUBLE = "Troubleshooting Custom Operators"
MUTABLE = "Functional and Mutable Operators"
PYTHON_OPS = "Custom Python Operators"
LAYOUTS_PAGE = "Layouts, CUDA Graphs and Streams"
EDGES = "Sharp Edges: PyTorch Behaviours That Surprise Operator Authors"
FIXES = [  # (check, pattern of the detail, page, section): the first match wins
    ("", r"torch\.no_grad", "What a Custom Operator Costs",
     "Switching autograd off, properly"),
    ("", r"^no backward", PYTHON_OPS, "Adding training support for crop"),
    ("", r"^no double backward", TROUBLE, "A backward written in NumPy"),
    ("eager", r"", LAYOUTS_PAGE, "What the operator receives"),
    ("gradients", r"", PYTHON_OPS, "Adding training support for crop"),
    ("test_autograd", r"", PYTHON_OPS, "Adding training support for crop"),
    ("gradcheck", r"", PYTHON_OPS, "gradcheck catches it"),
    ("gradgradcheck", r"", TROUBLE, "A backward written in NumPy"),
    ("forward AD", r"", "Custom Operators in Function Transforms",
     "The fix: an autograd.Function around the operator"),
    ("vmap", r"", "Training and Other Registrations", "Batching with register_vmap"),
    ("recompiles", r"", SHAPES, "A fake kernel that specializes"),
    ("layout", r"", LAYOUTS_PAGE, "An operator that sees the layout"),
    ("", r"u\d+ >= 2", EDGES, "create_unbacked_symint assumes at least two"),
    ("compiled", r"capture_dynamic", SHAPES, "Output sizes that depend on the data"),
    ("", r"stride", TROUBLE, "Fake kernel with the wrong strides"),
    ("", r"dtype", TROUBLE, "The two detectors"),
    ("", r"fake impl|fake kernel|meta", TROUBLE, "No fake kernel under torch.compile"),
    ("", r"not defined as mutable|after the call differs", MUTABLE,
     "What breaks when mutates_args lies"),
    ("", r"alias", MUTABLE, "Never return an input, or a view of one"),
    ("", r"device", TROUBLE, "Tensors on the wrong device"),
    ("compiled", r"differs", "Check Your Own Operator", "Row by row"),
    ("export", r"", "Custom Operators in torch.export", "Export needs fake kernels"),
    ("", r"", TROUBLE, "Which check catches which mistake"),
]  # fmt: skip


def see_for(check, detail):
    for where, pattern, page, section in FIXES:
        if check.startswith(where) and re.search(pattern, detail, re.I):
            return f"{page} > {section}"
    return ""


# %%
# Running the operator
# ~~~~~~~~~~~~~~~~~~~~
#
# A ``Run`` holds the operator, the settings and what was learned about it.
# ``caller`` turns the operator into a function of the sample's tensors
# alone, the other arguments fixed: that is what ``torch.compile``,
# ``torch.export`` and ``vmap`` receive, so a ``torch.dtype`` argument is a
# constant of the exported program rather than one of its inputs.
# ``observed`` is what a caller sees after a call, a write into an argument
# included, and ``same`` compares two of those, naming what differs.


@dataclasses.dataclass
class Run:
    op: torch._ops.OpOverload
    exact: bool
    nondet_tol: float
    gradients: dict = dataclasses.field(default_factory=dict)  # see gradient_status
    capture: bool = False  # Dynamo's capture settings for data-dependent sizes

    def call(self, sample):
        return self.op(*sample.args, **sample.kwargs)

    def caller(self, sample):
        template = sample.with_tensors([Slot(i) for i in range(len(sample.tensors()))])
        op = self.op

        def function(*tensors):
            args = [filled(value, tensors) for value in template.args]
            kwargs = {k: filled(v, tensors) for k, v in template.kwargs.items()}
            return op(*args, **kwargs)

        return function

    def tolerances(self, dtype, exact=None):
        if (self.exact if exact is None else exact) and not self.nondet_tol:
            return {"rtol": 0, "atol": 0}
        rtol, atol = TOLERANCES.get(dtype, TOLERANCES[torch.float32])
        return {"rtol": rtol, "atol": max(atol, self.nondet_tol)}

    def backward_reaches(self, variant):
        """The arguments that get a gradient, or an ``Outcome`` saying why none."""
        return self.gradients.get((variant.index, variant.device))


TOLERANCES = {  # assert_close's defaults
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
}


def filled(value, tensors):
    if isinstance(value, Slot):
        return tensors[value.index]
    if isinstance(value, (list, tuple)):
        return type(value)(filled(item, tensors) for item in value)
    return value


def flat_tensors(value):
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in flat_tensors(item)]
    return []


def observed(outputs, sample):
    seen = {f"output {i}": t.detach() for i, t in enumerate(flat_tensors(outputs))}
    for t, name in zip(*sample.named_tensors(), strict=True):
        seen[f"{name} after the call"] = t.detach()
    return seen


def same(actual, expected, tolerances, what=""):
    if list(actual) != list(expected):
        raise AssertionError(f"{what}gives {list(actual)}, not {list(expected)}")
    for label, value in expected.items():
        try:
            torch.testing.assert_close(
                actual[label], value, equal_nan=True, **tolerances
            )
        except AssertionError as error:
            message = " ".join(str(error).split("\n")[:3])
            raise AssertionError(f"{what}{label} differs: {message}") from None


def incoming(outputs):
    """Fixed random gradients for ``outputs``."""
    generator = torch.Generator().manual_seed(0)
    return [
        torch.randn(o.shape, generator=generator, dtype=o.dtype).to(o.device)
        for o in outputs
    ]


def outcome_with_gradients(run, variant, function, sample):
    """What a caller observes, and the gradients of the differentiable outputs
    for fixed incoming gradients, where a backward reaches some argument."""
    outputs = function(*sample.tensors())
    seen, grads = observed(outputs, sample), {}
    inputs = [
        (t, n) for t, n in zip(*sample.named_tensors(), strict=True) if t.requires_grad
    ]
    differentiable = [t for t in flat_tensors(outputs) if t.requires_grad]
    if inputs and differentiable and isinstance(run.backward_reaches(variant), set):
        found = torch.autograd.grad(
            differentiable,
            [t for t, _ in inputs],
            incoming(differentiable),
            allow_unused=True,
        )
        for (t, name), g in zip(inputs, found, strict=True):
            grads[f"gradient of {name}"] = torch.zeros_like(t) if g is None else g
    return seen, grads


@contextlib.contextmanager
def quiet():
    """Silence warnings and log messages: the rows say what went wrong."""
    before = logging.root.manager.disable  # quiet() may be nested
    logging.disable(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(before)


@contextlib.contextmanager
def dynamo_settings(capture):
    """Up to PyTorch 2.9, Dynamo captures an operator whose output size depends
    on the data only with two settings on (a private module: torch._dynamo)."""
    if not capture:
        yield
        return
    with torch._dynamo.config.patch(
        capture_dynamic_output_shape_ops=True, capture_scalar_outputs=True
    ):
        yield


# %%
# The checks
# ~~~~~~~~~~
#
# Each check takes the run and a variant. It raises on a failure, returns a
# note to pass with, or returns an ``Outcome`` for any other verdict.
#
# The gradient checks use only the arguments a backward reaches, which
# ``gradient_status`` finds once per sample and device: an argument whose
# gradient comes back ``None`` is a limitation of its own, not a row of
# ``gradcheck`` (finite differences would see it move while the backward
# says nothing). If the operator refuses a perturbed input, the argument
# holds indices: declare it in ``nondifferentiable``. An error in the double
# backward or the forward-mode pass is a limitation; a wrong number is a
# failure.


@dataclasses.dataclass
class Outcome:
    outcome: str
    detail: str


class Refused(Exception):
    """The eager kernel refused an input that a check derived."""


def check_opcheck(run, variant):
    """``opcheck``'s four tests: the error of each, or ``"SUCCESS"``."""
    sample = variant.args()
    loose = {} if run.exact and not run.nondet_tol else run.tolerances(variant.dtype)
    with quiet():
        return torch.library.opcheck(
            run.op, sample.args, sample.kwargs, raise_exception=False, **loose
        )


def check_layout(run, variant):
    row_major = variant.args("contiguous")
    expected = outcome_with_gradients(run, variant, run.caller(row_major), row_major)
    sample = variant.args()
    actual = outcome_with_gradients(run, variant, run.caller(sample), sample)
    loose = run.tolerances(variant.dtype, exact=False)
    for actual_part, expected_part in zip(actual, expected, strict=True):
        same(actual_part, expected_part, loose, "on the row-major copy, ")


def differentiable_function(run, variant, guard=True):
    """The operator as a function of the tensors a backward reaches, and
    those. With ``guard``, an error of the kernel becomes ``Refused``."""
    sample = variant.args()
    reached = run.backward_reaches(variant)
    chosen = [
        n in reached and t.is_floating_point()
        for t, n in zip(*sample.named_tensors(), strict=True)
    ]
    tensors = [
        t.detach().requires_grad_(c)
        for t, c in zip(sample.tensors(), chosen, strict=True)
    ]

    def function(*inputs):
        replaced = iter(inputs)
        filled_in = [
            next(replaced) if c else t for t, c in zip(tensors, chosen, strict=True)
        ]
        if not guard:
            return run.call(sample.with_tensors(filled_in))
        try:
            return run.call(sample.with_tensors(filled_in))
        except Exception as error:
            raise Refused(cause(error)) from error

    return function, [t for t, c in zip(tensors, chosen, strict=True) if c]


def check_gradcheck(run, variant):
    function, inputs = differentiable_function(run, variant)
    torch.autograd.gradcheck(function, inputs, nondet_tol=run.nondet_tol)


def check_gradgradcheck(run, variant):
    function, inputs = differentiable_function(run, variant)
    try:
        torch.autograd.gradgradcheck(function, inputs, nondet_tol=run.nondet_tol)
    except Exception as error:
        if isinstance(deepest(error), (GradcheckError, Refused)):
            raise  # a wrong second derivative, or a refused input
        return Outcome("limitation", f"no double backward: {cause(error)}")


def check_forward_ad(run, variant):
    """Forward-mode derivatives against central finite differences."""
    function, inputs = differentiable_function(run, variant)
    unguarded, _ = differentiable_function(run, variant, guard=False)
    inputs = [t.detach() for t in inputs]
    generator = torch.Generator().manual_seed(1)
    directions = [
        torch.randn(t.shape, generator=generator, dtype=t.dtype).to(t.device)
        for t in inputs
    ]
    try:
        with torch.autograd.forward_ad.dual_level():
            duals = map(torch.autograd.forward_ad.make_dual, inputs, directions)
            outputs = flat_tensors(unguarded(*duals))
            unpacked = [torch.autograd.forward_ad.unpack_dual(o) for o in outputs]
            tangents = [
                torch.zeros_like(u.primal) if u.tangent is None else u.tangent.detach()
                for u in unpacked
                if u.primal.is_floating_point()
            ]
    except Exception as error:
        return Outcome("limitation", f"no forward-mode AD: {cause(error)}")
    eps = 1e-6
    with torch.no_grad():
        plus = flat_tensors(
            function(*(t + eps * d for t, d in zip(inputs, directions, strict=True)))
        )
        minus = flat_tensors(
            function(*(t - eps * d for t, d in zip(inputs, directions, strict=True)))
        )
    numerical = [
        (p - m) / (2 * eps)
        for p, m in zip(plus, minus, strict=True)
        if p.is_floating_point()
    ]
    moves = any(n.abs().max() > 1e-6 for n in numerical if n.numel())
    if moves and not any(t.any() for t in tangents):
        return Outcome(
            "limitation",
            "forward-mode AD (torch.func.jvp, jacfwd, forward_ad) gets zero "
            "tangents without an error: the operator has no forward-mode formula",
        )
    torch.testing.assert_close(tangents, numerical, rtol=1e-3, atol=1e-5)


def check_vmap(run, variant):
    """``vmap`` over two copies of the sample against a loop over them; the
    second copy's floating-point values halved, where the kernel accepts that."""

    def halved():
        return variant.args().map(
            lambda v, n: (
                v * 0.5
                if isinstance(v, Tensor)
                and v.is_floating_point()
                and n not in variant.written
                else v
            )
        )

    second = halved if refusal(run, halved()) is None else variant.args
    sample = variant.args()
    stacked = [
        torch.stack(pair)
        for pair in zip(sample.tensors(), second().tensors(), strict=True)
    ]
    copies = [variant.args(), second()]
    each = [observed(run.call(copy), copy) for copy in copies]
    expected = {label: torch.stack([e[label] for e in each]) for label in each[0]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            outputs = torch.func.vmap(run.caller(sample))(*stacked)
        except Exception as error:
            return Outcome("limitation", f"vmap fails: {cause(error)}")
    same(
        observed(outputs, sample.with_tensors(stacked)),
        expected,
        run.tolerances(variant.dtype),
        "under vmap, ",
    )
    if any("batching rule" in str(w.message) for w in caught):
        return "no batching rule: vmap calls the operator once per example"


def compare_compiled(run, variant, dynamic):
    compiled = torch.compile(
        run.caller(variant.args()), fullgraph=True, dynamic=dynamic
    )
    reference = variant.args()
    expected = outcome_with_gradients(run, variant, run.caller(reference), reference)
    sample = variant.args()
    with dynamo_settings(run.capture):
        actual = outcome_with_gradients(run, variant, compiled, sample)
    same(actual[0], expected[0], run.tolerances(variant.dtype), "compiled, ")
    # Inductor compiles a backward made of PyTorch operations anew: its
    # gradients are compared within tolerances, never bit for bit.
    same(
        actual[1], expected[1], run.tolerances(variant.dtype, exact=False), "compiled, "
    )


def check_compiled(run, variant, dynamic=False):
    try:
        compare_compiled(run, variant, dynamic)
    except Exception as error:
        refused = type(error).__name__ == "Unsupported" and re.search(
            r"dynamic shape operator|data.dependent", str(error), re.I
        )
        if run.capture or not refused:
            raise
        run.capture = True
        compare_compiled(run, variant, dynamic)  # raises what remains
        return Outcome(
            "limitation",
            "torch.compile(fullgraph=True) refuses an operator whose output size "
            "depends on the data on this release, unless Dynamo's "
            "capture_dynamic_output_shape_ops is set; with it, the checks pass",
        )


def check_compiled_dynamic(run, variant):
    return check_compiled(run, variant, dynamic=True)


class Calls(torch.nn.Module):
    """A module that calls the operator, for ``torch.export``."""

    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, *tensors):
        return self.function(*tensors)


def compare_program(run, variant, module):
    reference, sample = variant.args(), variant.args()
    expected = observed(run.call(reference), reference)
    actual = observed(module(*sample.tensors()), sample)
    same(actual, expected, run.tolerances(variant.dtype), "the program's ")


def exported(run, variant):
    sample = variant.args()
    return torch.export.export(Calls(run.caller(sample)), tuple(sample.tensors()))


def check_export(run, variant):
    program = exported(run, variant)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "operator.pt2")
        torch.export.save(program, path)
        compare_program(run, variant, torch.export.load(path).module())


def check_export_decomposed(run, variant):
    compare_program(run, variant, exported(run, variant).run_decompositions().module())


def check_recompiles(run, variant):
    """One dynamic compilation, then two larger sizes that must not compile
    again; ``fail_on_recompile`` names the guard that failed."""
    grown = grown_samples(run, variant.args(grad=False))
    if isinstance(grown, str):
        return Outcome("not applicable", grown)
    compiled = torch.compile(run.caller(grown[0]), fullgraph=True, dynamic=True)
    sizes = " -> ".join("x".join(map(str, g.tensors()[0].shape)) for g in grown)
    with dynamo_settings(run.capture):
        try:
            compiled(*grown[0].tensors())
        except Exception as error:
            return Outcome("not applicable", f"it does not compile: {cause(error)}")
        with torch.compiler.set_stance("fail_on_recompile"):
            for sample in grown[1:]:
                try:
                    compiled(*sample.tensors())
                except Exception as error:
                    guard = re.findall(r"- \d+/\d+: (.*?)(?:\s+#|$)", str(error), re.M)
                    said = f"; guard: {guard[0]}" if guard else ""
                    raise AssertionError(
                        f"compiled again for sizes {sizes}{said}"
                    ) from None
    return f"one compilation for sizes {sizes}"


CHECK_FUNCTIONS = {
    "layout": check_layout,
    "gradcheck": check_gradcheck,
    "gradgradcheck": check_gradgradcheck,
    "forward AD": check_forward_ad,
    "vmap": check_vmap,
    "compiled": check_compiled,
    "compiled dynamic": check_compiled_dynamic,
    "export + load": check_export,
    "export decomposed": check_export_decomposed,
    "recompiles": check_recompiles,
}
OPCHECK_TESTS = CHECKS[1:5]
GRADIENT_CHECKS = ("gradcheck", "gradgradcheck", "forward AD")
ONCE_PER_SAMPLE = (*GRADIENT_CHECKS, "vmap", "recompiles")


# %%
# Verdicts
# ~~~~~~~~
#
# ``gradient_status`` runs one backward per sample and device, with
# gradients for every floating-point argument, and records which arguments
# the backward reaches. Without a backward, compiling on inputs that require
# grad fails although eager mode runs; the checker reports that as a
# limitation with its remedy rather than as a failure or a skip. ``verdict``
# turns what a check returned or raised into a row.

NO_BACKWARD = re.compile(
    r"no autograd formula|autograd kernel was not registered"
    r"|does not require grad and does not have a grad_fn",
    re.I,
)
NO_BACKWARD_REMEDY = (
    "without a backward, compiling on inputs that require grad fails, although "
    "eager mode runs: call the operator under torch.no_grad() or register a "
    "backward"
)


def gradient_status(run, variant, report):
    sample = variant.args(grad=True)
    tensors, names = sample.named_tensors()
    inputs = [(t, n) for t, n in zip(tensors, names, strict=True) if t.requires_grad]
    if not inputs:
        return Outcome("not applicable", "no floating-point argument to differentiate")
    said = refusal(run, sample)
    if said is not None:
        return Outcome("limitation", f"refuses inputs that require grad: {said}")
    with quiet():
        outputs = [t for t in flat_tensors(run.call(sample)) if t.requires_grad]
    if not outputs:
        return Outcome("not applicable", "no output requires grad")
    try:
        with quiet():
            grads = torch.autograd.grad(
                outputs, [t for t, _ in inputs], incoming(outputs), allow_unused=True
            )
    except Exception as error:
        detail = cause(error)
        if NO_BACKWARD.search(detail):
            return Outcome("limitation", f"no backward: {detail}")
        return Outcome("failed", f"the backward raises: {detail}")
    for (_, name), g in zip(inputs, grads, strict=True):
        if g is None:
            said = (
                f"{name} gets no gradient: the backward returns None for it, so "
                "training it silently learns nothing"
            )
            where, see = f"#{variant.index} {variant.device}", see_for("gradients", "")
            report.rows.append(Row("gradients", where, "limitation", said, see))
    reached = {n for (t, n), g in zip(inputs, grads, strict=True) if g is not None}
    return reached or Outcome("limitation", "no argument gets a gradient")


def verdict(run, variant, check, result, limitations):
    if result is None or isinstance(result, str):
        return Row(check, variant.name, "passed", result or "")
    if isinstance(result, Outcome):
        outcome, detail = result.outcome, result.detail
    else:
        detail = cause(result)
        outcome = "failed"
        status = run.backward_reaches(variant)
        if isinstance(result, Refused) or isinstance(deepest(result), Refused):
            outcome = "not applicable"
            detail = (
                f"the kernel refuses a perturbed input ({detail}): if the "
                "argument holds indices, declare it in nondifferentiable="
            )
        elif (
            variant.grad and isinstance(status, Outcome) and NO_BACKWARD.search(detail)
        ):
            outcome, detail = "limitation", NO_BACKWARD_REMEDY
    if check in limitations and outcome in ("failed", "limitation"):
        outcome, detail = "limitation", f"declared: {limitations[check]} ({detail})"
    see = see_for(check, detail) if outcome in ("failed", "limitation") else ""
    return Row(check, variant.name, outcome, detail, see)


# %%
# Running every check
# ~~~~~~~~~~~~~~~~~~~
#
# ``plan`` lists the checks of a variant. ``check_operator`` binds each
# sample, finds the arguments a call writes (declared or not), makes the
# variants, and runs the plan of each variant that the eager kernel accepts.
# A refused variant is one row: a failure for the sample as given, a
# limitation for a layout, not applicable otherwise. Before each variant it
# resets Dynamo: every check compiles the same function, and with
# ``fullgraph=True`` Dynamo's limit of eight recompilations per function
# raises instead of falling back to eager mode, which would fail later
# variants for no fault of the operator.


def plan(variant, gradient_variant):
    checks = list(OPCHECK_TESTS)
    if variant.layout not in ("contiguous", "empty"):
        checks.append("layout")
    if gradient_variant or (variant.given and variant.dtype is None):
        checks += GRADIENT_CHECKS  # without floats: rows that say so
    if variant.given:
        checks.append("vmap")
    checks.append("compiled")
    if (
        variant.given
        or variant.layout in ("permuted", "empty")
        or (variant.grad and variant.layout == "contiguous")
    ):
        checks.append("compiled dynamic")
    if not variant.grad:
        checks += ["export + load", "export decomposed"]
    if variant.given:
        checks.append("recompiles")
    return checks


def variants_of(run, index, sample, devices, dtypes, written, nondifferentiable):
    """The variants of one sample, and rows for those that cannot be made."""
    tensors, names = sample.named_tensors()
    floats = [t.dtype for t in tensors if t.is_floating_point()]
    own = floats[0] if floats else None
    reference = own if own in dtypes or not floats else dtypes[0]
    differentiable = frozenset(
        n for n in names if n not in written and n not in nondifferentiable
    )
    own_type = tensors[0].device.type if tensors else "cpu"
    types = [torch.device(device).type for device in devices]
    home_device = devices[types.index(own_type)] if own_type in types else devices[0]
    home = ("contiguous", reference, home_device, False)  # the sample as given
    made, rows = [], []

    def add(layout, dtype, device, grad, base, label=None):
        kind = " ".join([label or layout, dtype_name(dtype)] + ["grad"] * grad)
        given = (layout, dtype, device, grad) == home
        fields = (base, layout, dtype, device, grad, differentiable, written, given)
        made.append(Variant(f"#{index} {kind} {device}", index, *fields))

    for device in devices:
        base = convert(sample, device, reference)
        add("contiguous", reference, device, False, base)
        for layout in LAYOUTS:
            values = base
            if layout == "expanded":
                values = base.map(lambda v, n: first_row_everywhere(v, n in written))
            laid_out = zip(*values.named_tensors(), strict=True)
            if any(changes(t, layout) for t, n in laid_out if n not in written):
                add(layout, reference, device, False, values)
        sizes = empty_sizes(run, base)
        if isinstance(sizes, dict):
            emptied = resized(base, sizes)
            label = "empty(" + ",".join(sorted({names[i] for i, _ in sizes})) + ")"
            add("empty", reference, device, False, emptied, label)
        else:
            why = f"no empty variant: {sizes}"
            rows.append(Row("eager", f"#{index} empty {device}", "not applicable", why))
        if floats:
            for dtype in (d for d in dtypes if d != reference):
                add("contiguous", dtype, device, False, convert(sample, device, dtype))
            add("contiguous", reference, device, True, base)
            if reference != torch.float64:
                grad64 = convert(sample, device, torch.float64)
                add("contiguous", torch.float64, device, True, grad64)
            if any(changes(t, "permuted") for t in base.tensors()):
                add("permuted", reference, device, True, base)
            if isinstance(sizes, dict):
                add("empty", reference, device, True, emptied, label)
    return made, rows


def written_by_call(run, sample, declared):
    """The arguments a call writes: those the schema declares, and those it
    writes without declaring them (which ``test_schema`` reports)."""
    copies = sample.map(lambda v, n: v.detach().clone() if is_tensor(v) else v)
    written = set(declared)
    if refusal(run, copies) is None:
        before, names = sample.named_tensors()
        for after, old, name in zip(copies.tensors(), before, names, strict=True):
            if not torch.equal(after.nan_to_num(), old.detach().nan_to_num()):
                written.add(name)
    return frozenset(written)


def eager_row(run, variant):
    """A row if the eager kernel refuses the variant, else None."""
    said = refusal(run, variant.args())
    if said is None:
        return None
    if variant.given:
        return Row("eager", variant.name, "failed", f"refuses its own sample: {said}")
    if variant.layout in LAYOUTS:
        detail = f"refuses {variant.layout} inputs: {said}"
        return Row("eager", variant.name, "limitation", detail, see_for("eager", said))
    return Row(
        "eager", variant.name, "not applicable", f"the kernel refuses it: {said}"
    )


def declarations(overload, nondifferentiable, skip, limitations, devices):
    """Check the declared names; a misspelt one is an error, not a silent no-op."""
    arguments = {a.name for a in overload._schema.arguments}
    kinds = {*CHECKS, *LAYOUTS, "empty", *map(dtype_name, DTYPES), *devices}
    for name in nondifferentiable:
        if name not in arguments:
            raise ValueError(f"nondifferentiable: {overload} has no argument {name!r}")
    for name in skip:
        if name not in kinds:
            raise ValueError(f"skip: {name!r} is none of {sorted(kinds)}")
    for name in limitations:
        if name not in CHECKS:
            raise ValueError(f"limitations: {name!r} is not a check: {CHECKS}")


def check_operator(
    op,
    samples,
    *,
    devices=None,
    dtypes=DTYPES,
    exact=True,
    nondet_tol=0.0,
    nondifferentiable=(),
    skip=None,
    limitations=None,
):
    """Run every check of the course on ``op`` for the variants of ``samples``.

    ``samples``: tuples of arguments or ``Sample(*args, **kwargs)``.
    ``exact=False`` compares compiled, exported and batched results with
    ``assert_close``'s tolerances instead of bit for bit; ``nondet_tol`` is the
    run-to-run difference a nondeterministic kernel may show (``gradcheck``'s
    own tolerance, and the least absolute tolerance of every comparison).
    ``nondifferentiable``, ``skip`` and ``limitations`` map argument names,
    checks or variant kinds (a layout, a dtype, a device) to the reason; each
    appears in the report.
    """
    devices = list(devices or ["cpu"] + (["cuda"] if torch.cuda.is_available() else []))
    samples = [as_sample(sample) for sample in samples]
    if not samples:
        raise ValueError("check_operator needs at least one sample")
    if not isinstance(nondifferentiable, dict):
        nondifferentiable = dict.fromkeys(nondifferentiable, "declared")
    skip_grad = set(nondifferentiable)
    skip, limitations = dict(skip or {}), dict(limitations or {})
    overloads = [overload_for(op, sample) for sample in samples]
    declarations(overloads[0], nondifferentiable, skip, limitations, devices)
    name = overloads[0]._schema.name
    if overloads[0]._overloadname != "default":
        name += f".{overloads[0]._overloadname}"
    report = Report(name)
    for argument, reason in nondifferentiable.items():
        said = f"{argument} is not differentiable: {reason}"
        report.rows.append(Row("gradients", "declared", "limitation", said))
    for what, reason in skip.items():
        check = what if what in CHECKS else "eager"
        report.rows.append(Row(check, "declared", "skipped", f"{what}: {reason}"))
    for index, (sample, overload) in enumerate(zip(samples, overloads, strict=True)):
        run = Run(overload, exact, nondet_tol)
        arguments = overload._schema.arguments
        declared = {a.name for a in arguments if a.alias_info and a.alias_info.is_write}
        start = time.perf_counter()
        written = written_by_call(run, sample, declared)
        found, rows = variants_of(
            run, index, sample, devices, dtypes, written, skip_grad
        )
        report.rows += rows
        report.variants += len(found)
        report.spent("setup", start)
        for variant in found:
            if {variant.layout, dtype_name(variant.dtype), variant.device} & set(skip):
                continue
            run_variant(run, variant, report, skip, limitations)
    return report


def run_variant(run, variant, report, skip, limitations):
    contiguous64 = (variant.layout, variant.dtype) == ("contiguous", torch.float64)
    checks = [c for c in plan(variant, variant.grad and contiguous64) if c not in skip]
    start = time.perf_counter()
    refused = eager_row(run, variant)
    key = (variant.index, variant.device)
    if refused is None and key not in run.gradients and variant.dtype is not None:
        run.gradients[key] = gradient_status(run, variant, report)
    report.spent("setup", start)
    if refused is not None:
        report.rows.append(refused)
        why = f"the variant it runs on is refused: {refused.detail}"
        for check in (c for c in checks if c in ONCE_PER_SAMPLE):
            report.rows.append(Row(check, variant.name, "not applicable", why))
        return
    torch.compiler.reset()
    for check in checks:
        start = time.perf_counter()
        status = run.backward_reaches(variant)
        if check in OPCHECK_TESTS:
            if check == OPCHECK_TESTS[0]:
                try:
                    results = check_opcheck(run, variant)
                except Exception as error:  # a failed check is a row, not a crash
                    results = dict.fromkeys(OPCHECK_TESTS, error)
            result = None if results[check] == "SUCCESS" else results[check]
            timed = "opcheck"
        elif check in GRADIENT_CHECKS and not isinstance(status, set):
            result = status or Outcome("not applicable", "no floating-point argument")
            timed = check
        else:
            try:
                with quiet():
                    result = CHECK_FUNCTIONS[check](run, variant)
            except Exception as error:
                result = error
            timed = check
        report.rows.append(verdict(run, variant, check, result, limitations))
        report.spent(timed, start)


# %%
# Recording samples
# ~~~~~~~~~~~~~~~~~
#
# Instead of writing samples, record them from calls your tests or your model
# already make. ``capture_samples`` is a ``TorchFunctionMode``, the public
# hook that sees every call of a ``torch.ops`` operator made from Python: it
# keeps a row-major copy of the arguments of the first ``limit`` calls of
# distinct shapes of each operator, and lets every call through.


@contextlib.contextmanager
def capture_samples(*ops, limit=3):
    """Yield ``{op: [Sample, ...]}``, filled by the calls made inside the block."""
    by_name = {qualified_name(op): op for op in ops}
    captured = {op: [] for op in ops}

    class Recorder(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            op = by_name.get(qualified_name(func))
            if op is not None and len(captured[op]) < limit:
                sample = Sample(*args, **kwargs).map(
                    lambda v, n: (
                        v.detach().clone(memory_format=torch.contiguous_format)
                        if isinstance(v, Tensor)
                        else v
                    )
                )
                if repr(sample) not in map(repr, captured[op]):
                    captured[op].append(sample)
            return func(*args, **kwargs)

    with Recorder():
        yield captured


def qualified_name(op):
    op = getattr(op, "_opoverload", op)
    if isinstance(op, torch._ops.OpOverload):
        return op._schema.name
    return getattr(op, "_qualified_op_name", None)


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
# One sample, a matrix, is all the checker needs:

start = time.perf_counter()
report = check_operator(silu, [(matrix,)])
silu_seconds = time.perf_counter() - start
print(report)
assert report.passed
assert {row.check for row in report.limitations} == {"forward AD"}
assert {row.check for row in report.rows if row.outcome == "not applicable"} == {
    "eager"
}

# %%
# Every check passed, with two exceptions that are not bugs. NumPy has no
# bfloat16, so the kernel refuses that variant and the checks on it do not
# apply. And forward-mode AD is a limitation: ``register_autograd`` serves
# reverse mode only, so ``torch.func.jvp`` through the operator gets zero
# tangents without an error. The remedy line names the page that wraps the
# operator in an ``autograd.Function`` with a ``jvp``. The silence is real:

_, tangent = torch.func.jvp(silu, (matrix,), (torch.ones_like(matrix),))
print(f"torch.func.jvp through silu: tangent all zeros: {not tangent.any()}")
assert not tangent.any()

# %%
# Eleven operators that do not pass
# ---------------------------------
#
# Ten operators below have one mistake each, most of them ``silu`` with a
# twist; the eleventh is correct but nondeterministic. The first two get the
# layout wrong. ``silu_wrong_strides`` has a fake kernel that ignores the
# input's layout and always promises a row-major result. ``silu_row_major``
# reads its input's memory in address order, as a C loop over
# ``x.data_ptr()`` does, which is the element order only for a row-major
# tensor. Like many inference-only kernels, it has no backward.


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
# incoming gradient. ``silu_no_fake`` has no fake kernel. ``silu_into``
# writes into ``out`` without declaring it in ``mutates_args``.
# ``silu_int_fake`` has a fake kernel whose size check calls ``int()`` on a
# size, which fixes it.


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
# Four more mistakes, and a nondeterministic operator, that only the newer
# checks see. ``silu_offset`` reads its input from the start of the storage,
# as a C++ kernel that uses ``x.storage().data()`` instead of
# ``x.data_ptr()`` does, and so ignores the storage offset of a view.
# ``silu_upcasts`` computes half precision in float32 and forgets to cast
# back.


@torch.library.custom_op("checkop::silu_offset", mutates_args=())
def silu_offset(x: Tensor) -> Tensor:
    from_the_start = x.new_empty(0).set_(x.untyped_storage(), 0, x.shape, x.stride())
    return numpy_silu(from_the_start)


silu_offset.register_fake(lambda x: torch.empty_like(x))
silu_offset.register_autograd(silu_backward, setup_context=save_input)


@torch.library.custom_op("checkop::silu_upcasts", mutates_args=())
def silu_upcasts(x: Tensor) -> Tensor:
    if x.dtype in (torch.float16, torch.bfloat16):
        return numpy_silu(x.float())  # should be .to(x.dtype) again
    return numpy_silu(x)


silu_upcasts.register_fake(lambda x: torch.empty_like(x))
silu_upcasts.register_autograd(silu_backward, setup_context=save_input)

# %%
# ``silu_two_ops`` is correct, but its backward calls a second operator,
# ``silu_grad``, which computes in column-major (Fortran) order, as code that
# calls a Fortran library does, while its fake kernel promises a row-major
# result: the mistake of ``silu_wrong_strides``, one level down, where only a
# compiled backward meets it. ``scale_to_unit`` divides a tensor by its norm
# and has a batching rule that runs the kernel on the whole batch at once, so
# one norm serves every example. ``shuffled_sum`` sums in a random order, as
# GPU kernels with atomic additions do: correct, but never the same twice in
# the last bits.


@torch.library.custom_op("checkop::silu_grad", mutates_args=())
def silu_grad(grad: Tensor, x: Tensor) -> Tensor:
    g = np.asfortranarray(grad.numpy(force=True))
    a = np.asfortranarray(x.numpy(force=True))
    sigmoid = 1 / (1 + np.exp(-a))
    return torch.from_numpy(g * sigmoid * (1 + a * (1 - sigmoid))).to(x.device)


silu_grad.register_fake(lambda grad, x: x.new_empty(x.shape))  # row-major


@torch.library.custom_op("checkop::silu_two_ops", mutates_args=())
def silu_two_ops(x: Tensor) -> Tensor:
    return numpy_silu(x)


silu_two_ops.register_fake(lambda x: torch.empty_like(x))
silu_two_ops.register_autograd(
    lambda ctx, grad: silu_grad(grad, ctx.saved_tensors[0]), setup_context=save_input
)


@torch.library.custom_op("checkop::scale_to_unit", mutates_args=())
def scale_to_unit(x: Tensor) -> Tensor:
    return x / x.norm()


scale_to_unit.register_fake(lambda x: torch.empty_like(x))
scale_to_unit.register_vmap(
    lambda info, in_dims, x: (scale_to_unit(x), in_dims[0])  # one norm for all
)


@torch.library.custom_op("checkop::shuffled_sum", mutates_args=())
def shuffled_sum(x: Tensor) -> Tensor:
    order = torch.randperm(x.shape[-1], device=x.device)
    return x[..., order].sum(-1)


shuffled_sum.register_fake(lambda x: x.new_empty(x.shape[:-1]))
shuffled_sum.register_autograd(
    lambda ctx, grad: grad.unsqueeze(-1).expand(ctx.shape).clone(),
    setup_context=lambda ctx, inputs, output: setattr(ctx, "shape", inputs[0].shape),
)

# %%
# The verdicts
# ------------
#
# One sample each. For each operator, the cell prints the checks that failed,
# on how many variants, and the detail of one failure.

wide = torch.randn(8, 1000)  # sums of a thousand numbers: the order shows
broken = {
    silu_wrong_strides: [(matrix,)],
    silu_row_major: [(matrix,)],
    silu_ignores_grad: [(matrix,)],
    silu_no_fake: [(matrix,)],
    silu_into: [(matrix, torch.zeros(3, 4))],
    silu_int_fake: [(matrix,)],
    silu_offset: [(matrix,)],
    silu_upcasts: [(matrix,)],
    silu_two_ops: [(matrix,)],
    scale_to_unit: [(matrix,)],
    shuffled_sum: [(wide,)],
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
            print(
                f"  {check:<26} {len(failures):>2} failed, e.g. {failures[0].variant}"
            )
            print(textwrap.indent(textwrap.fill(failures[0].detail, 70), " " * 6))

# %%
# Which check caught which mistake
# --------------------------------
#
# The cell states, for each operator, the checks that must fail, and asserts
# that exactly those failed. Two expectations depend on the release:
# ``test_faketensor`` compares the strides of CPU outputs from PyTorch 2.13 on
# (of CUDA outputs on every release), which ``silu_wrong_strides`` gets wrong,
# and Inductor checks the dtype of an operator's output from 2.14 on, which
# ``silu_upcasts`` gets wrong.

strides_compared = RELEASE >= (2, 13) or torch.cuda.is_available()
traced = {"compiled", "compiled dynamic"}
exported_checks = {"export + load", "export decomposed"}
expected_failures = {
    "silu": set(),
    "silu_wrong_strides": traced | ({"test_faketensor"} if strides_compared else set()),
    "silu_row_major": {"layout"},
    "silu_ignores_grad": {"gradcheck"},
    "silu_no_fake": traced
    | exported_checks
    | {"test_faketensor", "test_aot_dispatch_dynamic"},
    "silu_into": traced | {"test_schema", "export decomposed"},
    "silu_int_fake": {"recompiles"},
    "silu_offset": {"layout", "vmap"},
    "silu_upcasts": {"test_faketensor"}
    | ({"compiled"} if RELEASE >= (2, 14) else set()),
    "silu_two_ops": traced,
    "scale_to_unit": {"vmap"},
    "shuffled_sum": traced | exported_checks | {"vmap"},
}
for name, op_report in reports.items():
    failed = {row.check for row in op_report.failed}
    assert failed == expected_failures[name], (name, failed)
    assert op_report.passed == (name == "silu")
print(f"each operator failed exactly its expected checks on {torch.__version__}")

# %%
# The figure puts the twelve reports side by side. A cell is red when the
# check failed on at least one variant (the label says on how many, out of
# the variants it ran on), amber for a limitation, green when it passed on
# every variant it ran on, and grey when it did not apply.

colours = {
    "passed": "#b7dfc0",
    "failed": "#c0392b",
    "limitation": "#f0c36d",
    "not applicable": "#d5d5d5",
}
shown_checks = [check for check in CHECKS if check not in ("eager", "gradients")]
fig, ax = plt.subplots(figsize=(9, 5.6), layout="constrained")
for row, op_report in enumerate(reports.values()):
    for column, check in enumerate(shown_checks):
        rows = [r for r in op_report.rows if r.check == check]
        failed = sum(r.outcome == "failed" for r in rows)
        outcome = op_report.outcome(check) or "not applicable"
        colour = colours.get(outcome, colours["not applicable"])
        ax.add_patch(plt.Rectangle((column - 0.45, row - 0.45), 0.9, 0.9, color=colour))
        label = f"{failed}/{len(rows)}" if failed else ""
        ax.text(column, row, label, ha="center", va="center", color="white", size=8)
short_names = [check.removeprefix("test_") for check in shown_checks]
ax.set_xticks(range(len(shown_checks)), short_names, rotation=40, ha="right")
ax.set_yticks(range(len(reports)), list(reports))
ax.set(xlim=(-0.5, len(shown_checks) - 0.5), ylim=(len(reports) - 0.5, -0.5))
ax.tick_params(length=0)
ax.spines[:].set_visible(False)
handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colours.values()]
fig.legend(handles, list(colours), loc="outside lower center", ncols=4, frameon=False)
version = torch.__version__.split("+")[0]
ax.set_title(f"check_operator's verdicts: failed / variants run, PyTorch {version}")
plt.show()

# %%
# Row by row
# ~~~~~~~~~~
#
# * ``silu_wrong_strides`` fails on the permuted variant only: there the real
#   kernel returns a column-major tensor, while the fake kernel promised a
#   row-major one. ``test_faketensor`` sees it where the release compares
#   strides. Inductor checks the strides of every custom operator's output
#   when the compiled code runs (the ``expected size ... stride`` line), so
#   both compiled checks fail on every release.
# * ``silu_row_major`` fails ``layout`` on the permuted, strided and expanded
#   variants, where it reads the wrong elements: the expanded view shows the
#   first row everywhere, while the memory it reads in address order holds
#   zeros after it. ``opcheck`` compares traced results with eager ones, but
#   never with a reference, so a kernel that is wrong the same way in both
#   modes passes it; the compiled and exported programs hand the kernel the
#   same strided input and reproduce its wrong values bit for bit. Without a
#   backward, compiling on inputs that require grad fails although eager mode
#   runs: a limitation, with its remedy.

compiled_failures = [
    row for row in reports["silu_wrong_strides"].failed if "compiled" in row.check
]
assert all("expected size" in row.detail for row in compiled_failures)
assert all("permuted" in row.variant for row in reports["silu_wrong_strides"].failed)

row_major_report = reports["silu_row_major"]
layout_failures = {row.variant.split()[1] for row in row_major_report.failed}
assert layout_failures == {"permuted", "strided", "expanded"}, layout_failures
no_backward = [r for r in row_major_report.limitations if r.check == "compiled"]
assert no_backward and all(r.detail == NO_BACKWARD_REMEDY for r in no_backward)
print(NO_BACKWARD_REMEDY)

# %%
# * ``silu_ignores_grad`` fails ``gradcheck`` only. ``gradcheck`` builds the
#   Jacobian one output element at a time, with an incoming gradient that is
#   one in a single place and zero elsewhere. ``test_aot_dispatch_dynamic``
#   and the compiled check compare traced gradients with eager ones, which
#   are equally wrong, and ``gradgradcheck`` compares the backward with its
#   own derivative, which agree. After ``.sum().backward()``, whose incoming
#   gradient is all ones, the gradient is right:

x, reference = matrix.clone().requires_grad_(), matrix.clone().requires_grad_()
silu_ignores_grad(x).sum().backward()
torch.nn.functional.silu(reference).sum().backward()
torch.testing.assert_close(x.grad, reference.grad)
print("with an incoming gradient of ones, silu_ignores_grad's gradient is right")

# %%
# * ``silu_no_fake`` fails everything that traces with fake tensors: two
#   ``opcheck`` tests, both compilations and both exports. The recompilation
#   check does not apply to an operator that does not compile.
# * ``silu_into`` fails ``test_schema`` (except on the empty variants, where
#   there is nothing to write) and both compiled checks. Believing the
#   operator pure, and seeing its result unused, the compiler dropped the
#   call, so ``out`` keeps its zeros. ``torch.export`` keeps the call, but
#   ``run_decompositions()``, the next step of a deployment, drops it:

out = torch.zeros(3, 4)
torch.compile(lambda x, out: silu_into(x, out), fullgraph=True)(matrix, out)
print(f"out after the compiled call is all zeros: {not out.any()}")
assert not out.any()
into_failures = {row.check: row for row in reports["silu_into"].failed}
assert "export + load" not in into_failures
assert "out after the call differs" in into_failures["export decomposed"].detail
print(into_failures["export decomposed"].detail)

# %%
# * ``silu_int_fake`` fails ``recompiles`` only. Its fake kernel gives the
#   right result at every size, so ``opcheck``, which tests one size at a
#   time, and both compiled checks pass. Only new sizes show that ``int()``
#   fixed the size. From PyTorch 2.10, ``fail_on_recompile`` also names the
#   guard that ``int()`` left:

(recompiled,) = reports["silu_int_fake"].failed
print(recompiled.detail)
assert "compiled again" in recompiled.detail
assert ("guard" in recompiled.detail) == (RELEASE >= (2, 10))

# %%
# * ``silu_offset`` fails ``layout`` on the ``offset`` variant alone, and
#   ``vmap``: without a batching rule, ``vmap`` calls the kernel once per
#   example, on views into the batch at growing storage offsets. The compiled
#   and exported programs reproduce its wrong values.
# * ``silu_upcasts`` fails on float16 and bfloat16 only: ``test_faketensor``
#   compares dtypes. From PyTorch 2.14, Inductor also checks each output's
#   dtype against the fake kernel's, so the static compilation fails too;
#   before, the compiled program returns the float32 tensor it was handed.
#   Without the half-precision variants, nothing would fail.
# * ``silu_two_ops`` fails the compiled checks on its variants with
#   gradients, and only there: Inductor runs ``silu_grad`` in the compiled
#   backward and checks the strides its fake kernel promised. ``gradcheck``
#   and ``test_aot_dispatch_dynamic`` run the real ``silu_grad`` and never
#   compare it with its fake kernel. Check the operators your backward calls
#   too. ``silu_grad`` has no backward of its own, so the double backward is
#   a limitation.

offset_variants = {row.variant.split()[1] for row in reports["silu_offset"].failed}
assert offset_variants <= {"offset", "contiguous"}, offset_variants
upcast_dtypes = {row.variant.split()[2] for row in reports["silu_upcasts"].failed}
assert upcast_dtypes == {"float16", "bfloat16"}, upcast_dtypes
two_ops_failures = reports["silu_two_ops"].failed
assert all(
    " grad " in row.variant and "stride" in row.detail for row in two_ops_failures
)
print(two_ops_failures[0].detail)

# %%
# * ``scale_to_unit`` fails ``vmap``: its batching rule divides every example
#   by the norm of the whole batch, while a loop divides each by its own.
#   Without a backward, its gradient checks are limitations.
# * ``shuffled_sum`` is not broken. Its results differ in the last bits from
#   call to call, so every bit-for-bit comparison fails: compiled, exported and
#   batched results against eager ones. ``nondet_tol`` says how far two runs
#   may differ. Measure it, allow some margin, and pass it with
#   ``exact=False``; the comparisons then allow that much, and the operator
#   passes:

spread = max(
    (shuffled_sum(wide) - shuffled_sum(wide)).abs().max().item() for _ in range(20)
)
print(f"largest difference between two calls: {spread:.1e}")
assert 0 < spread < 1e-4
tolerant = check_operator(shuffled_sum, [(wide,)], exact=False, nondet_tol=1e-4)
print(tolerant)
assert tolerant.passed

# %%
# What the checker finds in operators you did not write
# -----------------------------------------------------
#
# torchvision's detection operators are C++ operators registered in
# ``torch.ops.torchvision``, with fake kernels and, for most, a backward.
# The samples come from calls to torchvision's own Python functions, which
# turn a list of boxes per image into the five-column regions of interest
# the operator takes (image index and four coordinates): ``capture_samples``
# records what they pass. The checks run on the CPU, on every release of the
# version matrix.

boxes = torch.tensor([[0.0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [0, 0, 5, 5]])
scores = torch.tensor([0.9, 0.8, 0.7, 0.6])
images = torch.rand(2, 3, 8, 8)
boxes_per_image = [
    torch.tensor([[0.0, 0, 4, 4], [1, 1, 6, 5]]),
    torch.tensor([[2.0, 2, 7, 7]]),
]
nms_op, roi_align_op = torch.ops.torchvision.nms, torch.ops.torchvision.roi_align
with capture_samples(nms_op, roi_align_op) as recorded:
    kept = torchvision.ops.nms(boxes, scores, iou_threshold=0.5)
    pooled = torchvision.ops.roi_align(images, boxes_per_image, output_size=2)
print(f"torchvision {torchvision.__version__}")
for op, op_samples in recorded.items():
    print(f"{op}: {op_samples}")
assert [len(s) for s in recorded.values()] == [1, 1]

# %%
# ``nms`` keeps the boxes that do not overlap a better one too much. Its
# report:

nms_report = check_operator(nms_op, recorded[nms_op], devices=["cpu"])
print(nms_report)

# %%
# Two findings. The first is a bug, and ``opcheck`` on the sample does not see
# it. ``nms`` returns as many indices as it keeps boxes, a size that depends
# on the data, and its fake kernel asks for that size with
# ``ctx.create_unbacked_symint()``, whose minimum is 2. On the variants that
# keep fewer than two boxes, the empty one and the one whose boxes are all
# the same box, the compiled and exported programs stop with ``u0 >= 2``. The
# fix is ``ctx.new_dynamic_size()``, whose minimum is 0
# (:ref:`sphx_glr_tutorials_fake_kernels_and_shapes.py` compares the two;
# :ref:`edge-unbacked-minimum-two` tracks the edge release by release).
# Not a corner case: one box is enough.

one_box = (torch.tensor([[0.0, 0, 10, 10]]), torch.tensor([0.9]), 0.5)
with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    opcheck_results = torch.library.opcheck(nms_op, one_box, raise_exception=False)
assert opcheck_results == dict.fromkeys(OPCHECK_TESTS, "SUCCESS")
try:  # with Dynamo's settings for data-dependent sizes where needed (see below)
    with dynamo_settings(RELEASE < (2, 10)), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.compile(torchvision.ops.nms, fullgraph=True)(*one_box)
except Exception as error:
    print(f"compiled nms on one box: {cause(error)}")
    assert "u0 >= 2" in cause(error)
else:
    raise AssertionError("compiled nms kept one box: torchvision fixed its fake kernel")
deprecated = {
    str(w.message) for w in said if "create_unbacked_symint" in str(w.message)
}
print(
    f"opcheck on one box: every test passes; the fake kernel warns: {deprecated.pop()}"
)
nms_failed = nms_report.failed
assert nms_failed and all("u0 >= 2" in row.detail for row in nms_failed)
assert {row.variant.split()[1] for row in nms_failed} <= {
    "empty(dets,scores)",
    "expanded",
}
assert {row.check for row in nms_failed} == traced | exported_checks

# %%
# The second is the release. Up to PyTorch 2.9, ``torch.compile`` with
# ``fullgraph=True`` refuses an operator whose output size depends on the
# data unless a Dynamo setting is on; the checker reports that as a
# limitation on those releases, then turns the setting on and checks the
# rest. From 2.10, Dynamo captures the operator as it is.

needs_setting = [row for row in nms_report.limitations if row.check == "compiled"]
print(f"PyTorch {version}: compiled nms needs the setting: {bool(needs_setting)}")
assert bool(needs_setting) == (RELEASE < (2, 10))

# %%
# ``roi_align`` pools a region of interest of each image into a small grid.
# Its report:

roi_report = check_operator(roi_align_op, recorded[roi_align_op], devices=["cpu"])
print(roi_report)
assert roi_report.passed

# %%
# No failure, and three limitations a model that trains through the operator
# must know. The boxes get no gradient: torchvision's backward returns
# ``None`` for them, so a model that learns its boxes through ``roi_align``
# learns nothing from it, with no error. There is no double backward, and no
# forward-mode derivative. The first, shown directly:

roi_limitations = {row.check for row in roi_report.limitations}
assert roi_limitations == {"gradients", "gradgradcheck", "forward AD"}, roi_limitations
images_grad = images.clone().requires_grad_()
rois = torch.cat(
    [torch.tensor([[0.0]] * 2 + [[1.0]]), torch.cat(boxes_per_image)], dim=1
).requires_grad_()
roi_align_op(images_grad, rois, 1.0, 2, 2, 0, False).sum().backward()
print(f"gradient of the boxes: {rois.grad}; of the images: {images_grad.grad.shape}")
assert rois.grad is None and images_grad.grad is not None

# %%
# Once you know a limitation, declare it: the report then says that you did,
# and why. Here the regions' first column is an image index, which should
# never require grad, and the missing double backward is torchvision's
# choice:

declared = check_operator(
    roi_align_op,
    recorded[roi_align_op],
    devices=["cpu"],
    nondifferentiable={"rois": "column 0 is an image index; boxes get no gradient"},
    limitations={"gradgradcheck": "torchvision implements no double backward"},
    skip={"bfloat16": "this model runs in float32"},
)
for row in declared.rows:
    if "declared" in (row.variant, row.detail.split(":")[0]):
        print(f"{row.check:<14} {row.outcome:<11} {row.detail}")
assert declared.passed
assert any(r.detail.startswith("declared") for r in declared.limitations)

# %%
# In your test suite
# ------------------
#
# The module is made to be imported by tests. Here is a pytest file that
# parametrizes over operators and the samples recorded from torchvision's
# own Python functions:

TEST_FILE = """
import pytest
import torch
import torchvision
from operator_checker import capture_samples, check_operator

OPS = [torch.ops.torchvision.roi_align, torch.ops.torchvision.roi_pool]


def recorded_samples():
    images = torch.rand(2, 3, 8, 8)
    boxes = [torch.tensor([[0.0, 0, 4, 4]]), torch.tensor([[1.0, 1, 6, 5]])]
    with capture_samples(*OPS) as samples:
        torchvision.ops.roi_align(images, boxes, output_size=2)
        torchvision.ops.roi_pool(images, boxes, output_size=2)
    return [(op, sample) for op in OPS for sample in samples[op]]


@pytest.mark.parametrize("op, sample", recorded_samples(), ids=str)
def test_operator(op, sample):
    report = check_operator(op, [sample], devices=["cpu"], dtypes=(torch.float32,))
    assert report.passed, report
"""

# %%
# The cell runs pytest on it, in this process, with the module that this
# page's cells define registered as ``operator_checker``: the same code as the
# file you download. A folder of its own, with an empty ``pytest.ini``, keeps
# any project's pytest settings out.

checker_module = types.ModuleType("operator_checker")
for public in ("Sample", "check_operator", "capture_samples", "Report", "Row"):
    setattr(checker_module, public, globals()[public])
sys.modules["operator_checker"] = checker_module
folder = Path(tempfile.mkdtemp())
(folder / "pytest.ini").write_text("[pytest]\n")
(folder / "test_operators.py").write_text(TEST_FILE)
with contextlib.chdir(folder):
    exit_code = pytest.main(
        [
            "-v",
            "--no-header",
            "-p",
            "no:cacheprovider",
            "--capture=sys",
            "test_operators.py",
        ]
    )
assert exit_code == pytest.ExitCode.OK, exit_code

# %%
# What it costs
# -------------
#
# The time of each call to ``check_operator`` in this build, and where the
# time went for ``silu``:

for name, op_report in reports.items():
    print(f"{name:<20} {op_report.variants:>3} variants {seconds[name]:6.1f} s")
print("silu, seconds per check:")
print({check: round(value, 1) for check, value in report.seconds.items()})
compiling = sum(
    report.seconds[c] for c in ("compiled", "compiled dynamic", "recompiles")
)
exporting = report.seconds["export + load"] + report.seconds["export decomposed"]
assert compiling + exporting > sum(report.seconds.values()) / 2

# %%
# Compiling and exporting took most of the time. To keep a test suite fast,
# give each operator one small sample, and narrow ``dtypes`` or ``devices``
# where they add nothing: the gradient checks keep their float64 variant
# whatever ``dtypes`` says. The operator may also come from ``torch.ops``, as
# an ``OpOverloadPacket``, whatever its overloads are called:

start = time.perf_counter()
packet_report = check_operator(
    torch.ops.checkop.silu, [(matrix,)], devices=["cpu"], dtypes=(torch.float32,)
)
print(f"torch.ops.checkop.silu, float32 only: {time.perf_counter() - start:.1f} s")
assert packet_report.passed
assert {r.check for r in packet_report.rows} >= {"gradcheck", "gradgradcheck"}

# %%
# Conclusion
# ----------
#
# No single check caught every mistake: ``opcheck`` missed the wrong values,
# the wrong gradient and the wrong batching rule, ``gradcheck`` missed
# everything about tracing, export missed the dropped write until its
# decompositions ran, only half precision showed the forgotten cast, and only
# new sizes showed the fixed one. ``check_operator`` runs them all, on the
# inputs a caller may really pass, says which page teaches each fix, and tells
# a bug from a limitation: in torchvision it found one of each kind.
#
# The checks themselves are taught in
# :ref:`sphx_glr_tutorials_python_custom_ops.py` (``opcheck``,
# ``gradcheck``), :ref:`sphx_glr_tutorials_custom_op_troubleshooting.py` (the
# errors), :ref:`sphx_glr_tutorials_strides_and_runtime.py` (layouts),
# :ref:`sphx_glr_tutorials_custom_op_transforms.py` (forward mode),
# :ref:`sphx_glr_tutorials_custom_ops_in_export.py` (export) and
# :ref:`sphx_glr_tutorials_fake_kernels_and_shapes.py` (sizes). The next page,
# :ref:`sphx_glr_tutorials_cpp_custom_ops.py`, moves the kernel to C++; such
# an operator reaches Python in ``torch.ops``, which ``check_operator``
# accepts as shown above.
