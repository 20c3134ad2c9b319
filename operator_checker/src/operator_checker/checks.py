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
holds indices: declare it in ``nondifferentiable``. ``gradcheck`` sees the
differentiable outputs alone (float and complex), so an integer output
beside them is no false alarm.

Refusals and failures
---------------------
``gradgradcheck``, forward-mode AD and ``vmap`` may be refused by design:
no double backward (a backward outside autograd, ``once_differentiable``,
one in NumPy, a kernel that says it is not supported), no forward-mode
formula, no batching rule. Those are limitations, and only those: any other
error is a failure, with its fix, and so is any error raised by a ``vmap``
rule the author registered. A wrong number is always a failure.

What the checker cannot do
--------------------------
Some inputs defeat a step of the checker rather than the operator: float8
tensors cannot be drawn at random, nor compared within a tolerance. Those
steps work in a wider dtype (float8 widened to float32 is exact); a step
that still cannot run raises ``CheckerCannot``, a ``not applicable`` row
that names what the checker could not do, never a failure.
"""

import dataclasses
import os
import re
import tempfile
import types
import warnings

import torch
from torch import Tensor
from torch.autograd.gradcheck import GradcheckError

from operator_checker import _torch
from operator_checker.errors import cause, deepest, quiet
from operator_checker.samples import Slot
from operator_checker.variants import COMPUTING, computable, grown_samples, refusal


class Failed(AssertionError):
    """A failure the check words itself (a broken rule, a double backward that
    raises): the row's detail is its message, whole."""


class CheckerCannot(Exception):
    """A step of the checker cannot run on this input (a dtype it cannot
    draw or compare, say): a ``not applicable`` row, never the operator's."""


@dataclasses.dataclass
class Run:
    op: object  # an OpOverload
    exact: bool
    nondet_tol: float
    gradients: dict = dataclasses.field(default_factory=dict)  # see gradient_status
    capture: bool = False  # Dynamo's capture settings for data-dependent sizes
    # What PyTorch's deprecated autograd fallback warned, if eager gradients
    # came from it (see gradient_status).
    fallback: str = ""
    # Per sample: whether two calls on it agree (see core.unwritten_memory).
    deterministic: dict = dataclasses.field(default_factory=dict)
    # Per sample and device: whether the gradient checks ran in float64.
    float64_gradients: dict = dataclasses.field(default_factory=dict)
    # (sample index, check) that passed on the sample as given.
    passed_as_given: set = dataclasses.field(default_factory=set)

    def call(self, sample):
        return self.op(*sample.args, **sample.kwargs)

    def caller(self, sample):
        template = sample.with_tensors([Slot(i) for i in range(len(sample.tensors()))])
        op = self.op

        def function(*tensors):
            args = [filled(value, tensors) for value in template.args]
            kwargs = {k: filled(v, tensors) for k, v in template.kwargs.items()}
            return op(*args, **kwargs)

        # A code object of its own: Dynamo keeps its compilations, and counts
        # recompilations against its limit, per code object, so each caller
        # compiles afresh without torch.compiler.reset(), which would discard
        # what the rest of the process compiled.
        code = function.__code__.replace()
        return types.FunctionType(
            code, function.__globals__, function.__name__, None, function.__closure__
        )

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


def differentiable(t):
    """Whether gradients can flow through ``t``: it requires grad, in a dtype
    autograd computes in (not float8, not integers)."""
    return t.requires_grad and t.dtype in COMPUTING


def observed(outputs, sample):
    seen = {f"output {i}": t.detach() for i, t in enumerate(flat_tensors(outputs))}
    for t, name in zip(*sample.named_tensors(), strict=True):
        seen[f"{name} after the call"] = t.detach()
    return seen


