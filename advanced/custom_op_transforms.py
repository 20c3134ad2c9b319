"""
Custom Operators in Function Transforms
=======================================

After this page you will be able to use a custom operator inside
``torch.func`` transforms (``grad``, ``jacrev``, ``jvp``, ``hessian``,
``vmap``) and in forward-mode AD, and get numbers you can trust, knowing
which transforms the operator's own registrations cover and which need a
small ``torch.autograd.Function`` around it.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * Which ``torch.func`` transforms work on a custom operator with
         ``register_autograd`` and ``register_vmap``, and which raise or,
         worse, return zeros
       * Why forward mode, in ``torch.func`` or in
         ``torch.autograd.forward_ad``, silently loses the derivative
       * How ``gradcheck(..., check_forward_ad=True)`` catches a silently
         wrong forward-mode derivative
       * How an ``autograd.Function`` with ``setup_context``, ``backward``
         and ``jvp`` around the operator makes every transform correct

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later
       * NumPy and Matplotlib
       * :ref:`sphx_glr_tutorials_custom_op_registrations.py`

.. admonition:: Checklist
   :class: checklist

   #. ``torch.func.vmap`` works on the operator once it has
      ``register_vmap``; nothing more is needed.
   #. ``torch.func.grad``, ``vjp``, ``jacrev`` and ``hessian`` raise on a
      custom operator, up to PyTorch 2.15 at least (issue #168393), and
      forward mode (``jvp``, ``jacfwd``, ``torch.autograd.forward_ad``)
      loses the tangent without an error. Never trust them on the bare
      operator.
   #. Wrap the operator in a ``torch.autograd.Function`` with a ``forward``
      that calls it, ``setup_context``, ``backward``, ``jvp`` and
      ``generate_vmap_rule = True``, and apply the wrapper in
      ``torch.func`` code and wherever forward mode runs.
   #. Test the wrapper with ``gradcheck(..., check_forward_ad=True)`` and
      compare every transform you use with a composite version.

Previous pages gave an operator a backward formula with
``register_autograd`` and a batching rule with ``register_vmap``. Those are
the registrations that ``torch.autograd`` and ``torch.vmap`` use. The
``torch.func`` transforms (``grad``, ``jacrev``, ``jvp`` and the rest)
compose functions rather than record a graph, and on the releases this page
covers they cannot use what ``register_autograd`` registered.
"""

# %%
# Setting up
# ----------
#
# The transforms run on every device this run has; the one export on the
# CPU.

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import warnings

import matplotlib.pyplot as plt
import numpy as np
import torch.autograd.forward_ad as forward_ad
from matplotlib.patches import Patch
from torch import Tensor
from torch.autograd.gradcheck import GradcheckError

# For behaviour that changed between releases without a feature to test for.
RELEASE = tuple(int(part) for part in torch.__version__.split(".")[:2])

torch.manual_seed(0)
np.random.seed(0)
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")

# Forward-mode AD loads decompositions written with torch.jit.script the first
# time it runs, and torch.jit.script may warn that it is deprecated. The
# warning is about PyTorch's internals, not this page's code.
warnings.filterwarnings("ignore", message=".*torch.jit.script.* is deprecated")

# %%
# The operator: normalizing vectors
# ---------------------------------
#
# ``transforms_demo::normalize`` scales each vector along the last dimension
# to unit length, in NumPy, standing in for a kernel PyTorch cannot trace.
# Its derivative is not elementwise: moving one coordinate changes them all,
# so the Jacobian is a full matrix. For a unit vector ``y = x / |x|`` and a
# direction ``t``, the derivative is ``(t - y (y . t)) / |x|``. That matrix
# is symmetric, so the same function gives the backward (vector-Jacobian)
# and the forward (Jacobian-vector) product; ``tangent_rule`` computes it
# with PyTorch operations, which keeps it differentiable in turn.


@torch.library.custom_op("transforms_demo::normalize", mutates_args=())
def normalize(x: Tensor) -> Tensor:
    values = x.detach().cpu().numpy()
    unit = values / np.linalg.norm(values, axis=-1, keepdims=True)
    return torch.from_numpy(np.ascontiguousarray(unit)).to(x.device)


@normalize.register_fake
def _(x):
    return x.new_empty(x.shape)


def tangent_rule(x, y, t):
    return (t - y * (y * t).sum(-1, keepdim=True)) / x.norm(dim=-1, keepdim=True)


def setup_context(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], output)


def backward(ctx, grad_y):
    x, y = ctx.saved_tensors
    return tangent_rule(x, y, grad_y)


