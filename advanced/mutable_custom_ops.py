"""
Functional and Mutable Operators
================================

After this page you will be able to choose the shape of a custom operator
that produces tensors: one that returns new tensors, one that writes into a
buffer you pass in, or, from PyTorch 2.13, one that follows PyTorch's own
in-place and ``out=`` conventions, and to see what the compiler does with each.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * What ``mutates_args`` promises, and how a false promise produces wrong
         results under ``torch.compile``
       * Why an operator may never return one of its inputs, or a view of one
       * How ``torch.compile`` turns a call that mutates into a functional one
       * How ``torch.Tag.inplace`` and ``torch.Tag.out`` make PyTorch-style
         ``foo_`` and ``foo(..., out=...)`` operators
       * How to split an operator with an optional ``out`` argument in two

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later (2.13 or later for the tagged in-place and
         ``out=`` operators)
       * NumPy and Matplotlib
       * :ref:`sphx_glr_tutorials_python_custom_ops.py`

.. admonition:: Checklist
   :class: checklist

   #. Prefer a functional operator: ``mutates_args=()`` and results that are
      new tensors.
   #. If the operator writes into an argument, list it in ``mutates_args`` and
      return nothing; PyTorch then writes the fake kernel for you.
   #. Never return an input or a view of one (return a ``clone()``) unless a
      tag says the result is that input.
   #. From PyTorch 2.13, tag ``foo_(x)`` operators with ``torch.Tag.inplace``
      and ``foo.out(..., *, out)`` overloads with ``torch.Tag.out``.
   #. Split a "maybe-out" function into a functional operator, an ``out=``
      overload and a Python function that picks one.
   #. Run ``opcheck`` on every branch of the kernel, with empty,
      non-contiguous and permuted inputs and buffers.

An operator's *schema* records which arguments it writes into and which
results share memory with an argument. ``torch.compile``, autograd and
``torch.export`` never look inside a ``custom_op``'s kernel, so on these
questions the schema is their only source: a schema that lies makes them do
the wrong thing, usually without an error.
"""

# %%
# Setting up
# ----------
#
# The page runs on the CPU, and also on a CUDA device when it finds one.
# ``TAGGED_OPS`` says whether this PyTorch has the ``inplace`` and ``out``
# tags (new in 2.13); the sections that need them say so when they skip.

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import math
import re
import textwrap

import matplotlib.pyplot as plt
import numpy as np
from torch import Tensor
from torch._dynamo.backends.common import aot_autograd

TAGGED_OPS = hasattr(torch.Tag, "inplace") and hasattr(torch.Tag, "out")
# For behaviour that changed between releases without a feature to test for.
RELEASE = tuple(int(part) for part in torch.__version__.split(".")[:2])

torch.manual_seed(0)
np.random.seed(0)
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")
print(f"tagged in-place and out= operators available: {TAGGED_OPS}")

# %%
# ``aot_autograd``, from a private module meant for backend authors, lets us
# print the graph after functionalization. ``report`` prints an exception's
# class and first sentence; ``skipped`` notes each part this release cannot
# run.


def report(error: BaseException, indent: str = "", label: str = "") -> None:
    """Print an exception's class and the first sentence of its message."""
    line = str(error).splitlines()[0]
    line = re.sub(r" \(with implementation in <module .*?>\)", "", line)
    sentence = re.split(r"(?<!\.)\. (?=[A-Z])", line)[0].rstrip(".") + "."
    text = f"{indent}{label}{type(error).__name__}: {sentence}"
    print(textwrap.fill(text, width=88, subsequent_indent=indent + "  "))


skipped_parts = []


def skipped(part: str) -> None:
    skipped_parts.append(part)
    print(f"Skipped on PyTorch {torch.__version__}: {part} (needs the 2.13 tags).")


# %%
# The operation: soft-capping
# ---------------------------
#
# Language models often *soft-cap* their logits: ``cap * tanh(x / cap)``
# leaves small values almost unchanged and squeezes large ones into
# ``(-cap, cap)``; an infinite ``cap`` means no capping. The kernels compute it
# with NumPy, copying a CUDA input to the CPU and back.
#
# NumPy stands in for the library you wrap. Dynamo could even trace this much
# NumPy (checked below), but a custom operator's kernel is never traced,
# whatever it contains: the compiler learns only from the schema. Every
# operator first checks its arguments and raises a ``ValueError``.


