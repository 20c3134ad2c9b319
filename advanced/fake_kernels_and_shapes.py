"""
Fake Kernels and Dynamic Shapes
===============================

After this page you will be able to write fake kernels that keep working when
``torch.compile`` treats sizes as symbols: kernels whose output size is
arithmetic on the input sizes, and kernels for operators whose output size
depends on the values in the input. You will also be able to tell a fake kernel
that forces a new compilation for every input size from one that compiles
once, and to let ``opcheck`` catch a fake kernel that promises the wrong shape.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * What a fake kernel receives under ``torch.compile(dynamic=True)``
       * How to compute an output size from symbolic input sizes
       * How to declare a data-dependent output size with
         ``torch.library.get_ctx().new_dynamic_size()``
       * How a fake kernel that specializes on a size causes recompilations,
         and how to count them

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later
       * NumPy and Matplotlib
       * :ref:`sphx_glr_tutorials_python_custom_ops.py`

.. admonition:: Checklist
   :class: checklist

   #. Compute the output size in the fake kernel with ordinary arithmetic on
      the input sizes (``+``, ``-``, ``*``, ``//``, ``%``); never call
      ``int()`` on them.
   #. If the size depends on the values, return
      ``torch.library.get_ctx().new_dynamic_size()``.
   #. Run the same argument checks in the fake kernel as in the real one.
   #. Test with ``opcheck`` on samples that include an empty and a
      non-contiguous input; its ``test_aot_dispatch_dynamic`` traces with
      symbolic sizes.
   #. Count compilations with a small counting backend, or make a
      recompilation an error with ``torch.compiler.set_stance``.
   #. Before branching on a data-dependent size, state the fact with
      ``torch._check``.

A fake kernel answers one question for the compiler: given inputs that have a
shape, a dtype and a device but no data, what does the output look like? With
static shapes the answer is made of plain integers. Once the compiler wants a
single graph for many input sizes, those integers become *symbols*, and the
fake kernel has to compute with symbols as well. Output sizes come in three
kinds:

* copied from an input, as for an elementwise operator (the easy case, not
  discussed further);
* computed from the input sizes, as for a concatenation or padding;
* dependent on the data, as for the number of distinct values in a tensor.
"""

# %%
# Setting up
# ----------
#
# Every operator on this page wraps a NumPy routine, playing the part of the
# library you would wrap. NumPy only reads CPU memory, so the kernels copy CUDA
# inputs to the CPU and copy the result back, which keeps the operators usable
# on every device this run has.

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import contextlib
import inspect
import logging

import matplotlib.pyplot as plt
import numpy as np

# For behaviour that changed between releases without a feature to test for.
RELEASE = tuple(int(part) for part in torch.__version__.split(".")[:2])

torch.manual_seed(0)
np.random.seed(0)
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")

# %%
# To count compilations we use a small ``torch.compile`` backend of our own. A
# backend is any callable that receives the graph Dynamo captured and returns
# something to run. This one counts how often it is called and runs the graph
# unchanged, so each call is one compilation.


class CountingBackend:
    """A torch.compile backend that counts the graphs it is handed."""

    def __init__(self):
        self.compilations = 0

    def __call__(self, graph_module, example_inputs):
        self.compilations += 1
        return graph_module.forward


def to_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def check_1d(t: torch.Tensor, name: str) -> None:
    if t.dim() != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(t.shape)}")


# %%
# What a fake kernel receives
# ---------------------------
#
# The first operator joins two 1-D tensors end to end with
# ``np.concatenate``. Its output length is the sum of the input lengths, and
# that sum is all the fake kernel computes. For this demonstration the fake
# kernel also writes down what kind of object each size is and how it prints.
# (A real fake kernel should have no side effects; this one exists to be
# looked at.)

fake_kernel_log = []


def check_concat(a: torch.Tensor, b: torch.Tensor) -> None:
    check_1d(a, "a")
    check_1d(b, "b")
    if a.dtype != b.dtype or a.device != b.device:
        raise ValueError(
            f"a and b must share dtype and device, got {a.dtype} on {a.device} "
            f"and {b.dtype} on {b.device}"
        )