vmap_rule_calls = 0


def batched_normalize(info, in_dims, x):
    # The kernel normalizes along the last dimension, so a batch dimension
    # anywhere else just needs to be moved to the front.
    global vmap_rule_calls
    vmap_rule_calls += 1
    return normalize(x.movedim(in_dims[0], 0)), 0


normalize.register_autograd(backward, setup_context=setup_context)
normalize.register_vmap(batched_normalize)


def composite(x):
    return x / x.norm(dim=-1, keepdim=True)


# %%
# ``composite`` is the same function written with PyTorch operations; every
# ``torch.func`` transform works on it, so it is the reference below. With
# ordinary autograd and ``torch.vmap`` the registrations do their job:

x = torch.randn(5, dtype=torch.float64, requires_grad=True)
batch = torch.randn(3, 5, dtype=torch.float64)
torch.testing.assert_close(normalize(x), composite(x))
assert torch.autograd.gradcheck(normalize, (x,))
assert torch.autograd.gradgradcheck(normalize, (x,))
torch.testing.assert_close(torch.func.vmap(normalize)(batch), composite(batch))
assert vmap_rule_calls == 1
print("eager, gradcheck, gradgradcheck and vmap all agree with the composite")

# %%
# ``gradcheck`` compares the registered backward with finite differences,
# ``gradgradcheck`` does the same for its derivative, and ``vmap`` used the
# ``register_vmap`` rule.
#
# ``torch.func.grad`` raises
# --------------------------
#
# A scalar function of ``x`` through the operator, and its gradient with
# ``torch.func.grad``:

weights = torch.randn(5, dtype=torch.float64)
x = x.detach()


def score(fn, weights):
    return lambda x: (fn(x) * weights).sum()


try:
    torch.func.grad(score(normalize, weights))(x)
except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).splitlines()[0]}")
    grad_works = False
else:
    grad_works = True
    print("torch.func.grad works on the custom operator in this release")
if RELEASE <= (2, 15):
    assert not grad_works

# %%
# The message speaks of an ``autograd.Function``: ``register_autograd``
# builds one behind the scenes, and it lacks the ``setup_context`` form
# ``torch.func`` requires. Every release this page runs on, up to 2.15,
# fails this way (reported as issue #168393 against 2.8, and again since;
# :ref:`edge-func-grad-raises`),
# and so do ``vjp``, ``jacrev``, ``hessian`` and ``vmap`` of ``grad``,
# which all differentiate backwards, as the table further down shows.
#
# ``torch.func.jvp`` returns zeros
# --------------------------------
#
# Forward mode is worse. ``torch.func.jvp`` pushes a direction ``t``
# through the function and should return the derivative along it. Finite
# differences tell us what that is:

t = torch.randn(5, dtype=torch.float64)
eps = 1e-6
finite_difference = (normalize(x + eps * t) - normalize(x - eps * t)) / (2 * eps)
_, tangent = torch.func.jvp(normalize, (x,), (t,))
print(f"finite differences:   {finite_difference.numpy().round(4)}")
print(f"torch.func.jvp:       {tangent.numpy().round(4)}")
torch.testing.assert_close(finite_difference, tangent_rule(x, normalize(x), t))
assert torch.count_nonzero(tangent) == 0 and finite_difference.abs().max() > 0.1
assert torch.count_nonzero(torch.func.jacfwd(normalize)(x)) == 0
assert not hasattr(normalize, "register_jvp")

# %%
# No error, no warning, and a derivative of zero. ``custom_op`` offers no
# forward-mode registration (there is no ``register_jvp``), so the output
# comes back without a tangent, which ``jvp`` reports as zeros. ``jacfwd``,
# built on the same mechanism, returns a zero Jacobian.
#
# This is not about ``torch.func``: ordinary autograd's forward mode,
# ``torch.autograd.forward_ad``, loses the tangent the same way
# (:ref:`edge-forward-ad-no-tangent`). A dual
# tensor goes in, and the output has no tangent at all. Only when the input
# also requires grad does the call raise instead:

with forward_ad.dual_level():
    dual_output = normalize(forward_ad.make_dual(x, t))
    forward_ad_tangent = forward_ad.unpack_dual(dual_output).tangent
    print(f"torch.autograd.forward_ad: output tangent {forward_ad_tangent}")
    assert forward_ad_tangent is None
    try:
        normalize(forward_ad.make_dual(x.clone().requires_grad_(), t))
    except NotImplementedError as error:
        print(f"input requiring grad: {type(error).__name__}: {str(error)[:60]}...")
    else:
        raise AssertionError("expected forward_ad to raise on a grad-requiring input")

