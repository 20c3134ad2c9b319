"""
Training and Other Registrations
================================

After this page you will be able to take one custom operator and teach it, one
registration at a time, to be trained, to run a different kernel on each
device, to be batched by ``torch.vmap``, to take part in mixed precision, and
to cooperate with a ``TorchDispatchMode``. Each registration is checked: by
``gradcheck`` and ``gradgradcheck``, by counting which kernel ran, and by
comparing against a plain loop.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * How ``register_autograd`` and ``setup_context`` make an operator
         trainable, with second derivatives too
       * How ``register_kernel`` adds a device-specific kernel next to the
         default one
       * How ``register_vmap`` replaces ``vmap``'s slow fallback
       * How ``register_autocast`` controls the dtype an operator sees in
         mixed precision
       * How ``register_torch_dispatch`` teaches a dispatch mode about your
         operator

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later
       * NumPy and Matplotlib
       * :ref:`sphx_glr_tutorials_python_custom_ops.py`

.. admonition:: Checklist
   :class: checklist

   #. Training: ``register_autograd(backward, setup_context=...)``, saving
      tensors with ``ctx.save_for_backward`` and writing ``backward`` with
      differentiable operations; test with ``gradcheck`` and
      ``gradgradcheck``.
   #. A faster kernel for one device type: ``register_kernel("cuda")``; the
      function decorated with ``custom_op`` stays the default for the others.
   #. Batching: ``register_vmap``, returning the output and its batch
      dimension; compare with a Python loop.
   #. Mixed precision: ``register_autocast(op, device_type, dtype)``, knowing
      that it casts every floating-point input but float64, up or down.
   #. A dispatch mode that must handle the operator specially:
      ``register_torch_dispatch(ModeClass)``.
   #. Run ``opcheck`` with samples that require grad, are empty,
      non-contiguous or permuted, then count which kernel ran where it
      matters.

A custom operator made with ``torch.library.custom_op`` starts out as a single
kernel that PyTorch calls as a black box. Every PyTorch subsystem that meets
the operator, whether autograd, ``vmap``, autocast or a dispatch mode, needs to
be told what to do with it, and each gets its own registration. None is
required; you add the ones your users need.
"""

# %%
# Setting up
# ----------
#
# The page runs on the CPU, and also on a CUDA device when it finds one. Every
# registration API it uses exists from its floor, PyTorch 2.7, on.

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import warnings
from collections import Counter

import matplotlib.pyplot as plt
import numpy as np
from torch import Tensor
from torch.autograd.gradcheck import GradcheckError
from torch.utils._python_dispatch import TorchDispatchMode

# For behaviour that changed between releases without a feature to test for.
RELEASE = tuple(int(part) for part in torch.__version__.split(".")[:2])

torch.manual_seed(0)
np.random.seed(0)
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")

# %%
# ``GradcheckError`` is what ``gradcheck`` and ``gradgradcheck`` raise; it is
# public, in the module ``torch.autograd.gradcheck``. ``TorchDispatchMode`` is
# the base class of dispatch modes; PyTorch does not expose it from a public
# module, so we import it from the private module where it is defined.
#
# The operator: softplus through NumPy
# ------------------------------------
#
# ``softplus(x) = log(1 + exp(x))`` is a smooth version of ReLU. NumPy computes
# it without overflow as ``np.logaddexp(0, x)``. NumPy plays the part of the
# library you would wrap, though a gentle one: Dynamo could trace this call
# (the first check below), a C extension it could not. The registrations do
# not depend on the difference, as a custom operator's kernel is never traced.
#
# The default kernel, the function decorated with ``custom_op``, must work for
# tensors on any device. It copies its input to the CPU for NumPy and the result
# back. Each kernel on this page records its name and the dtype it received in
# ``calls`` and ``dtypes_seen``, so that we can tell afterwards which one ran.

calls = Counter()
dtypes_seen = []


def record(kernel: str, x: Tensor) -> None:
    calls[kernel] += 1
    dtypes_seen.append(x.dtype)


