"""Running the operator
--------------------
A ``Run`` holds the operator, the settings and what was learned about it.
``caller`` turns the operator into a function of the sample's tensors
alone, the other arguments fixed: that is what ``torch.compile``,
``torch.export`` and ``vmap`` receive, so a ``torch.dtype`` argument is a
constant of the exported program rather than one of its inputs.
``observed`` is what a caller sees after a call, a write into an argument
included, and ``same`` compares two of those, naming what differs.

The checks
----------
Each check takes the run and a variant. It raises on a failure, returns a
note to pass with, or returns an ``Outcome`` for any other verdict.

The gradient checks use only the arguments a backward reaches, which
``gradient_status`` finds once per sample and device: an argument whose
gradient comes back ``None`` is a limitation of its own, not a row of
``gradcheck`` (finite differences would see it move while the backward
says nothing). If the operator refuses a perturbed input, the argument
holds indices: declare it in ``nondifferentiable``. An error in the double
backward or the forward-mode pass is a limitation; a wrong number is a
failure.
"""

import contextlib
import dataclasses
import os
import re
import tempfile
import warnings

import torch
from torch import Tensor
from torch.autograd.gradcheck import GradcheckError

from operator_checker.report import CHECKS, cause, deepest, quiet
from operator_checker.samples import Slot
from operator_checker.variants import grown_samples, refusal


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


@dataclasses.dataclass
class Outcome:
    outcome: str
    detail: str


class Refused(Exception):
    """The eager kernel refused an input that a check derived."""


def check_opcheck(run, variant, test):
    """One of ``opcheck``'s four tests: ``{test: its error or "SUCCESS"}``."""
    sample = variant.args()
    loose = {} if run.exact and not run.nondet_tol else run.tolerances(variant.dtype)
    with quiet():
        return torch.library.opcheck(
            run.op,
            sample.args,
            sample.kwargs,
            test_utils=(test,),
            raise_exception=False,
            **loose,
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