# %%
# The detector is ``gradcheck`` with ``check_forward_ad=True``, which
# compares forward-mode derivatives with finite differences:

try:
    torch.autograd.gradcheck(
        normalize,
        (x.clone().requires_grad_(),),
        check_forward_ad=True,
        check_backward_ad=False,
        check_undefined_grad=False,
        check_batched_grad=False,
    )
except GradcheckError as error:
    print(f"{type(error).__name__}: {str(error).splitlines()[0]}")
    assert "forward mode" in str(error).splitlines()[0]
else:
    raise AssertionError("expected gradcheck to catch the zero forward derivative")

# %%
# The fix: an ``autograd.Function`` around the operator
# -----------------------------------------------------
#
# ``torch.func`` supports ``torch.autograd.Function`` subclasses written in
# the form with a separate ``setup_context``. The wrapper's ``forward``
# calls the custom operator, so ``torch.export`` still sees one opaque node
# (checked below). ``backward`` serves reverse mode, ``jvp`` forward mode,
# and ``generate_vmap_rule = True`` lets ``vmap`` run ``forward`` batched,
# where the operator's own ``register_vmap`` rule takes over.
# ``ctx.save_for_forward`` keeps tensors for ``jvp`` as
# ``save_for_backward`` does for ``backward``.
#
# First without ``jvp``, to see forward mode fail clearly now:


class NormalizeBackwardOnly(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return normalize(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0], output)
        ctx.save_for_forward(inputs[0], output)

    @staticmethod
    def backward(ctx, grad_y):
        x, y = ctx.saved_tensors
        return tangent_rule(x, y, grad_y)


try:
    torch.func.jvp(NormalizeBackwardOnly.apply, (x,), (t,))
except NotImplementedError as error:
    print(f"{type(error).__name__}: {str(error).splitlines()[0]}")
else:
    raise AssertionError("expected jvp to ask for a jvp staticmethod")

# %%
# An explicit ``NotImplementedError`` instead of zeros. Adding the
# ``jvp`` staticmethod completes the wrapper:


class Normalize(NormalizeBackwardOnly):
    @staticmethod
    def jvp(ctx, t):
        x, y = ctx.saved_tensors
        return tangent_rule(x, y, t)


assert torch.autograd.gradcheck(
    Normalize.apply, (x.clone().requires_grad_(),), check_forward_ad=True
)
with forward_ad.dual_level():
    dual_output = Normalize.apply(forward_ad.make_dual(x, t))
    wrapper_tangent = forward_ad.unpack_dual(dual_output).tangent
torch.testing.assert_close(wrapper_tangent, finite_difference)


class Scale(torch.nn.Module):
    def forward(self, x):
        return 2 * Normalize.apply(x)


wrapped = torch.export.export(Scale(), (x,), strict=False)
called = [str(n.target) for n in wrapped.graph.nodes if n.op == "call_function"]
print(f"exported graph of the wrapper: {called}")
assert "transforms_demo.normalize.default" in called

# %%
# ``gradcheck`` now passes in both modes, ``torch.autograd.forward_ad``
# returns the finite-difference tangent, and the exported graph still holds
# the operator as one node. Next, every transform, on the bare
# operator and on the wrapper, against the composite; on a CUDA machine the
# wrapper is checked on the GPU too. ``outcomes`` records, per transform,
# whether each version was correct, raised, or returned a wrong answer.


def transforms(fn, x, t, batch, weights):
    return {
        "grad": lambda: torch.func.grad(score(fn, weights))(x),
        "vjp": lambda: torch.func.vjp(fn, x)[1](weights)[0],
        "jacrev": lambda: torch.func.jacrev(fn)(x),
        "hessian": lambda: torch.func.hessian(score(fn, weights))(x),
        "vmap": lambda: torch.func.vmap(fn)(batch),
        "vmap(grad)": lambda: torch.func.vmap(torch.func.grad(score(fn, weights)))(
            batch
        ),
        "jvp": lambda: torch.func.jvp(fn, (x,), (t,))[1],
        "jacfwd": lambda: torch.func.jacfwd(fn)(x),
    }


def outcome(run, reference):
    try:
        result = run()
    except (RuntimeError, NotImplementedError):
        return "raises"
    return "correct" if torch.allclose(result, reference) else "wrong"