def check_input(x: Tensor) -> None:
    if x.dtype not in (torch.float32, torch.float64):
        raise ValueError(
            f"softplus runs in NumPy and needs float32 or float64 input, got {x.dtype}"
        )


@torch.library.custom_op("registrations::softplus", mutates_args=())
def softplus(x: Tensor) -> Tensor:
    record("default", x)
    check_input(x)
    result = np.logaddexp(0, x.detach().cpu().numpy())
    return torch.from_numpy(result).to(x.device)


@softplus.register_fake
def _(x):
    record("fake", x)
    check_input(x)
    return torch.empty_like(x)


def numpy_softplus(x):
    return torch.from_numpy(np.logaddexp(0, x.numpy()))


traced = torch._dynamo.explain(numpy_softplus)(torch.randn(4))
print(f"graph breaks when Dynamo traces the NumPy call: {traced.graph_break_count}")
assert traced.graph_break_count == 0

x = 10 * torch.randn(5, 6)
torch.testing.assert_close(softplus(x), torch.nn.functional.softplus(x))
print(f"softplus matches torch.nn.functional.softplus; kernels so far: {dict(calls)}")
assert calls == {"default": 1}

# %%
# Device-specific kernels with ``register_kernel``
# ------------------------------------------------
#
# The default kernel serves every device by moving the input to the CPU for
# NumPy and the result back. On a CPU tensor the moves cost nothing:
# ``.cpu()`` returns the tensor itself, NumPy reads its memory in place, and
# ``.to("cpu")`` returns the result itself (checked below). On a CUDA tensor
# they are two copies between GPU and host per call, which a kernel that stays
# on the GPU avoids.
#
# ``register_kernel`` adds a kernel for one device type. We register one for
# CUDA, with PyTorch's own softplus standing in for the GPU kernel you would
# write (registering it does no harm on a machine without CUDA: it simply never
# runs), and one for the CPU that calls NumPy directly. The CPU kernel does the
# same work as the default one here; a real project would register one when
# the CPU has a better implementation than the portable path. The default
# kernel remains for every other device type.


x = torch.randn(5, 6)
assert x.cpu() is x and np.shares_memory(x.numpy(), x.detach().cpu().numpy())
assert x.to("cpu") is x


@softplus.register_kernel("cpu")
def _(x):
    record("cpu", x)
    check_input(x)
    return torch.from_numpy(np.logaddexp(0, x.detach().numpy()))


@softplus.register_kernel("cuda")
def _(x):
    record("cuda", x)
    check_input(x)
    return torch.nn.functional.softplus(x)


# %%
# PyTorch picks the kernel from the device of the input: a device-specific
# kernel if one is registered, the default one otherwise. Since PyTorch 2.5,
# ``set_kernel_enabled`` can switch a device kernel off for a while, handy for
# testing the default kernel against it.

for device in devices:
    calls.clear()
    x = 10 * torch.randn(5, 6, device=device)
    torch.testing.assert_close(softplus(x), torch.nn.functional.softplus(x))
    print(f"{device} tensor ran: {dict(calls)}")
    assert calls == {device: 1}

calls.clear()
with softplus.set_kernel_enabled("cpu", enabled=False):
    softplus(torch.randn(3))
print(f"cpu tensor, cpu kernel disabled, ran: {dict(calls)}")
assert calls == {"default": 1}

# %%
# Training with ``register_autograd``
# -----------------------------------
#
# Autograd cannot see into the operator, so we provide its derivative, in two
# parts:
#
# * ``setup_context(ctx, inputs, output)`` runs after the forward pass and
#   stores what the backward pass will need. Tensors go through
#   ``ctx.save_for_backward``; plain Python values can be set as attributes.
# * ``backward(ctx, grad_output)`` returns one gradient per input.
#
# The derivative of softplus is the logistic sigmoid, ``1 / (1 + exp(-x))``, so
# we save the input. A first attempt computes the sigmoid with NumPy too:


def save_input(ctx, inputs, output):
    (x,) = inputs
    ctx.save_for_backward(x)