@torch.library.custom_op("shapes::concat", mutates_args=())
def concat(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    check_concat(a, b)
    joined = np.concatenate([to_numpy(a), to_numpy(b)])
    return torch.from_numpy(joined).to(a.device)


@concat.register_fake
def _(a, b):
    check_concat(a, b)
    length = a.shape[0] + b.shape[0]
    fake_kernel_log.append((type(a.shape[0]).__name__, a.shape[0], b.shape[0], length))
    return a.new_empty(length)


# %%
# The ``opcheck`` samples include an empty input and a non-contiguous one
# (every other element of a longer tensor). For 1-D tensors those are the
# layouts there are: every dense 1-D tensor is contiguous. None requires grad,
# because these operators register no backward.


def samples_1d(device, length=7):
    """A fresh 1-D tensor, an empty one and every other element of a longer one."""
    return [
        torch.randn(length, device=device),
        torch.randn(0, device=device),
        torch.randn(2 * length, device=device)[::2],
    ]


assert not samples_1d("cpu")[2].is_contiguous()
for device in devices:
    for a in samples_1d(device):
        for b in samples_1d(device, length=4):
            torch.library.opcheck(concat, (a, b))
            torch.testing.assert_close(concat(a, b), torch.cat([a, b]))
print(f"opcheck passed and concat matches torch.cat on {devices}")

# %%
# We compile the same small function twice, once with ``dynamic=False`` and
# once with ``dynamic=True``, call each with ``a`` of length 3 and ``b`` of
# length 4, and print what the fake kernel saw while the function was traced.

a, b = torch.randn(3), torch.randn(4)
fake_kernel_log.clear()
static_concat = torch.compile(
    lambda a, b: concat(a, b) * 2, backend=CountingBackend(), dynamic=False
)
torch.testing.assert_close(static_concat(a, b), torch.cat([a, b]) * 2)
static_log = list(fake_kernel_log)

fake_kernel_log.clear()
dynamic_counter = CountingBackend()
dynamic_concat = torch.compile(
    lambda a, b: concat(a, b) * 2, backend=dynamic_counter, dynamic=True
)
torch.testing.assert_close(dynamic_concat(a, b), torch.cat([a, b]) * 2)
dynamic_log = list(fake_kernel_log)

print(f"{'compiled with':<15}{'size type':<11}{'len(a)':<8}{'len(b)':<8}output length")
for label, log in [("dynamic=False", static_log), ("dynamic=True", dynamic_log)]:
    for kind, len_a, len_b, length in log:
        print(f"{label:<15}{kind:<11}{len_a!s:<8}{len_b!s:<8}{length}")

assert static_log and all(kind == "int" for kind, *_ in static_log)
assert dynamic_log and all(kind == "SymInt" for kind, *_ in dynamic_log)
assert all(str(n).startswith("s") for _, *sizes, _ in dynamic_log for n in sizes)
assert all(isinstance(length, torch.SymInt) for *_, length in dynamic_log)

# %%
# With static shapes the fake kernel got Python ``int`` values and returned an
# integer length. With ``dynamic=True`` it got ``torch.SymInt`` objects, named
# after symbols the compiler invented for the two input lengths, and the same
# ``a.shape[0] + b.shape[0]`` built a symbolic expression instead of a number.
# That expression lets the compiled graph serve inputs of other lengths
# without tracing again, so the fake kernel does not run for them:

a, b = torch.randn(5), torch.randn(9)
fake_kernel_log.clear()
torch.testing.assert_close(dynamic_concat(a, b), torch.cat([a, b]) * 2)
print(f"fake kernel calls for lengths 5 and 9: {len(fake_kernel_log)}")
print(f"compilations: {dynamic_counter.compilations}")
assert fake_kernel_log == []
assert dynamic_counter.compilations == 1

# %%
# The fake kernel did not need a single change to handle both cases, because
# ``SymInt`` supports the same arithmetic as ``int``.
#
# One exception is worth knowing. Even with ``dynamic=True``, PyTorch treats
# the sizes 0 and 1 as special and compiles separately for each of them, so
# there the fake kernel sees a plain ``int``:

counter = CountingBackend()
concat_twice = torch.compile(
    lambda a, b: concat(a, b) * 2, backend=counter, dynamic=True
)
special_sizes_seen = []
for len_a in [3, 1, 0]:
    fake_kernel_log.clear()
    concat_twice(torch.randn(len_a), torch.randn(4))
    special_sizes_seen.append(fake_kernel_log[0][1])
    print(f"len(a) = {len_a}: fake kernel saw {fake_kernel_log[0][:2]}")
print(f"compilations: {counter.compilations}")
assert counter.compilations == 3
assert special_sizes_seen[1:] == [1, 0]
assert all(type(size) is int for size in special_sizes_seen[1:])

# %%
# Output sizes computed from input sizes
# --------------------------------------
#
# The next operator pads a 1-D tensor with zeros at the end, up to the next
# multiple of ``multiple`` (think of aligning a buffer for a vectorized
# routine), using ``np.pad``. The output length is a formula in the input
# length, written once and used by the real kernel, the fake kernel and the
# checks below.


def padded_length(length, multiple):
    return (length + multiple - 1) // multiple * multiple


def check_pad(x: torch.Tensor, multiple: int) -> None:
    check_1d(x, "x")
    if multiple < 1:
        raise ValueError(f"multiple must be at least 1, got {multiple}")


def numpy_pad(x: torch.Tensor, multiple: int) -> torch.Tensor:
    check_pad(x, multiple)
    extra = padded_length(x.shape[0], multiple) - x.shape[0]
    return torch.from_numpy(np.pad(to_numpy(x), (0, extra))).to(x.device)


@torch.library.custom_op("shapes::pad_to_multiple", mutates_args=())
def pad_to_multiple(x: torch.Tensor, multiple: int) -> torch.Tensor:
    return numpy_pad(x, multiple)


@pad_to_multiple.register_fake
def _(x, multiple):
    check_pad(x, multiple)
    return x.new_empty(padded_length(x.shape[0], multiple))


for device in devices:
    for x in [*samples_1d(device), *(torch.randn(n, device=device) for n in (8, 13))]:
        length = x.shape[0]
        torch.library.opcheck(pad_to_multiple, (x, 8))
        expected = torch.nn.functional.pad(x, (0, padded_length(length, 8) - length))
        torch.testing.assert_close(pad_to_multiple(x, 8), expected)
print(f"opcheck passed and pad_to_multiple matches F.pad on {devices}")

try:
    pad_to_multiple(torch.randn(2, 3), 8)
except ValueError as err:
    print(f"{type(err).__name__}: {err}")
else:
    raise AssertionError("expected a 2-D input to be rejected")

# %%
# A fake kernel that specializes
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
#
# Now a second operator with the same real kernel and a fake kernel that looks
# harmless: it turns the length into a Python ``int`` first, perhaps because a
# helper it calls insists on integers. Calling ``int()`` on a ``SymInt`` asks
# the compiler for a concrete value. The compiler answers with the size of the
# example input, and records a *guard*: the graph is valid only while the
# input has exactly that size.


@torch.library.custom_op("shapes::pad_to_multiple_specialized", mutates_args=())
def pad_to_multiple_specialized(x: torch.Tensor, multiple: int) -> torch.Tensor:
    return numpy_pad(x, multiple)


@pad_to_multiple_specialized.register_fake
def _(x, multiple):
    check_pad(x, multiple)
    length = int(x.shape[0])  # the mistake: a SymInt becomes a fixed number
    return x.new_empty(padded_length(length, multiple))


# %%
# Both fake kernels give the right shape for every input, so ``opcheck``,
# which compares fake and real outputs one example at a time, passes for the
# specialized one too:

for device in devices:
    for length in [5, 13]:
        x = torch.randn(length, device=device)
        torch.library.opcheck(pad_to_multiple_specialized, (x, 8))
print("opcheck passed for shapes::pad_to_multiple_specialized as well")

# %%
# The difference shows up in the compiler's cache. We compile a function around
# each operator with ``dynamic=True`` and feed both the same sequence of input
# lengths, recording the number of compilations after every call.

lengths = [3, 5, 9, 12, 17, 20]
good_counter, bad_counter = CountingBackend(), CountingBackend()
padded_good = torch.compile(
    lambda x: pad_to_multiple(x, 8) + 1, backend=good_counter, dynamic=True
)
padded_bad = torch.compile(
    lambda x: pad_to_multiple_specialized(x, 8) + 1, backend=bad_counter, dynamic=True
)
good_history, bad_history = [], []
for length in lengths:
    x = torch.randn(length)
    expected = pad_to_multiple(x, 8) + 1
    torch.testing.assert_close(padded_good(x), expected)
    torch.testing.assert_close(padded_bad(x), expected)
    good_history.append(good_counter.compilations)
    bad_history.append(bad_counter.compilations)

print(f"input lengths:                {lengths}")
print(f"compilations, symbolic fake:  {good_history}")
print(f"compilations, int() fake:     {bad_history}")
assert good_history == [1] * len(lengths)
assert bad_history == list(range(1, len(lengths) + 1))

# %%
# Both compiled functions return correct results, so nothing looks wrong from
# the outside. But the symbolic fake kernel compiled once and reused that
# graph for every length, while the one that called ``int()`` compiled anew for
# every length it had not seen, paying the tracing cost each time.

fig, ax = plt.subplots(figsize=(6, 3.5), layout="constrained")
distinct_sizes = range(1, len(lengths) + 1)
ax.plot(distinct_sizes, bad_history, "o-", label="fake kernel calls int()")
ax.plot(distinct_sizes, good_history, "s-", label="fake kernel stays symbolic")
ax.set_xlabel("distinct input lengths seen")
ax.set_ylabel("compilations")
ax.set_title("Compilations under torch.compile(dynamic=True)")
ax.set_ylim(0, len(lengths) + 0.5)
ax.legend()
plt.show()

# %%
# Finding the guard that caused it
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
#
# Every release this page supports can log each recompilation together with
# the guards that failed: set the environment variable
# ``TORCH_LOGS="recompiles"``, or call ``torch._logging.set_logs(recompiles=True)``
# from Python (a documented function in a private-looking module). The log
# goes to standard error; here a ``logging.Handler`` also collects it, so that
# the page can print the guard lines. A fresh compiled function, three
# lengths:


class RecompileLog(logging.Handler):
    """Keep the lines of Dynamo's "recompiles" log records."""

    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        if record.name.endswith("__recompiles"):
            self.lines += [line.strip() for line in record.getMessage().splitlines()]


recompile_log = RecompileLog()
dynamo_logger = logging.getLogger("torch._dynamo")
torch._logging.set_logs(recompiles=True)
dynamo_logger.addHandler(recompile_log)
try:
    fresh_bad = torch.compile(
        lambda x: pad_to_multiple_specialized(x, 8) + 1,
        backend=CountingBackend(),
        dynamic=True,
    )
    for length in lengths[:3]:
        fresh_bad(torch.randn(length))
finally:
    dynamo_logger.removeHandler(recompile_log)
    torch._logging.set_logs()
logged_guards = [line for line in recompile_log.lines if "size mismatch" in line]
print("\n".join(logged_guards))
assert len(logged_guards) == 1 + 2  # one failed guard, then two
assert all(f"expected {n}," in "".join(logged_guards) for n in lengths[:2])

# %%
# ``torch.compiler.set_stance("fail_on_recompile")`` (PyTorch 2.6 and later)
# goes further and turns any recompilation into an error, which is how a test
# can make sure a compiled function stays compiled. From PyTorch 2.10 the
# error message lists the failed guards as well; older releases only say that
# a recompilation happened, and the log above is the way to learn why. The
# symbolic version runs under the same stance without complaint.

if hasattr(torch.compiler, "set_stance"):
    new_input = torch.randn(25)
    with torch.compiler.set_stance("fail_on_recompile"):
        torch.testing.assert_close(
            padded_good(new_input), pad_to_multiple(new_input, 8) + 1
        )
        try:
            padded_bad(new_input)
        except RuntimeError as err:
            lines = str(err).splitlines()
            print(f"{type(err).__name__}: {lines[0].split(' filename:')[0]}")
            mismatches = [line.strip() for line in lines if "size mismatch" in line]
            print(f"the message lists the failed guards: {bool(mismatches)}")
            for line in mismatches:
                print(line)
            assert bool(mismatches) == (RELEASE >= (2, 10))
            if mismatches:
                assert len(mismatches) == bad_counter.compilations
                expected_lengths = [
                    int(m.split("expected ")[1].split(",")[0]) for m in mismatches
                ]
                assert sorted(expected_lengths) == sorted(lengths)
        else:
            raise AssertionError("expected the specialized fake kernel to recompile")
    assert good_counter.compilations == 1
else:
    print("torch.compiler.set_stance needs PyTorch 2.6 or later; skipped")

# %%
# Each failed guard says that a cached graph expected one particular length
# for ``x``: the length of the example it was traced with, fixed by
# ``int()``. In a fake kernel, keep sizes as they come
# and do arithmetic on them with ``+``, ``-``, ``*``, ``//`` and ``%``. An
# output size that cannot be written as arithmetic on the input sizes depends
# on the data, which is the subject of the next section.
#
# Output sizes that depend on the data
# ------------------------------------
#
# Some operators cannot know their output size without looking at the
# values: the positions of nonzero entries, the rows that pass a filter, the
# distinct values of a tensor. Our example is ``np.unique``, which returns
# the sorted distinct values. A fake tensor has no values, so the fake kernel
# cannot compute the size at all.
#
# A tempting shortcut is to return the largest output the operator could
# produce, the size of the input:


def check_unique(x: torch.Tensor) -> None:
    check_1d(x, "x")
    if x.dtype.is_complex:
        raise ValueError("complex values have no order to sort them by")


def numpy_unique(x: torch.Tensor) -> torch.Tensor:
    check_unique(x)
    return torch.from_numpy(np.unique(to_numpy(x))).to(x.device)


@torch.library.custom_op("shapes::unique_upper_bound", mutates_args=())
def unique_upper_bound(x: torch.Tensor) -> torch.Tensor:
    return numpy_unique(x)


@unique_upper_bound.register_fake
def _(x):
    check_unique(x)
    return torch.empty_like(x)  # wrong: the real output is usually shorter


# %%
# ``opcheck`` runs the fake kernel and the real kernel on the same example and
# compares the results' metadata. On an input with repeated values the shapes
# differ, and the ``test_faketensor`` test fails. ``raise_exception=False``
# makes ``opcheck`` return each test's verdict instead of raising at the first
# failure:

with_repeats = torch.tensor([3.0, 1.0, 3.0, 2.0, 1.0])
verdicts = torch.library.opcheck(
    unique_upper_bound, (with_repeats,), raise_exception=False
)
for test, outcome in verdicts.items():
    print(
        f"{test}: {'SUCCESS' if outcome == 'SUCCESS' else str(outcome).splitlines()[0]}"
    )
assert verdicts["test_faketensor"] != "SUCCESS"

# %%
# A fake kernel for a data-dependent size
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
#
# The right answer is a fresh symbol that stands for "some size that is only
# known once the operator has run". Inside a fake kernel,
# ``torch.library.get_ctx()`` returns a context object whose
# ``new_dynamic_size()`` method creates one.

dynamic_sizes_seen = []
context_types = []


@torch.library.custom_op("shapes::unique", mutates_args=())
def unique(x: torch.Tensor) -> torch.Tensor:
    return numpy_unique(x)


@unique.register_fake
def _(x):
    check_unique(x)
    ctx = torch.library.get_ctx()
    count = ctx.new_dynamic_size()
    dynamic_sizes_seen.append(count)  # recorded for printing below
    context_types.append(type(ctx))
    return x.new_empty(count)


examples = [
    with_repeats,
    torch.tensor([]),
    torch.full((4,), 2.0),
    torch.arange(6.0),
    torch.tensor([5.0, 0.0, 1.0, 0.0, 5.0, 0.0, 2.0, 0.0])[::2],  # non-contiguous
]
for device in devices:
    for x in examples:
        x = x.to(device)
        results = torch.library.opcheck(unique, (x,))
        assert results["test_aot_dispatch_dynamic"] == "SUCCESS"
        torch.testing.assert_close(unique(x), torch.unique(x))
print(f"opcheck passed and unique matches torch.unique on {devices}")

# %%
# Older code may call ``create_unbacked_symint`` instead. It is the deprecated
# name of the same idea, with one difference worth knowing: it assumes the
# size is at least 2, where ``new_dynamic_size`` assumes only that it is at
# least 0. A fake kernel that promises a minimum of 2 lets the compiler
# simplify code for sizes 0 and 1 that can then occur
# (:ref:`edge-unbacked-minimum-two`). The two signatures:

for name in ("new_dynamic_size", "create_unbacked_symint"):
    print(f"{name}{inspect.signature(getattr(context_types[0], name))}")
defaults = {
    name: inspect.signature(getattr(context_types[0], name)).parameters["min"].default
    for name in ("new_dynamic_size", "create_unbacked_symint")
}
assert defaults == {"new_dynamic_size": 0, "create_unbacked_symint": 2}

# %%
# The fake kernel passed on inputs with and without repeats, on an empty one
# and on a non-contiguous one. Among its tests ``opcheck`` traces the operator
# with symbolic input sizes (``test_aot_dispatch_dynamic``), so the unknown
# output size has already been through the compiler's machinery once.
#
# Now the operator inside a function that ``torch.compile`` must capture as a
# single graph (``fullgraph=True``), with code after it that uses the
# result. Here the release matters. Up to PyTorch 2.9, Dynamo leaves any
# operator whose output size depends on the data out of its graph unless the
# configuration flag ``capture_dynamic_output_shape_ops`` is set, and with
# ``fullgraph=True`` leaving it out is an error. From 2.10 it captures a custom
# operator whose fake kernel declares the size, as ours does, without the
# flag. The cell tries without the flag and shows what this release does.


def normalized_unique(x):
    values = unique(x)
    return (values - values.min()) / (values.max() - values.min())


try:
    torch.compile(
        normalized_unique, backend=CountingBackend(), fullgraph=True, dynamic=True
    )(torch.tensor([1.0, 3.0, 3.0]))
except torch._dynamo.exc.Unsupported as err:
    print(f"without the flag: {type(err).__name__}: {str(err).splitlines()[0]}")
    NEEDS_FLAG = True
else:
    print("without the flag: captured in one graph")
    NEEDS_FLAG = False
assert NEEDS_FLAG == (RELEASE < (2, 10))


def data_dependent_outputs():
    """Where this release needs it, let Dynamo capture data-dependent sizes."""
    if not NEEDS_FLAG:
        return contextlib.nullcontext()
    return torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True)