def check_softcap(x: Tensor, cap: float) -> None:
    if x.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"x must be float32 or float64, got {x.dtype}")
    if not cap > 0:
        raise ValueError(f"cap must be positive (inf means no capping), got {cap}")


def check_buffer(x: Tensor, out: Tensor) -> None:
    if (out.shape, out.dtype, out.device) != (x.shape, x.dtype, x.device):
        raise ValueError(
            f"out ({tuple(out.shape)}, {out.dtype}, {out.device}) must match "
            f"x ({tuple(x.shape)}, {x.dtype}, {x.device})"
        )


def softcap_with_numpy(x: Tensor, cap: float) -> Tensor:
    """cap * tanh(x / cap) computed by NumPy, as a new tensor on x's device."""
    if math.isinf(cap):
        return x.clone()
    capped = cap * np.tanh(x.detach().cpu().numpy() / cap)
    return torch.from_numpy(capped).to(device=x.device, dtype=x.dtype)


def softcap_reference(x: Tensor, cap: float) -> Tensor:
    return x.clone() if math.isinf(cap) else cap * torch.tanh(x / cap)


numpy_trace = torch._dynamo.explain(softcap_with_numpy)(torch.randn(4, 8), 30.0)
print(
    f"graph breaks when Dynamo traces the NumPy code: {numpy_trace.graph_break_count}"
)
assert numpy_trace.graph_break_count == 0

# %%
# The operators are tested on four layouts: row-major, empty, every other
# column (not contiguous) and transposed (dense, not row-major).
# ``buffer_like`` makes a buffer with exactly its input's layout, gaps included.


def sample_inputs(device):
    """x in four memory layouts, scaled so that capping matters."""
    return {
        "row-major": 50 * torch.randn(4, 8, device=device),
        "empty": torch.randn(0, 8, device=device),
        "every other column": (50 * torch.randn(4, 16, device=device))[:, ::2],
        "transposed": (50 * torch.randn(8, 4, device=device)).t(),
    }


def buffer_like(x: Tensor) -> Tensor:
    return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)


layouts = sample_inputs("cpu")
assert not layouts["every other column"].is_contiguous()
assert not layouts["transposed"].is_contiguous()
assert buffer_like(layouts["every other column"]).stride() == (16, 2)


# %%
# Functional operators return new tensors
# ---------------------------------------
#
# The simplest kind of operator is *functional*: it writes into none of its
# inputs (``mutates_args=()``) and returns tensors it has just created, a rule
# every operator without a tag must follow, as we will see.


@torch.library.custom_op("mutable_ops::softcap", mutates_args=())
def softcap(x: Tensor, cap: float) -> Tensor:
    check_softcap(x, cap)
    return softcap_with_numpy(x, cap)


@softcap.register_fake
def _(x, cap):
    check_softcap(x, cap)
    return torch.empty_like(x)


softcap_schema = str(torch.ops.mutable_ops.softcap.default._schema)
print(softcap_schema)
assert softcap_schema.endswith("(Tensor x, float cap) -> Tensor")
for device in devices:
    for x in sample_inputs(device).values():
        for cap in (1.0, 30.0, math.inf):
            torch.testing.assert_close(softcap(x, cap), softcap_reference(x, cap))
            torch.library.opcheck(softcap, (x, cap))
print(f"softcap matches cap * tanh(x / cap) and passes opcheck on {devices}")

# %%
# The schema carries no alias annotations: nothing is written, and the result
# is new. No sample requires grad: these operators have no backward formula
# (see :ref:`sphx_glr_tutorials_custom_op_registrations.py`).
#
# Mutable operators write into a buffer
# -------------------------------------
#
# Sometimes the caller owns the memory, such as a logits buffer that a
# decoding loop fills at every step. A mutable operator writes into it and
# returns nothing; every argument it writes must be listed in ``mutates_args``.


written_addresses = []  # where softcap_into wrote, for a section below


@torch.library.custom_op("mutable_ops::softcap_into", mutates_args={"out"})
def softcap_into(x: Tensor, cap: float, out: Tensor) -> None:
    check_softcap(x, cap)
    check_buffer(x, out)
    written_addresses.append(out.data_ptr())
    out.copy_(softcap_with_numpy(x, cap))


softcap_into_schema = str(torch.ops.mutable_ops.softcap_into.default._schema)
print(softcap_into_schema)
assert "Tensor(a2!) out" in softcap_into_schema
assert softcap_into_schema.endswith("-> ()")