def backward_with_numpy(ctx, grad_output):
    (x,) = ctx.saved_tensors
    sigmoid = 1 / (1 + np.exp(-x.detach().cpu().numpy()))
    return grad_output * torch.from_numpy(sigmoid).to(grad_output.device)


softplus.register_autograd(backward_with_numpy, setup_context=save_input)

x = torch.randn(5, dtype=torch.float64, requires_grad=True)
assert torch.autograd.gradcheck(softplus, (x,))
print("gradcheck passed: first derivatives are right")

# %%
# ``gradcheck`` compares the backward formula with finite differences and is
# satisfied. ``gradgradcheck`` does the same one level up, for the derivative
# of the backward pass itself, and it fails:

try:
    torch.autograd.gradgradcheck(softplus, (x,))
except GradcheckError as error:
    print(f"{type(error).__name__}: {str(error).splitlines()[0]}")
else:
    raise AssertionError("expected gradgradcheck to fail for the NumPy backward")

hessian = torch.autograd.functional.hessian(lambda t: softplus(t).sum(), x.detach())
print(f"second derivatives through the NumPy backward: {hessian.diagonal()}")
assert not hessian.any()

# %%
# Autograd records what happens in a backward formula only if it is built from
# operations it can differentiate. The NumPy sigmoid is a constant as far as
# autograd is concerned, so the second derivatives come out as zero, silently,
# as the Hessian printed above shows; that is what ``gradgradcheck`` caught.
# The fix is to write the backward formula with PyTorch operators (or with
# custom operators that have their own backward registered); ``torch.sigmoid``
# will do.


def backward(ctx, grad_output):
    (x,) = ctx.saved_tensors
    return grad_output * torch.sigmoid(x)


softplus.register_autograd(backward, setup_context=save_input)

# %%
# ``opcheck`` gets samples that require grad and samples that don't, an empty
# one, and two in unusual memory layouts: every other column of a wider
# matrix (not contiguous) and a transposed matrix (dense, but not row-major).
# The kernels' outputs keep a dense input's layout, as ``torch.empty_like``
# in the fake kernel promises and as PyTorch's own softplus does (the strides
# of an empty tensor mean nothing, so that one is left out of the comparison).


def softplus_samples(device):
    return [
        torch.randn(5, 6, device=device, requires_grad=True),
        torch.randn(3, dtype=torch.float64, device=device),
        torch.randn(0, 4, device=device, requires_grad=True),
        torch.randn(4, 12, device=device)[:, ::2].requires_grad_(),
        torch.randn(6, 4, dtype=torch.float64, device=device).t(),
    ]


for device in devices:
    x = torch.randn(5, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradcheck(softplus, (x,))
    assert torch.autograd.gradgradcheck(softplus, (x,))
    for example in softplus_samples(device):
        torch.library.opcheck(softplus, (example,))
        expected = torch.nn.functional.softplus(example)
        torch.testing.assert_close(softplus(example), expected)
        if example.numel():
            assert softplus(example).stride() == expected.stride()
print(f"gradcheck, gradgradcheck and opcheck pass on {devices}")

# %%
# ``save_for_backward`` is more than a place to put tensors: autograd remembers
# the version of each saved tensor, so an in-place change between forward and
# backward is caught instead of producing a wrong gradient. Here ``x`` is
# modified after ``softplus`` saved it:

leaf = torch.randn(5, requires_grad=True)
x = leaf * 1
y = softplus(x)
x.add_(1)
try:
    y.sum().backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).splitlines()[0][:120]}...")
    assert "modified by an inplace operation" in str(error)
else:
    raise AssertionError("expected backward to notice the in-place change")

# %%
# Batching with ``register_vmap``
# -------------------------------
#
# ``torch.vmap(f)`` turns a function of one example into a function of a batch.
# It knows how to batch PyTorch's operators, but not ours. Without a rule,
# ``vmap`` falls back to a loop: it calls the kernel once per example and warns
# about the lost performance. We count kernel calls to see it.
#
# Where the warning goes depends on the release. From PyTorch 2.14 it is a
# Python ``UserWarning`` that ``warnings.catch_warnings`` records; older
# releases print it from C++ straight to the process's standard error, where
# the ``warnings`` module never sees it (in a terminal you still read it; on
# this web page it does not appear).