def same(actual, expected, tolerances, what=""):
    """Compare what two runs observed; float8 and the other storage-only
    dtypes are compared in float32, where they are exact."""
    if list(actual) != list(expected):
        raise AssertionError(f"{what}gives {list(actual)}, not {list(expected)}")
    for label, value in expected.items():
        if actual[label].dtype != value.dtype:
            raise AssertionError(
                f"{what}{label} differs: dtype {actual[label].dtype}, not {value.dtype}"
            )
        try:
            torch.testing.assert_close(
                computable(actual[label]), computable(value), equal_nan=True,
                **tolerances,
            )  # fmt: skip
        except AssertionError as error:
            message = " ".join(str(error).split("\n")[:3])
            raise AssertionError(f"{what}{label} differs: {message}") from None
        except (TypeError, RuntimeError, NotImplementedError) as error:
            raise CheckerCannot(
                f"cannot compare {label} ({value.dtype}): {cause(error)}"
            ) from None


def incoming(outputs):
    """Fixed random gradients for ``outputs``, drawn in a dtype that has a
    random generator and converted to each output's."""
    generator = torch.Generator().manual_seed(0)
    return [
        torch.randn(
            o.shape,
            generator=generator,
            dtype=o.dtype if o.dtype in COMPUTING else torch.float32,
        ).to(o.device, o.dtype)
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
    reaching = [t for t in flat_tensors(outputs) if differentiable(t)]
    if inputs and reaching and isinstance(run.backward_reaches(variant), set):
        found = torch.autograd.grad(
            reaching,
            [t for t, _ in inputs],
            incoming(reaching),
            allow_unused=True,
        )
        for (t, name), g in zip(inputs, found, strict=True):
            grads[f"gradient of {name}"] = torch.zeros_like(t) if g is None else g
    return seen, grads


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
            outputs = run.call(sample.with_tensors(filled_in))
        except Exception as error:
            raise Refused(cause(error)) from error
        # Only what gradients flow through: slow-mode gradcheck fails on an
        # integer output before a floating one, a false alarm.
        return tuple(t for t in flat_tensors(outputs) if floating(t))

    return function, [t for t, c in zip(tensors, chosen, strict=True) if c]


def floating(t):
    return (t.is_floating_point() or t.is_complex()) and t.dtype in COMPUTING


@dataclasses.dataclass
class Differences:
    """Finite differences fit for a kernel: ``gradcheck``'s defaults where it
    computes in float64, or float32's step and tolerances, and why."""

    eps: float = 1e-6
    atol: float = 1e-5
    rtol: float = 1e-3
    note: str = ""

    def gradcheck(self):
        if not self.note:
            return {}
        return {"eps": self.eps, "atol": self.atol, "rtol": self.rtol}


# float32's: a step the kernel's rounding cannot swamp, tolerances it leaves.
FLOAT32_DIFFERENCES = dict(eps=1e-3, atol=1e-3, rtol=1e-2)


def differences(run, variant, function, inputs):
    """How finite differences can judge ``function`` on ``variant``, or why
    they cannot (a string): outputs that an argument keeps out of float64 say
    nothing precise; a kernel that computes in float32 inside (its outputs do
    not move when the inputs move by 1e-12, but do by 1e-4), or a float32
    variant (the kernel refuses float64), is judged with float32's step and
    tolerances, and the row says so."""
    with torch.no_grad(), quiet():
        outputs = function(*(t.detach() for t in inputs))
    if not outputs:
        return "no floating-point output to differentiate"
    if variant.dtype == torch.float32:
        return Differences(
            **FLOAT32_DIFFERENCES,
            note="in float32, with its step and tolerances (the kernel refuses "
            "float64 or computes in less)",
        )
    coarse = sorted({str(t.dtype) for t in outputs}
                    - {"torch.float64", "torch.complex128"})  # fmt: skip
    if coarse:
        # The float32 variant stands in (see core.run_variant).
        run.float64_gradients[(variant.index, variant.device)] = False
        return (
            f"its outputs are {', '.join(coarse)} although its inputs are float64 "
            "(an argument fixes their dtype): finite differences in that "
            "precision cannot judge a gradient"
        )
    if not moves(function, inputs, 1e-12) and moves(function, inputs, 1e-4):
        return Differences(
            **FLOAT32_DIFFERENCES,
            note="with float32's step and tolerances: the kernel computes in "
            "less than float64 inside (its outputs do not move when its inputs "
            "move by 1e-12)",
        )
    return Differences()


def moves(function, inputs, scale):
    """Whether some output changes when every input moves by ``scale``."""
    with torch.no_grad(), quiet():
        before = function(*(t.detach() for t in inputs))
        after = function(*(t.detach() * (1 + scale) + scale for t in inputs))
    return any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))