# %%
# ``Tensor(a2!) out`` marks ``out`` as written (the ``!``), and ``()`` says
# nothing is returned, so PyTorch supplies the (empty) fake kernel itself. The
# same buffer serves every call; its address never changes.

for device in devices:
    buffer = torch.empty(4, 8, device=device)
    address = buffer.data_ptr()
    for _ in range(3):
        x = 50 * torch.randn(4, 8, device=device)
        softcap_into(x, 30.0, buffer)
        torch.testing.assert_close(buffer, softcap_reference(x, 30.0))
        assert buffer.data_ptr() == address
    for x in sample_inputs(device).values():
        torch.library.opcheck(softcap_into, (x, 30.0, buffer_like(x)))
print(f"softcap_into filled one buffer in place and passes opcheck on {devices}")

# %%
# What breaks when ``mutates_args`` lies
# --------------------------------------
#
# Here is the same operator with the declaration left out. In eager mode
# nobody can tell the difference. Its schema now says it writes nothing, so it
# needs a fake kernel of its own, which returns ``None``.

softcap_calls = {"undeclared": 0}


@torch.library.custom_op("mutable_ops::softcap_into_undeclared", mutates_args=())
def softcap_into_undeclared(x: Tensor, cap: float, out: Tensor) -> None:
    softcap_calls["undeclared"] += 1
    check_softcap(x, cap)
    check_buffer(x, out)
    out.copy_(softcap_with_numpy(x, cap))


@softcap_into_undeclared.register_fake
def _(x, cap, out):
    return None


x = 50 * torch.randn(4, 8)
buffer = torch.empty_like(x)
softcap_into_undeclared(x, 30.0, buffer)
torch.testing.assert_close(buffer, softcap_reference(x, 30.0))
print("eager mode: the undeclared mutation gives the right answer")

# %%
# ``opcheck`` compares every argument before and after the call.
# With ``raise_exception=False`` it returns each test's verdict;
# ``test_schema`` notices that ``out`` changed:

results = torch.library.opcheck(
    softcap_into_undeclared, (x, 30.0, torch.empty_like(x)), raise_exception=False
)
for test, outcome in results.items():
    if outcome == "SUCCESS":
        print(f"{test}: SUCCESS")
    else:
        report(outcome, label=f"{test}: ")
assert "not defined as mutable but was mutated" in str(results["test_schema"])

# %%
# A failed test is the good outcome. Under ``torch.compile`` the lie gives a
# wrong answer with no error. The function below lets the operator fill a
# buffer of zeros and returns it. To the compiler, an operator that returns
# and writes nothing has no effect, so it removes the call.
# (``backend="aot_eager"`` captures and functionalizes the graph without
# generating code: fast, and enough to show the problem.)


def capped_into_zeros(op):
    def run(x):
        buffer = torch.zeros_like(x)
        op(x, 30.0, buffer)
        return buffer

    return run


compiled_undeclared = torch.compile(
    capped_into_zeros(softcap_into_undeclared), backend="aot_eager", fullgraph=True
)
softcap_calls["undeclared"] = 0
result = compiled_undeclared(x)
print(f"compiled, undeclared: kernel calls {softcap_calls['undeclared']}")
print(f"  first row of the result: {result[0, :4]}")
assert softcap_calls["undeclared"] == 0
assert torch.equal(result, torch.zeros_like(x))

compiled_declared = torch.compile(
    capped_into_zeros(softcap_into), backend="aot_eager", fullgraph=True
)
declared_result = compiled_declared(x)
torch.testing.assert_close(declared_result, softcap_reference(x, 30.0))
print("compiled, declared: the result matches the reference")

# %%
# With the undeclared mutation the compiled function never called the kernel
# and returned zeros; with ``mutates_args={"out"}`` it returns the capped
# values. The figure shows the three buffers returned.

eager_result = capped_into_zeros(softcap_into_undeclared)(x)
panels = {
    "eager\nmutates_args=()": eager_result,
    "compiled\nmutates_args=()": result,
    'compiled\nmutates_args={"out"}': declared_result,
}
# sphinx_gallery_start_ignore
fig, axes = plt.subplots(1, 3, figsize=(7.5, 2.4), layout="constrained")
for ax, (title, values) in zip(axes, panels.items(), strict=True):
    image = ax.imshow(values.numpy(), cmap="RdBu_r", vmin=-30, vmax=30)
    ax.set_title(title, fontsize=10)
    if not values.any():
        ax.text(3.5, 1.5, "all zeros:\nthe call was\ndropped", ha="center", va="center")
    ax.set_xticks([])
    ax.set_yticks([])