batch = torch.randn(8, 5)
calls.clear()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    batched = torch.vmap(softplus)(batch)
messages = [str(w.message) for w in caught if "performance drop" in str(w.message)]
print(f"without a vmap rule: kernel calls {dict(calls)}")
if messages:
    print(f"Python warning: {messages[0].split('. ')[0]}.")
else:
    print("no Python warning: this release printed it from C++ to stderr")
assert calls == {"cpu": len(batch)}
assert bool(messages) == (RELEASE >= (2, 14))
torch.testing.assert_close(batched, torch.nn.functional.softplus(batch))

# %%
# A vmap rule receives ``info`` (the batch size and randomness setting), the
# position of the batch dimension in each input (``None`` for an input that is
# not batched) and the batched inputs themselves. It returns the batched output
# and where its batch dimension is. Softplus works element by element, so the
# whole batch can go through the operator in one call, and the batch dimension
# stays where it was.


@softplus.register_vmap
def _(info, in_dims, x):
    calls["vmap rule"] += 1
    (x_batch_dim,) = in_dims
    return softplus(x), x_batch_dim


for device in devices:
    batch = torch.randn(8, 5, device=device)
    calls.clear()
    rows = torch.vmap(softplus)(batch)
    columns = torch.vmap(softplus, in_dims=1)(batch)
    torch.testing.assert_close(rows, torch.stack([softplus(r) for r in batch]))
    torch.testing.assert_close(columns, torch.stack([softplus(c) for c in batch.T]))
print(f"vmap equals a Python loop on {devices}")

calls.clear()
torch.vmap(softplus)(batch.cpu())
print(f"with the vmap rule: {dict(calls)}")
assert calls == {"vmap rule": 1, "cpu": 1}

# %%
# With the rule, ``vmap`` gives the same values as the loop, over rows and over
# columns, and the whole batch costs one kernel call.
#
# Mixed precision with ``register_autocast``
# ------------------------------------------
#
# Inside ``torch.autocast("cpu", dtype=torch.bfloat16)``, matrix
# multiplications run in bfloat16, and so do their results. Autocast knows
# which of PyTorch's operators should run in low precision and which should not;
# about ours it knows nothing, so it hands our operator whatever it gets. NumPy
# has no bfloat16, and the operator refuses it:

features, weight = torch.randn(4, 16), torch.randn(16, 5)
dtypes_seen.clear()
with torch.autocast("cpu", dtype=torch.bfloat16):
    hidden = features @ weight
    try:
        softplus(hidden)
    except ValueError as error:
        print(f"{type(error).__name__}: {error}")
    else:
        raise AssertionError("expected softplus to refuse bfloat16")
print(f"matmul result: {hidden.dtype}; softplus saw: {dtypes_seen}")
assert dtypes_seen == [torch.bfloat16]

# %%
# ``register_autocast`` declares the dtype the operator runs in. Inside an
# autocast region for that device type, every floating-point input except a
# float64 one is cast to that dtype before the operator runs. We ask for
# float32 on both device types, so bfloat16 and float16 inputs are widened;
# float64 inputs are left alone, and outside autocast nothing changes at all.

torch.library.register_autocast(softplus, "cpu", torch.float32)
torch.library.register_autocast(softplus, "cuda", torch.float32)

for device in devices:
    features, weight = (
        torch.randn(4, 16, device=device),
        torch.randn(16, 5, device=device),
    )
    wide = torch.randn(3, dtype=torch.float64, device=device)
    dtypes_seen.clear()
    with torch.autocast(device, dtype=torch.bfloat16):
        hidden = features @ weight
        activated = softplus(hidden)
        softplus(wide)
    print(f"{device}: matmul {hidden.dtype}; softplus saw {dtypes_seen}")
    assert hidden.dtype == torch.bfloat16
    assert dtypes_seen == [torch.float32, torch.float64]
    assert activated.dtype == torch.float32
    torch.testing.assert_close(activated, torch.nn.functional.softplus(hidden.float()))
    try:
        softplus(hidden)  # the same bfloat16 tensor, outside autocast
    except ValueError:
        print(f"{device}: outside autocast, bfloat16 is still refused")
    else:
        raise AssertionError("expected no casting outside autocast")