# %%
# ``torch._dynamo.config`` is a private module, but the flag is the one the
# error message names, and ``config.patch`` sets it only inside a ``with``
# block, so the rest of the program is unaffected. From here on, every call
# of a compiled function that contains ``unique`` runs inside
# ``data_dependent_outputs()``, which sets the flag only on releases that need
# it. The inputs differ in length and in how many distinct values they hold,
# so the output length varies between calls.

counter = CountingBackend()
compiled_normalized_unique = torch.compile(
    normalized_unique, backend=counter, fullgraph=True, dynamic=True
)
dynamic_sizes_seen.clear()
output_lengths = []
for x in [
    torch.tensor([4.0, 1.0, 4.0, 2.0, 1.0]),
    torch.tensor([0.5, -2.0]),
    torch.arange(9.0).flip(0),
    torch.tensor([7.0, 7.0, 3.0, 7.0, 3.0, 5.0]),
]:
    with data_dependent_outputs():
        result = compiled_normalized_unique(x)
    torch.testing.assert_close(result, normalized_unique(x))
    output_lengths.append(result.shape[0])

print(f"output lengths: {output_lengths}; compilations: {counter.compilations}")
print(f"size symbols created while tracing: {[str(s) for s in dynamic_sizes_seen]}")
assert len(set(output_lengths)) > 1
assert counter.compilations == 1
assert all(isinstance(s, torch.SymInt) for s in dynamic_sizes_seen)
assert not any(str(s).startswith("s") for s in dynamic_sizes_seen)

