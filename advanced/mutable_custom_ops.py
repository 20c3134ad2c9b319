"""
Functional and Mutable Operators
================================

After this page you will be able to choose the right shape for a custom
operator that produces tensors: one that returns new tensors, one that writes
into a buffer you pass in, or, from PyTorch 2.13, one that follows PyTorch's own
in-place and ``out=`` conventions. You will see what the compiler does with each
kind, and what goes wrong when an operator breaks the promises its schema makes.

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

Every operator has a *schema*, a typed signature that also records which
arguments the operator writes into and which of its results share memory with
an argument. ``torch.compile``, autograd and ``torch.export`` never look inside
the kernel of a ``custom_op``. They know what you register: the schema, and,
as other pages show, a fake kernel, a backward formula and other rules. On the
questions this page is about, which arguments are written and whether a result
shares memory with an argument, the schema is their only source. A schema that
tells the truth lets them reorder, fuse and reuse memory safely. A schema that
lies makes them do the wrong thing, usually without an error.
"""

# %%
# Setting up
# ----------
#
# The page runs on the CPU, and also on a CUDA device when it finds one.
# ``TAGGED_OPS`` records whether this PyTorch has the ``inplace`` and ``out``
# tags (new in 2.13); the sections that need them check it and say so when they
# skip.

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
# ``aot_autograd`` builds a ``torch.compile`` backend from a function that
# receives the graph after functionalization; it lives in a private module
# because it is meant for backend authors, and here it lets us print that graph.
#
# Error messages from custom operators name the file of the function that
# raised them, and some run to a paragraph. The helper below prints the class of
# an exception and the first sentence of its message, without the file name.
# ``skipped`` prints, and remembers, each part of the page this release cannot
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
# Large language models often *soft-cap* their attention scores or logits:
# ``cap * tanh(x / cap)`` leaves small values almost unchanged and squeezes
# large ones smoothly into ``(-cap, cap)``. An infinite ``cap`` means no capping
# at all. The kernels compute it with NumPy, which only reads CPU memory, so
# they copy a CUDA input to the CPU and the result back (on a CPU tensor,
# ``.cpu()`` and ``.to(x.device)`` return the tensor itself and copy nothing).
#
# NumPy plays the part of the library you wrap: a C extension, a CUDA kernel
# of your own, a simulator. It is a gentle stand-in, because Dynamo can trace
# this much NumPy by translating it into PyTorch operators (we check that
# below), whereas it cannot see into a C extension at all. Nothing on this page
# depends on the difference: a custom operator's kernel is never traced,
# whatever it contains, and what the compiler learns comes from the schema.
#
# Every operator on this page first checks its arguments and raises a
# ``ValueError`` that names the problem.


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
# The operators are tested on inputs in four layouts: a fresh row-major
# matrix, an empty one, every other column of a wider matrix (not contiguous),
# and a transposed matrix (dense, but not row-major). ``buffer_like`` makes an
# output buffer with exactly the layout of its input, gaps included.


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
# The simplest and most flexible kind of operator is *functional*: it reads its
# inputs, writes into none of them, and returns tensors it has just created.
# ``mutates_args=()`` declares the first half of that; the second half is a
# rule every operator without a tag must follow, as we will see.


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
# The schema ``(Tensor x, float cap) -> Tensor`` carries no alias annotations:
# nothing is written, and the result is a new tensor. None of the samples
# requires grad: these operators have no backward formula (adding one is the
# subject of :ref:`sphx_glr_tutorials_custom_op_registrations.py`), and the
# buffer-filling ones below cannot have one.
#
# Mutable operators write into a buffer
# -------------------------------------
#
# Sometimes the caller owns the memory: a preallocated logits buffer that a
# decoding loop fills at every step, say. A mutable operator writes its result
# into such a buffer and returns nothing. Every argument it writes into must be
# listed in ``mutates_args``.


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
# In the schema, ``Tensor(a2!) out`` marks ``out`` as written to (the ``!``);
# the return type ``()`` says there is nothing to return. A mutable operator
# that returns nothing needs no fake kernel: there is no output whose shape the
# compiler would need to know, so PyTorch supplies an empty one itself.
#
# The same buffer serves every call, which is the point of the exercise: its
# memory address never changes.

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
# Here is the same operator with the declaration left out. It computes exactly
# the same thing, and in eager mode nobody can tell the difference. Because the
# schema now says the operator returns nothing and writes nothing, the compiler
# would need a fake kernel for it, which simply returns ``None``.

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
# ``opcheck`` runs the operator and compares every argument before and after.
# With ``raise_exception=False`` it returns each of its tests' verdicts instead
# of stopping at the first failure. ``test_schema`` notices that ``out``
# changed although the schema says it cannot:

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
# wrong answer with no error at all. The function below allocates a buffer of
# zeros, lets the operator fill it, and returns it. As far as the compiler
# knows, an operator that returns nothing and writes nothing has no effect, so
# it is free to remove the call, and it does. (``backend="aot_eager"`` runs the
# compiler's graph capture and functionalization without generating code,
# which is fast and enough to show the problem.)


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
# The compiled function with the undeclared mutation never called the kernel
# and returned the zeros; with ``mutates_args={"out"}`` it returns the capped
# values. The eager run could not have warned us: only the schema changed. The
# figure shows the three buffers the function returned.