def check_gradcheck(run, variant):
    function, inputs = differentiable_function(run, variant)
    judged = differences(run, variant, function, inputs)
    if isinstance(judged, str):
        return Outcome("not applicable", judged)
    torch.autograd.gradcheck(
        function, inputs, nondet_tol=run.nondet_tol, **judged.gradcheck()
    )
    return judged.note or None


# Errors that mean "no double backward, by design", not a broken one.
NO_DOUBLE_BACKWARD = re.compile(
    r"double backwards?\b.*\bnot (?:supported|implemented)"
    r"|not (?:supported|implemented)\b.*double backward"
    r"|no autograd formula|autograd kernel was not registered"
    r"|does not require grad and does not have a grad_fn"
    r"|numpy\(\) on Tensor that requires grad|once_differentiable"
    r"|derivative for .* is not implemented"
    r"|(?:don't|doesn't|do not|does not) support automatic differentiation",
    re.I,
)


# What PyTorch's deprecated autograd fallback warns when a backward runs
# through an operator that registered none.
FALLBACK = re.compile(r"autograd kernel was not registered to the Autograd key")


def fallback_warning(caught):
    """The first line of the fallback's warning among ``caught``, or ''."""
    said = [str(w.message) for w in caught if FALLBACK.search(str(w.message))]
    return said[0].split(". ")[0] if said else ""


def check_gradgradcheck(run, variant):
    function, inputs = differentiable_function(run, variant)
    judged = differences(run, variant, function, inputs)
    if isinstance(judged, str):
        return Outcome("not applicable", judged)
    caught = []
    try:
        refused = second_order_refused(function, inputs)
        if refused:
            return Outcome("limitation", f"no double backward: {refused}")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.autograd.gradgradcheck(
                function, inputs, nondet_tol=run.nondet_tol, **judged.gradcheck()
            )
    except Exception as error:
        inner = deepest(error)
        fallback = fallback_warning(caught)
        if isinstance(inner, GradcheckError) and fallback:
            return Outcome(
                "limitation",
                "no double backward: the backward calls an operator that "
                "registered no backward of its own, so PyTorch's deprecated "
                f"autograd fallback stands in and warns ({fallback}), and the "
                "second derivative comes out wrong, silently",
            )
        if isinstance(inner, (GradcheckError, Refused)):
            raise  # a wrong second derivative, or a refused input
        detail = cause(error)
        if isinstance(inner, NotImplementedError) or NO_DOUBLE_BACKWARD.search(detail):
            return Outcome("limitation", f"no double backward: {detail}")
        raise Failed(f"the double backward raises: {detail}") from None
    return judged.note or None


def second_order_refused(function, inputs):
    """Why the backward cannot be differentiated, when its result carries no
    graph although the incoming gradient requires grad (``once_differentiable``,
    a backward computed outside autograd); None when it can."""
    inputs = [t.detach().requires_grad_() for t in inputs]
    outputs = [t for t in function(*inputs) if differentiable(t)]
    if not outputs:
        return None
    grads_in = [g.requires_grad_() for g in incoming(outputs)]
    grads = torch.autograd.grad(
        outputs, inputs, grads_in, create_graph=True, allow_unused=True
    )
    found = [g for g in grads if g is not None]
    if found and not any(g.requires_grad for g in found):
        return (
            "the backward's result carries no graph (once_differentiable, or a "
            "backward computed outside autograd), so the second derivative is "
            "silently zero"
        )
    return None