fig.colorbar(image, ax=axes, label="returned buffer", shrink=0.9)
fig.suptitle("The same function, returning a buffer the operator fills")
plt.show()
# sphinx_gallery_end_ignore
torch.testing.assert_close(eager_result, declared_result)

# %%
# Never return an input, or a view of one
# ---------------------------------------
#
# Without a tag (below), a custom operator's results must be new tensors that
# share memory with no input and no other result: the compiler and autograd
# treat them as independent. The rule is easy to break by accident, here with
# a shortcut when there is nothing to cap:


@torch.library.custom_op("mutable_ops::softcap_shortcut", mutates_args=())
def softcap_shortcut(x: Tensor, cap: float) -> Tensor:
    check_softcap(x, cap)
    if math.isinf(cap):
        return x  # nothing to do... but this returns the input itself
    return softcap_with_numpy(x, cap)


x = 50 * torch.randn(4, 8)
torch.testing.assert_close(softcap_shortcut(x, 30.0), softcap_reference(x, 30.0))
try:
    softcap_shortcut(x, math.inf)
except RuntimeError as error:
    report(error)
else:
    raise AssertionError("expected returning the input to fail")

# %%
# PyTorch checks the rule each time the kernel returns, so only the branch
# that broke it raised: give ``opcheck`` examples that reach every branch. A
# view counts too, including ``detach()``, which shares the input's memory:


@torch.library.custom_op("mutable_ops::softcap_detached", mutates_args=())
def softcap_detached(x: Tensor, cap: float) -> Tensor:
    check_softcap(x, cap)
    if math.isinf(cap):
        return x.detach()  # a view of x: same memory
    return softcap_with_numpy(x, cap)


try:
    softcap_detached(x, math.inf)
except RuntimeError as error:
    report(error)
else:
    raise AssertionError("expected returning a view of the input to fail")

# %%
# The fix is the ``x.clone()`` that ``softcap`` uses. A mutable operator may
# not return the buffer it has just written either:


@torch.library.custom_op("mutable_ops::softcap_into_returning", mutates_args={"out"})
def softcap_into_returning(x: Tensor, cap: float, out: Tensor) -> Tensor:
    check_softcap(x, cap)
    check_buffer(x, out)
    return out.copy_(softcap_with_numpy(x, cap))


try:
    softcap_into_returning(x, 30.0, torch.empty_like(x))
except RuntimeError as error:
    report(error)
else:
    raise AssertionError("expected returning the mutated buffer to fail")

# %%
# What ``torch.compile`` does with a mutable operator
# ---------------------------------------------------
#
# Optimizing is far simpler when nothing is mutated, so ``torch.compile``
# first *functionalizes* the program: a call to a mutable custom operator
# becomes a call to ``auto_functionalized`` (``_v2`` in recent releases), a
# wrapper that returns the new value of every argument the operator writes.
# The backend below records that graph and runs it unchanged, like
# ``aot_eager``.

captured_graphs = []


def keep_graph(graph_module, example_inputs):
    captured_graphs.append(graph_module)
    return graph_module


graph_printing_backend = aot_autograd(fw_compiler=keep_graph)


def total_after_capping(x, buffer):
    softcap_into(x, 30.0, buffer)
    return buffer.sum()


x, buffer = 50 * torch.randn(4, 8), torch.zeros(4, 8)
compiled = torch.compile(
    total_after_capping, backend=graph_printing_backend, fullgraph=True
)
written_addresses.clear()
total = compiled(x, buffer)
recorded_run_addresses = list(written_addresses)
graph = captured_graphs[-1]
print(graph.code.strip())

# %%
# The graph calls the wrapper, not ``softcap_into``, reads the new buffer
# value with ``getitem``, and returns it as an extra output, to be copied into
# our ``buffer`` afterwards. The checks confirm each step:


def called_functions(graph_module):
    return [
        node.target for node in graph_module.graph.nodes if node.op == "call_function"
    ]


def hop_name(target):
    return getattr(target, "_name", getattr(target, "__name__", str(target)))


names = [hop_name(target) for target in called_functions(graph)]
print(f"functions called in the graph: {names}")
assert names[0].startswith("auto_functionalized")
assert names[1:] == ["getitem", "aten::sum"]
assert torch.ops.mutable_ops.softcap_into.default not in called_functions(graph)
(graph_outputs,) = [node.args[0] for node in graph.graph.nodes if node.op == "output"]
assert len(graph_outputs) == 2
torch.testing.assert_close(buffer, softcap_reference(x, 30.0))
torch.testing.assert_close(total, buffer.sum())
assert recorded_run_addresses != [buffer.data_ptr()]  # the kernel filled a copy