eager_result = capped_into_zeros(softcap_into_undeclared)(x)
panels = {
    "eager\nmutates_args=()": eager_result,
    "compiled\nmutates_args=()": result,
    'compiled\nmutates_args={"out"}': declared_result,
}
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
torch.testing.assert_close(eager_result, declared_result)

# %%
# Never return an input, or a view of one
# ---------------------------------------
#
# The second promise concerns results. Without a tag (more on tags below), a
# custom operator's results must be new tensors that share memory with no
# input and with no other result. The compiler and autograd treat every result
# as independent of the inputs; if a result secretly *is* an input, an
# in-place change to one silently changes the other.
#
# It is an easy rule to break by accident. This version of ``softcap`` takes a
# shortcut when there is nothing to cap:


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
# PyTorch checks the rule each time the Python kernel returns, so the finite
# cap worked and the infinite one raised a ``RuntimeError``: a reason to give
# ``opcheck`` examples that reach every branch. A view counts too. ``detach()``
# looks like a way out, but it returns a view that shares the input's memory,
# and the check catches it just the same:


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
# The fix is the ``x.clone()`` that ``softcap`` already uses. The rule also
# covers mutable operators: returning the buffer an operator has just written
# would be convenient, and is refused the same way.


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
# The compiler's optimizations are far simpler on a graph in which nothing is
# mutated: any two operations that do not depend on each other's results may
# run in any order. So before optimizing, ``torch.compile`` *functionalizes*
# the program. A call to a mutable custom operator becomes a call to
# ``auto_functionalized`` (``auto_functionalized_v2`` in recent releases), a
# functional wrapper that returns the new value of every argument the operator
# writes into. What happens to the caller's tensor afterwards is up to the
# backend, as we will see.
#
# The backend below records the graph it receives, after functionalization,
# and runs it unchanged, like ``aot_eager``.

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
# The graph never calls ``softcap_into`` directly. It calls the functional
# wrapper, which hands back a new buffer value (read out with ``getitem``), and
# the graph returns that value as an extra output so that it can be copied into
# our ``buffer`` afterwards. The checks below confirm it: the only function calls
# are the wrapper, an index into its result and the sum; the graph has two
# outputs although our function returns one value; and our ``buffer`` did
# receive the capped values.


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
# So with this backend, as with ``aot_eager``, the kernel fills a temporary
# tensor, and the caller's ``buffer`` receives a copy of it after the graph.
# Inductor, the default backend, does better. It keeps the write into the
# caller's tensor inside its own graph, and then *reinplaces*: where nothing
# else needs the buffer's old contents, it turns the functional call back into
# the mutable one, so the kernel writes straight into the caller's buffer. The
# address the kernel receives as ``out`` shows which memory it filled. (This
# cell compiles with Inductor, which takes a few seconds.)


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
# such as ``x.mul_(2)`` writes into its first argument and returns it, so calls
# can be chained. An ``out=`` operator such as ``torch.mul(x, 2, out=buffer)``
# writes into keyword-only output buffers, never reads them, and returns them.
# Both return a tensor they wrote into, which is exactly what we just saw
# refused.
#
# From PyTorch 2.13, ``torch.library.custom_op`` accepts ``tags=`` with
# ``torch.Tag.inplace`` or ``torch.Tag.out``. A tag changes four things:
#
# * the inferred schema declares that the result is the mutated argument,
#   and at run time the kernel must return exactly that tensor;
# * the fake kernel is generated for you, since the output is an input;
# * ``torch.compile`` functionalizes the call with the tag's meaning in mind:
#   an ``out=`` buffer is known to be write-only;
# * an ``out=`` operator refuses autograd, as built-in ``out=`` operators do.
#
# The in-place operator is ``softcap_``, named with the trailing underscore
# that PyTorch uses for in-place operators. It must list exactly its first
# argument in ``mutates_args`` and be annotated to return a ``Tensor``.

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
# The schema ``(Tensor(a0!) x, float cap) -> Tensor(a0!)`` says that ``x`` is
# written and that the result is ``x``. No ``register_fake`` was needed for
# ``opcheck``'s compile test. The contract is enforced both ways: a kernel that
# returns a new tensor where the tag promises ``x`` is refused at run time.

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
# Now the ``out=`` operator. We make it an *overload* of ``softcap`` by naming
# it ``"mutable_ops::softcap.out"``: it appears as
# ``torch.ops.mutable_ops.softcap.out`` next to
# ``torch.ops.mutable_ops.softcap.default``, the way ``torch.ops.aten.mul.out``
# sits next to ``torch.ops.aten.mul.Tensor``. The buffer must be a
# keyword-only argument, and the function returns it.

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
# The run-time check holds here too: a kernel that allocates its own result
# instead of returning the buffer it was given is refused.

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
# Like every built-in ``out=`` operator, a tagged ``out=`` operator has no
# derivative: there is no sensible gradient for "whatever was in the buffer".
# Calling it on a tensor that requires grad raises an error instead of
# returning a result autograd cannot follow.

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
# The tags come with rules about the function's signature, and a definition
# that breaks one fails at once with a ``ValueError`` from schema inference.
# Three common mistakes: an in-place operator that returns nothing, an ``out``
# buffer that is not keyword-only, and an optional ``out`` buffer.

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
# If you define operators from a schema string with ``torch.library.define``,
# pass the same tags there; the schema is checked against the tag's rules when
# the operator is defined. Here the ``out`` buffer is positional:

if TAGGED_OPS:
    try:
        torch.library.define(
            "mutable_ops::softcap_from_string.out",
            "(Tensor x, float cap, Tensor(a!) out) -> Tensor(a!)",
            tags=torch.Tag.out,
        )
    except ValueError as error:
        report(error)
    else:
        raise AssertionError("expected define to reject a positional out buffer")
else:
    skipped("torch.library.define with a tag")


# %%
# How the compiler treats each kind
# ---------------------------------
#
# We compile one small function per mutable operator with the graph-printing
# backend, then look at the ``auto_functionalized_v2`` call in each graph. Its
# ``_all_bases`` argument lists the tensors whose *current contents* the
# wrapped call receives.

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
# All three compiled functions computed the right values and updated
# ``buffer``. The difference is in what the compiler must preserve. An untagged
# mutable operator *might* read its buffer before writing it, so the buffer's
# current contents go into the call, and a backend must keep them intact until
# then, often by copying. The in-place operator reads ``x`` by definition, so it
# too receives its base. For the ``out=`` operator the buffer's contents are
# irrelevant: the call records only its size, strides, dtype and device, and a
# backend may hand it any fresh memory of that shape.
#
# Splitting a "maybe-out" operator
# --------------------------------
#
# Many Python libraries have functions shaped like ``softcap(x, cap, out=None)``:
# fill ``out`` if one is given, otherwise allocate. That is two operators in one
# signature, and a single custom operator cannot be both. Declared as mutating
# an optional ``out``, it works until someone passes a buffer, because then it
# returns an input. On PyTorch 2.12 and older it does not even work without a
# buffer: the kernel that ``custom_op`` registers to bump the version counter of
# every mutated argument looks for ``out`` among the arguments it was given,
# does not find the omitted default, and fails with an ``IndexError`` from
# inside PyTorch. 2.13 fixed that; the cell shows what this release does.


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
# Tagging it does not help either: ``torch.Tag.out`` rejects an optional
# buffer (on 2.13 and later, the ``optional_out`` definition above showed it).
# The cure is to
# split it: a functional operator (``softcap``), an ``out=`` overload
# (``softcap.out``), and a plain Python function that picks one. Plain Python
# is no obstacle to ``torch.compile``: Dynamo traces through it and resolves the
# ``if`` while tracing, so the compiled graph holds the two operators and no
# trace of the function that chose between them.

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
# The split pays off once more with Inductor, the default ``torch.compile``
# backend. When a functional custom operator has an ``out=`` overload in the
# same packet, tagged ``torch.Tag.out`` and taking the same other arguments,
# Inductor may call the ``out=`` overload instead, with an output buffer it
# allocates and plans itself. Counting the kernel calls shows it: the compiled
# call to ``softcap`` ran the ``softcap.out`` kernel. (This compiles with
# Inductor, so it takes a few seconds.)

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
# The table is built from the schemas of the operators defined on this page: the
# arguments marked as written, the return type, and the tags. The last column
# says whether the operator may hand back a tensor that is also one of its
# arguments.


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
widths = {key: max(len(key), *(len(row[key]) for row in rows)) for key in rows[0]}
print("  ".join(key.ljust(width) for key, width in widths.items()).rstrip())
print("  ".join("-" * width for width in widths.values()))
for row in rows:
    print("  ".join(row[key].ljust(width) for key, width in widths.items()).rstrip())

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
# argument the kernel writes; leave one out and ``opcheck`` fails, while
# ``torch.compile`` may silently drop the call. Results must be fresh tensors,
# never an input and never a view of one, unless a tag says otherwise. Under
# ``torch.compile``, mutation is first rewritten into a functional call; a
# backend may then copy the new values back after the graph, as ``aot_eager``
# does, or write them in place again, as Inductor does. From PyTorch 2.13,
# ``torch.Tag.inplace`` and ``torch.Tag.out`` give custom operators the two
# shapes PyTorch's own operators use, with generated fake kernels and a clear
# meaning for the compiler. An operator with an optional ``out`` becomes a
# functional operator, an ``out=`` overload, and a Python function that picks
# between them.
#
# Next, :ref:`sphx_glr_tutorials_custom_op_registrations.py` adds training,
# device-specific kernels, ``vmap`` and autocast support to an operator, and
# :ref:`sphx_glr_tutorials_fake_kernels_and_shapes.py` looks at fake kernels in
# depth. When an operator misbehaves, see
# :ref:`sphx_glr_tutorials_custom_op_troubleshooting.py`.