# %%
# One graph served every call, although the output length varied, and every
# result matched eager mode. The printed symbol names differ from the
# ``s``-prefixed names of the input sizes earlier: PyTorch calls these
# *unbacked* sizes, because no example value backs them while tracing.
# Code after the operator can compute with such a size freely, as the
# normalization above does.
#
# Branching on a data-dependent size
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
#
# What code after the operator cannot do is decide a Python ``if`` with an
# unbacked size: the compiler has no value to pick the branch with. Here is a
# function that wants the three largest distinct values and refuses inputs
# that have fewer:


def three_largest_distinct(x):
    values = unique(x)
    if values.shape[0] < 3:
        raise ValueError(f"need 3 distinct values, got {values.shape[0]}")
    return values[-3:]


compiled_three_largest_distinct = torch.compile(
    three_largest_distinct, backend=CountingBackend(), fullgraph=True, dynamic=True
)
try:
    with data_dependent_outputs():
        compiled_three_largest_distinct(torch.arange(5.0))
except torch._dynamo.exc.UserError as err:
    print(f"{type(err).__name__}: {str(err).splitlines()[0]}")
    assert "torch._check" in str(err)
else:
    raise AssertionError("expected the branch on an unbacked size to fail")

# %%
# The error class, ``torch._dynamo.exc.UserError``, is private, but it is the
# one Dynamo raises for this mistake, so we catch it by name. The message
# suggests the fix: ``torch._check(condition, message)`` states the condition
# as a fact. The compiler assumes it while tracing and inserts a check that
# runs with the graph, so bad input still fails with a ``RuntimeError``, as in
# eager mode.
#
# The optional second argument is a function that returns the error message.
# Dynamo traces such a message function from PyTorch 2.10; older releases
# refuse it (``Unsupported``), so there the check has to go without a message.
# The cell tries the message first and shows what this release does.