# %%
# The cast goes both ways. A rule that asks for bfloat16 narrows float32 (and
# converts float16) inputs to bfloat16, and still leaves float64 alone. So a
# low-precision rule on an operator that needs float32 accuracy silently
# throws it away. A second operator, which only reports the dtype it received,
# shows it:

received = []


@torch.library.custom_op("registrations::received_dtype", mutates_args=())
def received_dtype(x: Tensor) -> Tensor:
    received.append(x.dtype)
    return x.clone()


torch.library.register_autocast(received_dtype, "cpu", torch.bfloat16)
sent = [torch.float16, torch.float32, torch.float64]
with torch.autocast("cpu", dtype=torch.bfloat16):
    for dtype in sent:
        received_dtype(torch.randn(3, dtype=dtype))
for before, after in zip(sent, received, strict=True):
    print(f"bfloat16 rule: {before} arrives as {after}")
assert received == [torch.bfloat16, torch.bfloat16, torch.float64]

# %%
# Dispatch modes with ``register_torch_dispatch``
# -----------------------------------------------
#
# A ``TorchDispatchMode`` intercepts every operator call made while it is
# active, after autograd has done its part. Tracers, profilers and debugging
# tools are built this way. Our custom operator reaches a mode like any other
# operator. The mode below logs the name of each call and runs it unchanged.


class OperatorLog(TorchDispatchMode):
    """Record the name of every operator called while the mode is active."""

    def __init__(self):
        super().__init__()
        self.entries = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.entries.append(str(func))
        return func(*args, **(kwargs or {}))


x = torch.randn(4, 6)
with OperatorLog() as log:
    torch.nn.functional.relu(softplus(x)).sum()
print(f"log: {log.entries}")
assert log.entries[0] == "registrations.softplus.default"

# %%
# The mode's author could not know about our operator, and we may not be able to
# change the mode. ``register_torch_dispatch`` lets the operator's author supply
# a rule for one (operator, mode class) pair. The rule runs instead of the
# mode's ``__torch_dispatch__`` for that operator only, and receives the mode
# instance. Ours logs a richer entry, then runs the operator; the mode is not
# active while a rule runs, so the call goes straight to the kernel.


@softplus.register_torch_dispatch(OperatorLog)
def _(mode, func, types, args, kwargs):
    calls["dispatch rule"] += 1
    (x,) = args
    mode.entries.append(f"softplus on {tuple(x.shape)} via NumPy")
    return func(*args, **kwargs)


calls.clear()
with OperatorLog() as log:
    result = torch.nn.functional.relu(softplus(x)).sum()
print(f"log: {log.entries}")
assert log.entries[0] == "softplus on (4, 6) via NumPy"
assert "registrations.softplus.default" not in log.entries
assert calls == {"dispatch rule": 1, "cpu": 1}
torch.testing.assert_close(result, torch.nn.functional.softplus(x).sum())

# %%
# Which kernel ran when
# ---------------------
#
# The table collects the page in one place. Each row runs the operator once,
# under one condition, and counts what ran: the default kernel, a device kernel,
# the fake kernel (which ``torch.compile`` uses while tracing), the vmap rule, or
# the dispatch rule. Each row is checked against what this page has claimed.

compiled_softplus = torch.compile(softplus, backend="aot_eager", fullgraph=True)
cpu_input = torch.randn(8, 5)
conditions = [("CPU tensor", lambda: softplus(cpu_input), {"cpu": 1})]


def cpu_kernel_disabled():
    with softplus.set_kernel_enabled("cpu", enabled=False):
        softplus(cpu_input)


conditions.append(("CPU, cpu kernel disabled", cpu_kernel_disabled, {"default": 1}))
if "cuda" in devices:
    cuda_input = cpu_input.cuda()
    conditions.append(("CUDA tensor", lambda: softplus(cuda_input), {"cuda": 1}))