# %%
# So with this backend the kernel fills a temporary, copied into ``buffer``
# after the graph. Inductor, the default backend, *reinplaces*: where nothing
# else needs the buffer's old contents, it turns the functional call back into
# the mutable one, and the kernel writes straight into the caller's buffer, as
# the address it receives shows. (Compiling with Inductor takes a few seconds.)


def cap_into(x, buffer):
    softcap_into(x, 30.0, buffer)


x, buffer = 50 * torch.randn(4, 8), torch.zeros(4, 8)
written_addresses.clear()
torch.compile(cap_into, fullgraph=True)(x, buffer)
in_place = written_addresses == [buffer.data_ptr()]
print(f"Inductor: the kernel wrote straight into our buffer: {in_place}")
assert in_place
torch.testing.assert_close(buffer, softcap_reference(x, 30.0))

# %%
# PyTorch-style in-place and ``out=`` operators
# ---------------------------------------------
#
# PyTorch's own operators follow two more conventions. An *in-place* operator
# such as ``x.mul_(2)`` writes into its first argument and returns it. An
# ``out=`` operator such as ``torch.mul(x, 2, out=buffer)`` writes into
# keyword-only buffers, never reads them, and returns them. Both return a
# tensor they wrote into, which we just saw refused.
#
# From PyTorch 2.13, ``custom_op`` accepts ``tags=torch.Tag.inplace`` or
# ``torch.Tag.out``. A tag changes four things:
#
# * the schema says the result is the mutated argument, and the kernel must
#   return exactly that tensor;
# * the fake kernel is generated for you;
# * ``torch.compile`` knows that an ``out=`` buffer is write-only;
# * an ``out=`` operator refuses autograd, as built-in ones do.
#
# The in-place ``softcap_`` must list exactly its first argument in
# ``mutates_args`` and return a ``Tensor``.

if TAGGED_OPS:

    @torch.library.custom_op(
        "mutable_ops::softcap_", mutates_args={"x"}, tags=torch.Tag.inplace
    )
    def softcap_(x: Tensor, cap: float) -> Tensor:
        check_softcap(x, cap)
        x.copy_(softcap_with_numpy(x, cap))
        return x

    inplace_schema = str(torch.ops.mutable_ops.softcap_.default._schema)
    print(inplace_schema)
    assert inplace_schema.endswith("(Tensor(a0!) x, float cap) -> Tensor(a0!)")
    for device in devices:
        x = 50 * torch.randn(4, 8, device=device)
        expected = softcap_reference(x, 30.0)
        result = softcap_(x, 30.0).mul_(2)  # chaining works like x.mul_(2)
        assert result is x
        torch.testing.assert_close(x, 2 * expected)
        for sample in sample_inputs(device).values():
            torch.library.opcheck(softcap_, (sample, 1.0))
    print(f"softcap_ returns its input, chains, and passes opcheck on {devices}")
else:
    skipped("the in-place operator softcap_")

# %%
# The schema says that ``x`` is written and that the result is ``x``; no
# ``register_fake`` was needed. A kernel that returns a new tensor where the
# tag promises ``x`` is refused at run time:

if TAGGED_OPS:

    @torch.library.custom_op(
        "mutable_ops::softcap_copying_", mutates_args={"x"}, tags=torch.Tag.inplace
    )
    def softcap_copying_(x: Tensor, cap: float) -> Tensor:
        check_softcap(x, cap)
        return softcap_with_numpy(x, cap)  # a new tensor, not x

    try:
        softcap_copying_(torch.randn(4), 30.0)
    except RuntimeError as error:
        report(error)
    else:
        raise AssertionError("expected an in-place op that returns a copy to fail")
else:
    skipped("an in-place kernel that returns a copy")


# %%
# The ``out=`` operator is an *overload* of ``softcap``, named
# ``"mutable_ops::softcap.out"``, the way ``aten.mul.out`` sits next to
# ``aten.mul.Tensor``. The buffer is keyword-only, and the function returns it.