def three_largest_distinct_checked(x):
    values = unique(x)
    torch._check(values.shape[0] >= 3, lambda: "need 3 distinct values")
    return values[-3:]


try:
    with data_dependent_outputs():
        torch.compile(
            three_largest_distinct_checked,
            backend=CountingBackend(),
            fullgraph=True,
            dynamic=True,
        )(torch.arange(5.0))
except torch._dynamo.exc.Unsupported as err:
    print(f"with a message: {type(err).__name__}: {str(err).splitlines()[0]}")
    CHECK_TAKES_MESSAGE = False

    def three_largest_distinct_checked(x):  # for PyTorch 2.9 and older
        values = unique(x)
        torch._check(values.shape[0] >= 3)
        return values[-3:]

else:
    print("with a message: compiles")
    CHECK_TAKES_MESSAGE = True
assert CHECK_TAKES_MESSAGE == (RELEASE >= (2, 10))

# %%
# Now the checked function, compiled once, on good input and on input with
# too few distinct values. From PyTorch 2.13 the compiled check raises the
# same message as eager mode; older releases raise a message of their own,
# which quotes the condition on the unbacked size (``u0 >= 3``, say).

counter = CountingBackend()
compiled_three_largest = torch.compile(
    three_largest_distinct_checked, backend=counter, fullgraph=True, dynamic=True
)
x = torch.tensor([5.0, 1.0, 5.0, 9.0, 3.0])
with data_dependent_outputs():
    largest = compiled_three_largest(x)