conditions.append(
    ("torch.compile, first call", lambda: compiled_softplus(cpu_input), None)
)
conditions.append(("torch.compile, again", lambda: compiled_softplus(cpu_input), None))
conditions.append(
    ("torch.vmap over 8 rows", lambda: torch.vmap(softplus)(cpu_input), None)
)


def under_autocast():
    dtypes_seen.clear()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        softplus(cpu_input.bfloat16())
    assert dtypes_seen == [torch.float32]


conditions.append(("bfloat16 under autocast", under_autocast, {"cpu": 1}))


def under_mode():
    with OperatorLog():
        softplus(cpu_input)


conditions.append(("under OperatorLog", under_mode, None))

# ``None`` stands for "at least once": tracing may call the fake kernel more
# than once.
expected_extra = {
    "torch.compile, first call": {"fake": None, "cpu": 1},
    "torch.compile, again": {"cpu": 1},
    "torch.vmap over 8 rows": {"vmap rule": 1, "cpu": 1},
    "under OperatorLog": {"dispatch rule": 1, "cpu": 1},
}
columns = ["default", "cpu", "cuda", "fake", "vmap rule", "dispatch rule"]
table = {}
print(f"{'condition':<25}" + "".join(f"{name:>{len(name) + 2}}" for name in columns))
for name, run, expected in conditions:
    calls.clear()
    run()
    counts = dict(calls)
    table[name] = [counts.get(c, 0) for c in columns]
    cells = [f"{n:>{len(c) + 2}}" for c, n in zip(columns, table[name], strict=True)]
    print(f"{name:<25}" + "".join(cells))
    expected = expected or expected_extra[name]
    assert counts.keys() == expected.keys(), (name, counts)
    for kernel, count in expected.items():
        assert counts[kernel] >= 1 if count is None else counts[kernel] == count

# %%
# The compiled function ran the fake kernel only while tracing, on the first
# call, and the CPU kernel on every call. The autocast row ran the CPU kernel
# with a float32 input. The vmap and dispatch rules each ran once and called
# the CPU kernel themselves. The same table as a picture, one square per
# condition and kernel, filled where that kernel ran:

ran = np.array(list(table.values()))
fig, ax = plt.subplots(figsize=(7, 1.3 + 0.42 * len(table)), layout="constrained")
ax.imshow(ran > 0, cmap="Blues", vmin=0, vmax=1.4, aspect="auto")
for (row, column), count in np.ndenumerate(ran):
    color = "white" if count else "0.55"
    ax.text(
        column, row, str(count) if count else "-", ha="center", va="center", color=color
    )
ax.set_xticks(range(len(columns)))
ax.set_xticklabels([name.replace(" ", "\n") for name in columns])
ax.xaxis.tick_top()
ax.set_yticks(range(len(table)))
ax.set_yticklabels(list(table))
ax.tick_params(length=0)
ax.set_title("Kernel calls of registrations::softplus, per condition", pad=12)
plt.show()

# %%
# Conclusion
# ----------
#
# Each PyTorch subsystem that meets a custom operator has its own registration:
#
# * ``register_autograd`` for training, with a backward built from
#   differentiable operations so that ``gradgradcheck`` passes too;
# * ``register_kernel`` for a kernel per device type beside the default one;
# * ``register_vmap`` to batch in one call instead of ``vmap``'s loop;
# * ``register_autocast`` to fix the dtype the operator sees in mixed precision;
# * ``register_torch_dispatch`` to teach a dispatch mode about the operator.
#
# Register the ones you need, and test each: ``opcheck`` for the
# registrations, and ``gradcheck``, a loop or a reference for the results.
#
# See :ref:`sphx_glr_tutorials_mutable_custom_ops.py` for operators that write
# into their arguments, and
# :ref:`sphx_glr_tutorials_fake_kernels_and_shapes.py` for fake kernels and
# dynamic shapes. :ref:`sphx_glr_tutorials_custom_op_internals.py` shows how
# these registrations map onto the dispatcher.