if TAGGED_OPS:
    softcap_out_calls = {"out": 0}

    @torch.library.custom_op(
        "mutable_ops::softcap.out", mutates_args={"out"}, tags=torch.Tag.out
    )
    def softcap_out(x: Tensor, cap: float, *, out: Tensor) -> Tensor:
        softcap_out_calls["out"] += 1
        check_softcap(x, cap)
        check_buffer(x, out)
        out.copy_(softcap_with_numpy(x, cap))
        return out

    print(torch.ops.mutable_ops.softcap.out._schema)
    overloads = torch.ops.mutable_ops.softcap.overloads()
    print(f"overloads of mutable_ops::softcap: {overloads}")
    for device in devices:
        x = 50 * torch.randn(4, 8, device=device)
        buffer = torch.empty_like(x)
        assert softcap_out(x, 30.0, out=buffer) is buffer
        torch.testing.assert_close(buffer, softcap_reference(x, 30.0))
        for sample in sample_inputs(device).values():
            buffer = buffer_like(sample)
            torch.library.opcheck(softcap_out, (sample, 30.0), {"out": buffer})
    print(f"softcap.out returns its buffer and passes opcheck on {devices}")
else:
    skipped("the out= overload softcap.out")


# %%
# Here too, a kernel that returns a new tensor instead of its buffer is
# refused.

if TAGGED_OPS:

    @torch.library.custom_op(
        "mutable_ops::softcap_allocating.out", mutates_args={"out"}, tags=torch.Tag.out
    )
    def softcap_allocating_out(x: Tensor, cap: float, *, out: Tensor) -> Tensor:
        check_softcap(x, cap)
        check_buffer(x, out)
        out.copy_(softcap_with_numpy(x, cap))
        return out.clone()  # a new tensor, not the buffer

    try:
        softcap_allocating_out(torch.randn(4), 30.0, out=torch.empty(4))
    except RuntimeError as error:
        report(error)
    else:
        raise AssertionError("expected an out= op that returns a copy to fail")
else:
    skipped("an out= kernel that returns a copy")


# %%
# Like built-in ``out=`` operators, a tagged one refuses inputs that require
# grad:

if TAGGED_OPS:
    x = torch.randn(4, requires_grad=True)
    try:
        softcap_out(x, 30.0, out=torch.empty(4))
    except RuntimeError as error:
        report(error)
    else:
        raise AssertionError("expected an out= operator to refuse autograd")
else:
    skipped("out= operators refusing autograd")


# %%
# A definition that breaks a tag's signature rules fails at once with a
# ``ValueError``: an in-place operator that returns nothing, an ``out`` buffer
# that is not keyword-only, and an optional one.

if TAGGED_OPS:

    def inplace_returning_none(x: Tensor, cap: float) -> None:
        pass

    def positional_out(x: Tensor, cap: float, out: Tensor) -> Tensor:
        return out

    def optional_out(x: Tensor, cap: float, *, out: Tensor | None = None) -> Tensor:
        return out

    bad_definitions = [
        ("inplace_returning_none_", inplace_returning_none, {"x"}, torch.Tag.inplace),
        ("positional_out", positional_out, {"out"}, torch.Tag.out),
        ("optional_out", optional_out, {"out"}, torch.Tag.out),
    ]
    for name, function, mutated, tag in bad_definitions:
        try:
            torch.library.custom_op(
                f"mutable_ops::{name}", function, mutates_args=mutated, tags=tag
            )
        except ValueError as error:
            print(f"{name}:")
            report(error, indent="  ")
        else:
            raise AssertionError(f"expected the definition of {name} to fail")
else:
    skipped("the signature rules of the tags")


# %%
# How the compiler treats each kind
# ---------------------------------
#
# We compile one small function per mutable operator with the recording
# backend. In each graph, the ``auto_functionalized_v2`` call's
# ``_all_bases`` lists the tensors whose *current contents* the call receives.