# Errors that mean "no forward-mode formula", not a broken one.
NO_FORWARD_AD = re.compile(
    r"forward AD|forward-mode|forward mode|jvp|not (?:supported|implemented)", re.I
)
ZERO_TANGENTS = (
    "no forward-mode formula, and no error: torch.func.jvp, jacfwd and "
    "forward_ad through this operator return zero tangents, silently"
)


def check_forward_ad(run, variant):
    """Forward-mode derivatives against central finite differences."""
    function, inputs = differentiable_function(run, variant)
    judged = differences(run, variant, function, inputs)
    if isinstance(judged, str):
        return Outcome("not applicable", judged)
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
                if floating(u.primal)
            ]
    except Exception as error:
        detail = cause(error)
        if isinstance(deepest(error), NotImplementedError) or NO_FORWARD_AD.search(
            detail
        ):
            return Outcome("limitation", f"no forward-mode AD: {detail}")
        raise Failed(f"forward-mode AD raises: {detail}") from None
    eps = judged.eps
    with torch.no_grad():
        plus = flat_tensors(
            function(*(t + eps * d for t, d in zip(inputs, directions, strict=True)))
        )
        minus = flat_tensors(
            function(*(t - eps * d for t, d in zip(inputs, directions, strict=True)))
        )
    numerical = [(p - m) / (2 * eps) for p, m in zip(plus, minus, strict=True)]
    slope = any(n.abs().max() > 1e-6 for n in numerical if n.numel())
    if slope and not any(t.any() for t in tangents):
        return Outcome("limitation", ZERO_TANGENTS)
    torch.testing.assert_close(
        tangents, numerical, rtol=max(judged.rtol, 1e-3), atol=judged.atol
    )
    return judged.note or None


def has_vmap_rule(op):
    """Whether the author registered a batching rule: ``register_vmap``, or a
    kernel at ``FuncTorchBatched``."""
    return _torch.has_kernel(_torch.qualified_name(op), "FuncTorchBatched")