torch.testing.assert_close(largest, torch.tensor([3.0, 5.0, 9.0]))
print(f"compiled with torch._check: {largest}")

too_few = torch.tensor([2.0, 2.0, 8.0])
messages = []
for label, fn in [
    ("eager", three_largest_distinct_checked),
    ("compiled", compiled_three_largest),
]:
    try:
        with data_dependent_outputs():
            fn(too_few)
    except RuntimeError as err:
        print(f"{label:>8}: {type(err).__name__}: {str(err).splitlines()[0]}")
        messages.append(str(err).splitlines()[0])
    else:
        raise AssertionError(f"expected {label} to reject two distinct values")
assert (messages[0] == "need 3 distinct values") == CHECK_TAKES_MESSAGE
assert (messages[1] == messages[0]) == (RELEASE >= (2, 13))
assert counter.compilations == 1

# %%
# Conclusion
# ----------
#
# A fake kernel runs with whatever the compiler hands it: ``int`` sizes for
# static shapes, ``SymInt`` sizes for dynamic ones, and ordinary arithmetic
# works for both. Calling ``int()`` on a size makes the function compile once
# per input size, with every result still right; a counting backend, the
# ``recompiles`` log or ``set_stance("fail_on_recompile")`` shows it. When the
# output size depends on the data, ask ``get_ctx().new_dynamic_size()`` for a
# new symbol instead of guessing, and state with ``torch._check`` what code
# after the operator branches on; before PyTorch 2.10, such an operator
# enters a full graph only with ``capture_dynamic_output_shape_ops``.
#
# Previous: :ref:`sphx_glr_tutorials_custom_op_registrations.py`. Next,
# :ref:`sphx_glr_tutorials_custom_ops_in_export.py` shows what fake kernels do
# when a model is exported with ``torch.export``, and
# :ref:`sphx_glr_tutorials_custom_op_troubleshooting.py` collects the errors
# you are likely to meet along the way.