if TAGGED_OPS:

    def with_buffer_op(x, buffer):
        softcap_into(x, 30.0, buffer)
        return buffer * 2

    def with_inplace_op(x, buffer):
        softcap_(buffer, 30.0)
        return buffer * 2

    def with_out_op(x, buffer):
        softcap_out(x, 30.0, out=buffer)
        return buffer * 2

    bases_per_kind = {}
    for kind, function, reads_buffer in [
        ("mutable (softcap_into)", with_buffer_op, False),
        ("in-place (softcap_)", with_inplace_op, True),
        ("out= (softcap.out)", with_out_op, False),
    ]:
        x, buffer = 50 * torch.randn(4, 8), 50 * torch.randn(4, 8)
        expected_buffer = softcap_reference(buffer if reads_buffer else x, 30.0)
        compiled = torch.compile(
            function, backend=graph_printing_backend, fullgraph=True
        )
        torch.testing.assert_close(compiled(x, buffer), 2 * expected_buffer)
        torch.testing.assert_close(buffer, expected_buffer)
        (node,) = [
            n
            for n in captured_graphs[-1].graph.nodes
            if hop_name(n.target) == "auto_functionalized_v2"
        ]
        bases_per_kind[kind] = len(node.kwargs["_all_bases"])
        print(f"{kind}: _all_bases has {bases_per_kind[kind]} tensor(s)")
        if "out" in kind:
            recorded = sorted(key for key in node.kwargs if key.startswith("_out"))
            print(f"  the out= call records only {recorded}")

    assert bases_per_kind["mutable (softcap_into)"] == 1
    assert bases_per_kind["in-place (softcap_)"] == 1
    assert bases_per_kind["out= (softcap.out)"] == 0
    assert recorded == ["_out_device", "_out_dtype", "_out_size", "_out_stride"]
else:
    skipped("how the compiler treats each kind")


# %%
# All three computed the right values. They differ in what the compiler must
# preserve. An untagged mutable operator *might* read its buffer, so the
# buffer's contents go into the call and must be kept intact, often by
# copying; the in-place operator reads ``x`` by definition. The ``out=`` call
# records only the buffer's size, strides, dtype and device, so a backend may
# hand it any fresh memory of that shape.
#
# Splitting a "maybe-out" operator
# --------------------------------
#
# Many libraries have functions like ``softcap(x, cap, out=None)``: fill
# ``out`` if given, otherwise allocate. That is two operators in one
# signature. Declared as mutating an optional ``out``, it fails as soon as
# someone passes a buffer, because it then returns an input. Up to PyTorch
# 2.12 it fails without a buffer too, with an ``IndexError`` from inside
# PyTorch (the version-counter kernel looks for the omitted ``out``;
# :ref:`edge-maybe-out-index-error`); the cell shows what this release
# does.


@torch.library.custom_op("mutable_ops::softcap_maybe_out", mutates_args={"out"})
def softcap_maybe_out(x: Tensor, cap: float, out: Tensor | None = None) -> Tensor:
    check_softcap(x, cap)
    if out is None:
        return softcap_with_numpy(x, cap)
    check_buffer(x, out)
    return out.copy_(softcap_with_numpy(x, cap))


x = 50 * torch.randn(4, 8)
try:
    allocated = softcap_maybe_out(x, 30.0)
except IndexError as error:
    report(error, label="without a buffer: ")
    assert RELEASE < (2, 13), "the IndexError was fixed in PyTorch 2.13"
else:
    print("without a buffer: works")
    torch.testing.assert_close(allocated, softcap_reference(x, 30.0))
    assert RELEASE >= (2, 13)
try:
    softcap_maybe_out(x, 30.0, torch.empty_like(x))
except RuntimeError as error:
    report(error, label="with a buffer: ")
else:
    raise AssertionError("expected the maybe-out operator to fail with a buffer")

# %%
# ``torch.Tag.out`` rejects an optional buffer (``optional_out`` above). The
# cure is to split it: ``softcap``, the ``softcap.out`` overload, and a plain
# Python function that picks one. Dynamo traces through the function and
# resolves the ``if``, so the graph holds only the two operators.

if TAGGED_OPS:

    def softcap_with_optional_out(x: Tensor, cap: float, *, out=None) -> Tensor:
        """Public entry point: allocate a result, or fill ``out`` if given."""
        if out is None:
            return softcap(x, cap)
        return softcap_out(x, cap, out=out)

    @torch.compile(backend=graph_printing_backend, fullgraph=True)
    def fresh_and_filled(x, buffer):
        return softcap_with_optional_out(x, 30.0) + softcap_with_optional_out(
            x, 30.0, out=buffer
        )

    for device in devices:
        x = 50 * torch.randn(4, 8, device=device)
        buffer = torch.empty_like(x)
        assert softcap_with_optional_out(x, 30.0, out=buffer) is buffer
        torch.testing.assert_close(softcap_with_optional_out(x, 30.0), buffer)
        buffer = torch.empty_like(x)
        torch.testing.assert_close(fresh_and_filled(x, buffer), 2 * buffer)
        torch.testing.assert_close(buffer, softcap_reference(x, 30.0))
    print(f"both paths agree, eagerly and compiled, on {devices}")

    targets = called_functions(captured_graphs[-1])
    wrapped = [
        node.args[0]
        for node in captured_graphs[-1].graph.nodes
        if hop_name(node.target) == "auto_functionalized_v2"
    ]
    print(f"functionalized calls in the graph: {[str(op) for op in wrapped]}")
    assert torch.ops.mutable_ops.softcap.default in targets
    assert wrapped == [torch.ops.mutable_ops.softcap.out]