def check_vmap(run, variant):
    """``vmap`` over two copies of the sample against a loop over them; the
    second copy's floating-point values halved, where the kernel accepts that."""

    def halved():
        return variant.args().map(
            lambda v, n: (
                v * 0.5
                if isinstance(v, Tensor)
                and v.dtype in COMPUTING
                and n not in variant.written | variant.indices
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
            detail = cause(error)
            if has_vmap_rule(run.op) and not isinstance(
                deepest(error), NotImplementedError
            ):
                raise Failed(f"the registered vmap rule raises: {detail}") from None
            return Outcome("limitation", f"vmap fails: {detail}")
    same(
        observed(outputs, sample.with_tensors(stacked)),
        expected,
        run.tolerances(variant.dtype),
        "under vmap, ",
    )
    if any("batching rule" in str(w.message) for w in caught):
        return "no batching rule: vmap calls the operator once per example"


def compare_compiled(run, variant, dynamic, backend="inductor"):
    compiled = torch.compile(
        run.caller(variant.args()), fullgraph=True, dynamic=dynamic, backend=backend
    )
    reference = variant.args()
    expected = outcome_with_gradients(run, variant, run.caller(reference), reference)
    sample = variant.args()
    with _torch.capture_dynamic_output_shapes(run.capture):
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
        if refused and not run.capture:
            run.capture = True
            compare_compiled(run, variant, dynamic)  # raises what remains
            return Outcome(
                "limitation",
                "torch.compile(fullgraph=True) refuses an operator whose output "
                "size depends on the data on this release, unless Dynamo's "
                "capture_dynamic_output_shape_ops is set; with it, the checks pass",
            )
        if isinstance(deepest(error), AssertionError) or refused:
            raise  # a result that differs, or a size the fake kernel got wrong
        try:
            compare_compiled(run, variant, dynamic, backend="aot_eager")
        except Exception:
            raise error from None
        return Outcome(
            "limitation",
            f"Inductor fails, not the operator: {cause(error)}. The same graphs "
            "run without Inductor's code generation (backend='aot_eager') and "
            "give the eager results: a bug of PyTorch's compiler to report "
            "upstream, or compile with another backend",
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


def recorded_outputs(program):
    """The metadata the exported program records for its outputs (what
    AOTInductor trusts), in order; None for an output that is None."""
    from torch.export.graph_signature import OutputKind

    nodes = program.graph.output_node().args[0]
    kinds = [spec.kind for spec in program.graph_signature.output_specs]
    found = []
    for node, kind in zip(nodes, kinds, strict=True):
        if kind == OutputKind.USER_OUTPUT:
            found.append(node.meta.get("val") if node is not None else None)
    return found


def same_metadata(program, run, variant):
    """The sizes, strides, dtypes and devices the program records for its
    outputs against the eager kernel's; a size the data decides is left out."""
    real = flat_tensors(run.call(variant.args()))
    recorded = [t for t in recorded_outputs(program) if isinstance(t, Tensor)]
    if len(real) != len(recorded):
        raise AssertionError(
            f"the exported program records {len(recorded)} tensor outputs, the "
            f"kernel returns {len(real)}"
        )
    for i, (fake, out) in enumerate(zip(recorded, real, strict=True)):
        says = f"the exported program says output {i}"
        sizes = [known(s, o) for s, o in zip(fake.shape, out.shape, strict=False)]
        if fake.dim() != out.dim() or sizes != list(out.shape):
            shown = [s if isinstance(s, int) else "?" for s in fake.shape]
            raise AssertionError(
                f"{says} has size {shown}, the kernel returns {list(out.shape)}"
            )
        if (fake.dtype, fake.device.type) != (out.dtype, out.device.type):
            raise AssertionError(
                f"{says} is {fake.dtype} on {fake.device.type}, the kernel "
                f"returns {out.dtype} on {out.device.type}"
            )
        # Strides of a dimension of size 0 or 1, or of an empty tensor, say
        # nothing about where an element lies.
        strides = zip(out.shape, fake.stride(), out.stride(), strict=True)
        if out.numel() and any(n > 1 and known(a, b) != b for n, a, b in strides):
            shown = [s if isinstance(s, int) else "?" for s in fake.stride()]
            raise AssertionError(
                f"{says} has strides {shown}, the kernel returns {list(out.stride())}"
            )


def known(recorded, real):
    """A recorded size or stride, or the real one where the data decides it."""
    return recorded if isinstance(recorded, int) else real


def check_export(run, variant):
    program = exported(run, variant)
    same_metadata(program, run, variant)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "operator.pt2")
        torch.export.save(program, path)
        compare_program(run, variant, torch.export.load(path).module())


def check_export_decomposed(run, variant):
    program = exported(run, variant)
    same_metadata(program, run, variant)
    compare_program(run, variant, program.run_decompositions().module())


def check_recompiles(run, variant):
    """One dynamic compilation, then two larger sizes that must not compile
    again; ``fail_on_recompile`` names the guard that failed."""
    grown = grown_samples(run, variant.args(grad=False), variant.indices)
    if isinstance(grown, str):
        return Outcome("not applicable", grown)
    compiled = torch.compile(run.caller(grown[0]), fullgraph=True, dynamic=True)
    sizes = " -> ".join("x".join(map(str, g.tensors()[0].shape)) for g in grown)
    with _torch.capture_dynamic_output_shapes(run.capture):
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
    "forward-ad": check_forward_ad,
    "vmap": check_vmap,
    "compiled": check_compiled,
    "compiled-dynamic": check_compiled_dynamic,
    "export-load": check_export,
    "export-decomposed": check_export_decomposed,
    "recompiles": check_recompiles,
}