outcomes = {}
for device in devices:
    args = [tensor.to(device) for tensor in (x, t, batch, weights)]
    references = {name: run() for name, run in transforms(composite, *args).items()}
    for label, fn in [("custom_op", normalize), ("autograd.Function", Normalize.apply)]:
        for name, run in transforms(fn, *args).items():
            outcomes[device, label, name] = outcome(run, references[name])

for name in transforms(composite, x, t, batch, weights):
    row = [outcomes["cpu", label, name] for label in ("custom_op", "autograd.Function")]
    print(f"{name:>11}: custom_op {row[0]:<8} autograd.Function {row[1]}")
assert all(
    result == "correct"
    for (device, label, name), result in outcomes.items()
    if label == "autograd.Function"
)
assert {outcomes["cpu", "custom_op", name] for name in ("jvp", "jacfwd")} == {"wrong"}
assert outcomes["cpu", "custom_op", "vmap"] == "correct"
backward_mode = ("grad", "vjp", "jacrev", "hessian", "vmap(grad)")
if RELEASE <= (2, 15):
    assert {outcomes["cpu", "custom_op", name] for name in backward_mode} == {"raises"}
rule_calls_before = vmap_rule_calls
torch.func.vmap(Normalize.apply)(batch)
assert vmap_rule_calls == rule_calls_before + 1

# %%
# The wrapper gets every transform right, on every device exercised, and
# ``vmap`` of the wrapper went through the operator's ``register_vmap``
# rule (the last check counts its calls). The bare operator gets only
# ``vmap`` right; the backward-mode transforms raise and the forward-mode
# ones are wrong. The figure sums up the table on this release.

names = list(transforms(composite, x, t, batch, weights))
labels = ["custom_op", "autograd.Function"]
palette = {"correct": "#59a14f", "raises": "#f28e2b", "wrong": "#e15759"}
shown = {"correct": "correct", "raises": "raises", "wrong": "wrong, no error"}
fig, ax = plt.subplots(figsize=(6.2, 3.6), layout="constrained")
for column, label in enumerate(labels):
    for row, name in enumerate(names):
        result = outcomes["cpu", label, name]
        ax.add_patch(
            plt.Rectangle((column, -row - 1), 1, 1, color=palette[result], ec="white")
        )
        ax.text(column + 0.5, -row - 0.5, shown[result], ha="center", va="center")
ax.set_xlim(0, 2)
ax.set_ylim(-len(names), 0)
ax.set_xticks([0.5, 1.5], ["bare custom_op", "custom_op inside\nautograd.Function"])
ax.xaxis.tick_top()
ax.set_yticks(
    [-row - 0.5 for row in range(len(names))], [f"torch.func.{n}" for n in names]
)
ax.tick_params(length=0)
for side in ax.spines.values():
    side.set_visible(False)
fig.legend(
    handles=[Patch(color=color, label=shown[key]) for key, color in palette.items()],
    loc="outside lower center",
    ncols=3,
    fontsize=8,
)
fig.suptitle(
    f"torch.func on transforms_demo::normalize, PyTorch {torch.__version__}", size=10
)
plt.show()

# %%
# You need the wrapper in ``torch.func`` code and wherever forward mode runs:
# ``torch.func.jvp`` and ``jacfwd``, ``torch.autograd.forward_ad``, and
# ``gradcheck(check_forward_ad=True)``. Elsewhere, call the custom operator
# directly: ``register_autograd`` and ``register_vmap`` serve reverse-mode
# ``torch.autograd`` and ``torch.vmap``, as the first checks showed.
#
# Conclusion
# ----------
#
# On the releases this page covers, a custom operator takes part in
# ``torch.vmap`` and ``torch.func.vmap`` through ``register_vmap``, and in
# reverse-mode autograd through ``register_autograd``, but not in the other
# ``torch.func`` transforms, nor in forward mode anywhere: the reverse-mode
# transforms raise, and ``jvp``, ``jacfwd`` and ``torch.autograd.forward_ad``
# silently lose the derivative. For ``torch.func`` code and forward mode,
# call the operator through an ``autograd.Function`` with
# ``setup_context``, ``backward``, ``jvp`` and ``generate_vmap_rule``, and
# check it with ``gradcheck(check_forward_ad=True)``.
#
# Previous: :ref:`sphx_glr_tutorials_custom_ops_in_export.py`, which also
# shows ``torch.export.draft_export`` for operators without a fake kernel.
# Next, :ref:`sphx_glr_tutorials_custom_op_dtensor.py` runs a custom operator
# on tensors sharded across processes.