else:
    skipped("the split of the maybe-out operator")


# %%
# The split pays off once more with Inductor. When a functional operator has
# a tagged ``out=`` overload with the same other arguments, Inductor may call
# the overload instead, with a buffer it plans itself. Counting kernel calls
# shows that the compiled ``softcap`` ran the ``softcap.out`` kernel.

if TAGGED_OPS:
    torch.compiler.reset()
    softcap_out_calls["out"] = 0
    compiled_softcap = torch.compile(lambda x: softcap(x, 30.0), fullgraph=True)
    x = 50 * torch.randn(4, 8)
    torch.testing.assert_close(compiled_softcap(x), softcap_reference(x, 30.0))
    out_calls = softcap_out_calls["out"]
    print(f"softcap.out kernel calls in the Inductor-compiled softcap: {out_calls}")
    assert softcap_out_calls["out"] == 1
else:
    skipped("Inductor calling softcap.out")


# %%
# Summary
# -------
#
# The table is read from the schemas of this page's operators: the arguments
# written, the return type, the tags, and whether a result may be an argument.


def describe(overload):
    schema = overload._schema
    written = [
        arg.name
        for arg in schema.arguments
        if arg.alias_info is not None and arg.alias_info.is_write
    ]
    returns = ", ".join(str(ret.type) for ret in schema.returns) or "nothing"
    tags = [tag.name for tag in overload.tags if tag.name in ("inplace", "out")]
    aliased = any(ret.alias_info is not None for ret in schema.returns)
    return {
        "operator": overload.name(),
        "writes into": ", ".join(written) or "-",
        "returns": returns,
        "tag": ", ".join(tags) or "-",
        "returns an argument": "yes" if aliased else "no",
    }


summary_ops = [
    torch.ops.mutable_ops.softcap.default,
    torch.ops.mutable_ops.softcap_into.default,
]
if TAGGED_OPS:
    summary_ops += [
        torch.ops.mutable_ops.softcap_.default,
        torch.ops.mutable_ops.softcap.out,
    ]
rows = [describe(op) for op in summary_ops]
# sphinx_gallery_start_ignore
widths = {key: max(len(key), *(len(row[key]) for row in rows)) for key in rows[0]}
print("  ".join(key.ljust(width) for key, width in widths.items()).rstrip())
print("  ".join("-" * width for width in widths.values()))
for row in rows:
    print("  ".join(row[key].ljust(width) for key, width in widths.items()).rstrip())
# sphinx_gallery_end_ignore

assert rows[0]["writes into"] == "-" and rows[0]["returns an argument"] == "no"
assert rows[1]["writes into"] == "out" and rows[1]["returns"] == "nothing"
if TAGGED_OPS:
    assert rows[2]["writes into"] == "x" and rows[2]["returns an argument"] == "yes"
    assert rows[3]["writes into"] == "out" and rows[3]["tag"] == "out"
else:
    print(f"\nParts skipped on this release: {len(skipped_parts)}")
    for part in skipped_parts:
        print(f"  - {part}")
assert bool(skipped_parts) != TAGGED_OPS

# %%
# Conclusion
# ----------
#
# A custom operator's schema is a contract. ``mutates_args`` must name every
# argument the kernel writes, or ``torch.compile`` may silently drop the call.
# Results must be fresh tensors unless a tag says otherwise. The compiler
# rewrites mutation into a functional call, then copies the values back
# (``aot_eager``) or writes in place again (Inductor). From PyTorch 2.13,
# ``torch.Tag.inplace`` and ``torch.Tag.out`` give custom operators PyTorch's
# own two shapes; an optional ``out`` becomes a functional operator, an
# ``out=`` overload and a Python function that picks one.
#
# Next, :ref:`sphx_glr_tutorials_custom_op_registrations.py` adds training,
# device-specific kernels, ``vmap`` and autocast support to an operator, and
# :ref:`sphx_glr_tutorials_fake_kernels_and_shapes.py` looks at fake kernels in
# depth. When an operator misbehaves, see
# :ref:`sphx_glr_tutorials_custom_op_troubleshooting.py`.
