"""Verdicts
--------
``gradient_status`` runs one backward per sample and device, with
gradients for every floating-point argument, and records which arguments
the backward reaches, and whether they come only from PyTorch's deprecated
autograd fallback (it warns). Without a backward, compiling on inputs that
require grad fails although eager mode runs; the checker reports that as a
limitation with its remedy rather than as a failure or a skip. ``verdict``
turns what a check returned or raised into a row: an error of opcheck's own
harness, or a step of the checker that cannot run on the input, is ``not
applicable``, never the operator's failure.

Running every check
-------------------
``plan`` lists the checks of a variant. ``check_operator`` binds each
sample, finds the arguments a call writes (declared or not), makes the
variants, and runs the plan of each variant that the eager kernel accepts
the same way twice: a kernel whose two calls on one input disagree reads
memory it never wrote, and that is its row. A refused variant is one row: a
failure for the sample as given, a limitation for a layout, not applicable
otherwise. Every compilation is of a function with a code object of its own
(``Run.caller``): with ``fullgraph=True`` Dynamo's limit of eight
recompilations per code object raises instead of falling back to eager
mode, which would fail later variants for no fault of the operator.
"""

import difflib
import re
import time
import warnings

import torch

from operator_checker.checks import (
    CHECK_FUNCTIONS,
    GRADIENT_CHECKS,
    ONCE_PER_SAMPLE,
    OPCHECK_TESTS,
    CheckerCannot,
    Failed,
    Outcome,
    Refused,
    Run,
    check_opcheck,
    differentiable,
    fallback_warning,
    flat_tensors,
    incoming,
    observed,
)
from operator_checker.report import (
    CHECKS,
    Report,
    Row,
    cause,
    check_id,
    deepest,
    left_out,
    quiet,
    see_for,
)
from operator_checker.samples import as_sample, is_tensor, overload_for
from operator_checker.variants import (
    COMPUTING,
    DTYPES,
    LAYOUTS,
    Variant,
    changes,
    convert,
    dtype_name,
    empty_sizes,
    first_row_everywhere,
    identical,
    index_arguments,
    refusal,
    resized,
)

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


def gradient_status(run, variant, report, steps):
    sample = variant.args(grad=True)
    tensors, names = sample.named_tensors()
    inputs = [(t, n) for t, n in zip(tensors, names, strict=True) if t.requires_grad]
    if not inputs:
        return Outcome("not applicable", no_gradient_reason(variant, names))
    said = refusal(run, sample)
    if said is not None:
        return Outcome("limitation", f"refuses inputs that require grad: {said}")
    with quiet(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outputs = [t for t in flat_tensors(run.call(sample)) if differentiable(t)]
        if not outputs:
            return Outcome("not applicable", "no output requires grad")
        try:
            grads = torch.autograd.grad(
                outputs, [t for t, _ in inputs], incoming(outputs), allow_unused=True
            )
        except Exception as error:
            detail = cause(error)
            if NO_BACKWARD.search(detail):
                return Outcome("limitation", f"no backward: {detail}")
            return Outcome("failed", f"the backward raises: {detail}")
    run.fallback = fallback_warning(caught)
    for (_, name), g in zip(inputs, grads, strict=True):
        if g is None:
            said = (
                f"{name} gets no gradient: the backward returns None for it, so "
                "training it silently learns nothing"
            )
            if run.fallback:
                said = (
                    f"{name} gets no gradient: the operator registered no "
                    "backward, and PyTorch's deprecated autograd fallback gives "
                    f"None and warns ({run.fallback}), so training it silently "
                    "learns nothing"
                )
            where, see = f"#{variant.index} {variant.device}", see_for("gradients", "")
            step = ("no gradient", variant.index, variant.device, name)
            if steps.wanted("gradients", step, where):
                at = {"sample": variant.index, "device": variant.device}
                report.add(Row("gradients", where, "limitation", said, see, 2, at))
    reached = {n for (t, n), g in zip(inputs, grads, strict=True) if g is not None}
    return reached or Outcome("limitation", NO_GRADIENT)


NO_GRADIENT = "no argument gets a gradient"


def no_gradient_reason(variant, names):
    """Why no argument of ``variant`` is differentiated, naming the floats
    the checker leaves alone."""
    left = [n for n in dict.fromkeys(names) if n not in variant.differentiable]
    written = [n for n in left if n in variant.written]
    if written:
        return (
            f"{', '.join(written)} {'is' if len(written) == 1 else 'are'} written "
            "by the call (see test_schema for a write mutates_args does not "
            "declare), so not differentiated"
        )
    if left:
        return f"{', '.join(left)}: declared nondifferentiable or indices"
    return "no floating-point argument to differentiate"


def verdict(run, variant, check, result, limitations):
    if isinstance(result, Failed):  # the check says what failed, in full
        see = see_for(check, str(result))
        return variant_row(variant, check, "failed", str(result), see)
    if result is None or isinstance(result, str):
        if variant.given:
            run.passed_as_given.add((variant.index, check))
        return variant_row(variant, check, "passed", result or "")
    if isinstance(result, Outcome):
        outcome, detail = result.outcome, result.detail
    elif isinstance(result, CheckerCannot) or isinstance(
        deepest(result), CheckerCannot
    ):
        outcome = "not applicable"
        detail = f"the checker cannot run this check here: {cause(result)}"
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
        elif check in OPCHECK_TESTS and harness_error(run, result):
            outcome = "not applicable"
            detail = f"opcheck's own harness fails here, outside the operator: {detail}"
        elif check == "test_autograd_registration" and run.fallback:
            detail = (
                f"{detail} Eager gradients come only from PyTorch's deprecated "
                f"autograd fallback, which warns: {run.fallback}"
            )
    if check in limitations and outcome in ("failed", "limitation"):
        outcome, detail = "limitation", f"declared: {limitations[check]} ({detail})"
    see = see_for(check, detail) if outcome in ("failed", "limitation") else ""
    if outcome == "failed" and variant.grad and run.fallback and "gradient" in detail:
        detail += (
            "; eager gradients come only from PyTorch's deprecated autograd "
            "fallback, which compiled and exported code do not have"
        )
        see = see_for("gradients", detail)
    elif (
        outcome == "failed"
        and rank(variant) == 1
        and check != "layout"
        and (variant.index, check) in run.passed_as_given
        and GENERAL in see
    ):
        # Nothing in the error names a cause, and the same check passed on
        # the sample as given: the layout is what changed.
        detail += f" (it passes on the sample as given: {variant.layout} fails)"
        see = see_for("layout", detail)
    if variant.given and outcome == "passed":
        run.passed_as_given.add((variant.index, check))
    return variant_row(variant, check, outcome, detail, see)


# The section a failure is sent to when nothing in it names a cause.
GENERAL = "Which check catches which mistake"


def variant_row(variant, check, outcome, detail, see=""):
    """A row about ``variant``: its label, rank and fields."""
    layout, dtype = variant.name.split()[1], dtype_name(variant.dtype)
    at = {"sample": variant.index, "layout": layout, "dtype": dtype,
          "device": variant.device, "grad": variant.grad}  # fmt: skip
    return Row(check, variant.name, outcome, detail, see, rank(variant), at)


def rank(variant):
    """How telling a failure on ``variant`` is, from the most: the sample as
    given, its other layouts, gradients, other dtypes, expanded, empty."""
    if variant.given:
        return 0
    if variant.layout in ("permuted", "strided", "offset"):
        return 1
    if variant.layout == "contiguous" and (variant.grad or variant.dtype is None):
        return 2
    return {"contiguous": 3, "expanded": 4, "empty": 5}.get(variant.layout, 6)


# opcheck's own code: its tests, and the mode its test_schema runs under.
HARNESS = ("torch/testing/_internal/optests/", "torch/_subclasses/schema_check_mode.py")
# What only passes a call through: the frame that raised is further in.
PLUMBING = (
    "torch/autograd/",
    "torch/_tensor.py",
    "torch/overrides.py",
    "torch/utils/_pytree.py",
    "torch/utils/_python_dispatch.py",
    "torch/_compile.py",
    "torch/_dynamo/eval_frame.py",
    "torch/_ops.py",
    "torch/testing/_comparison.py",
)


def harness_error(run, error):
    """Whether opcheck's error came from its harness, not from the operator:
    the innermost frame that does more than pass the call through is
    opcheck's own code (a comparison or a sum it has no float8 kernel for,
    a gradient it asks of an output that has none), not a call of this
    operator nor its kernel."""
    inner = deepest(error)
    if isinstance(inner, AssertionError):
        return False  # opcheck's own verdicts are assertions
    frames = []
    traceback = inner.__traceback__
    while traceback is not None:
        frames.append(traceback.tb_frame)
        traceback = traceback.tb_next
    for frame in reversed(frames):
        path = frame.f_code.co_filename.replace("\\", "/")
        if calls_operator(frame, run.op):
            return False  # the kernel raised
        if any(part in path for part in HARNESS):
            return True
        if not any(part in path for part in PLUMBING):
            return False  # the operator's code, or a subsystem it runs under
    return False


def calls_operator(frame, op):
    """Whether ``frame`` is a call of ``op`` (its OpOverload or its packet)."""
    owner = frame.f_locals.get("self")
    if isinstance(owner, torch._ops.OpOverload):
        return owner._schema.name == op._schema.name
    if isinstance(owner, torch._ops.OpOverloadPacket):
        return owner._qualified_op_name == op._schema.name
    return False


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
        checks.append("compiled-dynamic")
    if not variant.grad:
        checks += ["export-load", "export-decomposed"]
    if variant.given:
        checks.append("recompiles")
    return checks


def variants_of(
    run, index, sample, devices, dtypes, written, nondifferentiable, steps, indices
):
    """The variants of one sample, and rows for those that cannot be made."""
    tensors, names = sample.named_tensors()
    floats = [t.dtype for t in tensors if t.is_floating_point()]
    own = floats[0] if floats else None  # the sample is checked as given
    differentiable = frozenset(
        n
        for n in names
        if n not in written and n not in nondifferentiable and n not in indices
    )
    own_type = tensors[0].device.type if tensors else "cpu"
    types = [torch.device(device).type for device in devices]
    home_device = devices[types.index(own_type)] if own_type in types else devices[0]
    home = ("contiguous", own, home_device, False)  # the sample as given
    made, rows = [], []

    def add(layout, dtype, device, grad, base, label=None):
        kind = " ".join([label or layout, dtype_name(dtype)] + ["grad"] * grad)
        given = (layout, dtype, device, grad) == home
        fields = (base, layout, dtype, device, grad, differentiable, written, given)
        made.append(Variant(f"#{index} {kind} {device}", index, *fields, indices))

    for device in devices:
        base = convert(sample, device, own)
        add("contiguous", own, device, False, base)
        for layout in LAYOUTS:
            values, kept = base, written
            if layout == "expanded":
                kept = written | indices
                values = base.map(lambda v, n, k=kept: first_row_everywhere(v, n in k))
            laid_out = zip(*values.named_tensors(), strict=True)
            if any(changes(t, layout) for t, n in laid_out if n not in kept):
                add(layout, own, device, False, values)
        where = f"#{index} empty {device}"
        sizes = steps.guarded(
            "eager",
            ("empty", index, device),
            lambda base=base: empty_sizes(run, base, indices),
        )
        if isinstance(sizes, dict):
            emptied = resized(base, sizes)
            label = "empty(" + ",".join(sorted({names[i] for i, _ in sizes})) + ")"
            add("empty", own, device, False, emptied, label)
        elif not isinstance(sizes, Crashed):  # a crash is a failed row already
            why = f"no empty variant: {sizes}"
            at = {"sample": index, "device": device}
            rows.append(Row("eager", where, "not applicable", why, 5, at))
        if floats:
            for dtype in (d for d in dtypes if d != own):
                add("contiguous", dtype, device, False, convert(sample, device, dtype))
            # Gradients in float64, where finite differences are precise; then
            # in the sample's own precision (float8 has no gradients), where
            # float32 stands in for a kernel that refuses float64.
            if own != torch.float64:
                grad64 = convert(sample, device, torch.float64)
                add("contiguous", torch.float64, device, True, grad64)
            if own in COMPUTING:
                add("contiguous", own, device, True, base)
            if own in COMPUTING and any(changes(t, "permuted") for t in base.tensors()):
                add("permuted", own, device, True, base)
            if own in COMPUTING and isinstance(sizes, dict):
                add("empty", own, device, True, emptied, label)
    return made, rows


def written_by_call(run, sample, declared):
    """The arguments a call writes: those the schema declares, and those it
    writes without declaring them (which ``test_schema`` reports)."""
    copies = sample.map(lambda v, n: v.detach().clone() if is_tensor(v) else v)
    written = set(declared)
    if refusal(run, copies) is None:
        before, names = sample.named_tensors()
        for after, old, name in zip(copies.tensors(), before, names, strict=True):
            if not identical(after, old):
                written.add(name)
    return frozenset(written)


def eager_row(run, variant):
    """A row if the eager kernel refuses the variant, or reads memory it
    never wrote on it (two calls on the same input disagree); else None."""
    try:
        with quiet():
            first = observed(run.call(variant.args()), variant.args())
    except Exception as error:
        said = cause(error)
        if variant.given:
            detail = f"refuses its own sample: {said}"
            return variant_row(variant, "eager", "failed", detail)
        if variant.layout in LAYOUTS:
            detail = f"refuses {variant.layout} inputs: {said}"
            see = see_for("eager", said)
            return variant_row(variant, "eager", "limitation", detail, see)
        detail = f"the kernel refuses it: {said}"
        return variant_row(variant, "eager", "not applicable", detail)
    differs = unwritten_memory(run, variant, first)
    if differs is None:
        return None
    detail = (
        f"reads memory it never wrote: two calls on the same input give "
        f"different {differs}"
    )
    if not variant.given and variant.layout in ("empty", "expanded"):
        detail += f" (on an input the checker derived: declare skip={variant.layout!r}"
        detail += " if the operator's contract forbids it)"
    # On another layout the kernel mishandles strides; on the sample as given
    # it is wrong whatever the layout, and no section of the course teaches
    # that fix.
    see = see_for("eager", detail) if variant.layout in LAYOUTS else ""
    return variant_row(variant, "eager", "failed", detail, see)


def unwritten_memory(run, variant, first):
    """What differs between ``first`` and a second call on ``variant``, made
    after freeing memory filled with a pattern; None when nothing does, or
    when the operator gives different results on its own sample anyway (a
    random or nondeterministic kernel)."""
    if run.nondet_tol or run.deterministic.get(variant.index) is False:
        return None
    poison = [torch.full_like(t, 77) for t in first.values() if t.numel()]
    del poison
    sample = variant.args()
    with quiet():
        second = observed(run.call(sample), sample)
    differs = [label for label in first if not identical(first[label], second[label])]
    if variant.given:
        run.deterministic[variant.index] = not differs
        return None
    return ", ".join(differs) if differs else None


DEVICE_TYPES = ("cpu", "cuda", "mps", "xpu", "hpu", "mtia", "meta", "privateuseone")


def declarations(overload, nondifferentiable, skip, limitations, devices, indices):
    """Check the declared names; a misspelt one is an error, not a silent no-op.
    A device may be named where it is absent (CPU-only CI, say)."""
    arguments = [a.name for a in overload._schema.arguments]
    kinds = {*CHECKS, *LAYOUTS, "empty", *map(dtype_name, DTYPES)}
    kinds |= {*DEVICE_TYPES, *(str(d) for d in devices)}
    for option, names in (("nondifferentiable", nondifferentiable),
                          ("indices", indices or ())):  # fmt: skip
        for name in names:
            if name not in arguments:
                raise ValueError(
                    f"{option}: {overload._schema.name} has no argument {name!r}"
                    + suggestion(name, arguments)
                    + f"; its arguments: {', '.join(arguments)}"
                )
    for name in skip:
        if name not in kinds:
            raise ValueError(
                f"skip: {name!r} is not a check, a layout, a dtype or a device"
                + suggestion(name, kinds)
            )
    for name in limitations:
        if name not in CHECKS:
            raise ValueError(
                f"limitations: {name!r} is not a check" + suggestion(name, CHECKS)
            )


def suggestion(name, known):
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    aliases = {"bf16": "bfloat16", "fp16": "float16", "half": "float16",
               "fp32": "float32", "float": "float32", "fp64": "float64",
               "double": "float64"}  # fmt: skip
    guess = aliases.get(name) or (close[0] if close else None)
    return f" (did you mean {guess!r}?)" if guess in known else ""


class Crashed:
    """What a guarded step gives when it crashed an earlier child (the
    parent recorded that as a failed row)."""


class Steps:
    """Where an isolated run stands (see ``operator_checker.isolation``).

    A step is a check, or one of the eager calls that make the variants, at a
    place: ``(check, where)``, ``where`` a tuple (``Variant.key``, or
    ``("as given", sample index)``...) and its label what a row shows. In one
    process every step runs. In the child of an isolated run, each step is
    announced before it starts, so that the parent knows which check and
    variant a crash interrupted; a step that an earlier child finished, or
    that crashed one, is not run again.
    """

    def __init__(self, done=(), crashed=(), announce=None):
        self.done = {step_key(*key) for key in done}
        self.crashed = {step_key(*key) for key in crashed}
        self.announce = announce

    def wanted(self, check, where, label=None):
        """Whether to run the step; announces it if so."""
        key = step_key(check, where)
        if key in self.done or key in self.crashed:
            return False
        if self.announce is not None:
            self.announce(check, key[1], label or label_of(where))
        return True

    def guarded(self, check, where, step, label=None):
        """``step()``, or ``Crashed()`` where it crashed an earlier child."""
        key = step_key(check, where)
        if key in self.crashed:
            return Crashed()
        if self.announce is not None:
            self.announce(check, key[1], label or label_of(where))
        return step()


def step_key(check, where):
    """A step as a hashable key; ``where`` may come back from JSON as a list."""
    return check, tuple(where) if isinstance(where, (list, tuple)) else (where,)


def label_of(where):
    """How a row names a place that is not a variant."""
    if not isinstance(where, (list, tuple)):
        return str(where)
    kind, *rest = where
    if kind == "declared":
        return "declared"
    return " ".join([f"#{rest[0]}", kind, *map(str, rest[1:])])


def check_operator(
    op,
    samples,
    *,
    devices=None,
    dtypes=DTYPES,
    exact=True,
    nondet_tol=0.0,
    nondifferentiable=(),
    indices=None,
    skip=None,
    limitations=None,
    only=None,
    quick=False,
    isolate=False,
    imports=(),
    timeout=300.0,
):
    """Run every check of the course on ``op`` for the variants of ``samples``,
    and return the ``Report``.

    ``op`` is a ``custom_op``, ``torch.ops.ns.name`` or one of its overloads,
    or a target as the command names it (``"ns::name"``,
    ``"package.module:attribute"``). ``samples`` are tuples of arguments, or
    ``Sample(*args, **kwargs)``: one small sample of row-major tensors is
    enough, the checker derives the rest. Each sample is checked as given, in
    its own dtypes (float8, integers and complex included).

    **Variants.** From each sample the checker makes the inputs a caller may
    really pass: in column-major order (``permuted``), as every other element
    of a wider buffer (``strided``), one element into its storage
    (``offset``), with every row the first one (``expanded``, stride 0), and
    with a size of zero (``empty``); in each other dtype of ``dtypes``, where
    the kernel accepts it; with gradients, in its own precision and in
    float64; on every device. The first three keep every value. Arguments
    that hold indices (every integer or bool tensor, unless ``indices``
    names them) keep their values everywhere, and while a sample holds one
    no size changes: the checker cannot tell which sizes they describe.
    Otherwise a size changes only where the eager kernel accepts the change,
    so sizes that move together (four box coordinates, say) stay consistent.

    **Checks**, each on the variants where it can say something:

    * ``test_schema``, ``test_autograd_registration``, ``test_faketensor``,
      ``test_aot_dispatch_dynamic``: ``torch.library.opcheck``'s four tests
      (every variant);
    * ``layout``: outputs and gradients on a variant equal those on its
      row-major copy (the other layouts);
    * ``gradcheck``, ``gradgradcheck``, ``forward-ad``: first and second
      derivatives, and forward mode, against finite differences (float64
      with gradients, on the arguments a backward reaches);
    * ``vmap``: ``torch.func.vmap`` against a loop (the sample);
    * ``compiled``, ``compiled-dynamic``: ``torch.compile(fullgraph=True)``
      with Inductor gives the eager results bit for bit, and the gradients
      within tolerance;
    * ``export-load``, ``export-decomposed``: ``torch.export``, saved and
      loaded, or after ``run_decompositions()``, records the sizes, strides
      and dtypes the kernel returns, and gives the eager results;
    * ``recompiles``: one dynamic compilation serves larger sizes.

    Two eager calls on each variant must agree: a kernel that reads memory it
    never wrote fails ``eager`` there.

    **Options.** ``exact=False`` compares compiled, exported and batched
    results with ``assert_close``'s tolerances instead of bit for bit;
    ``nondet_tol`` is the run-to-run difference a nondeterministic kernel may
    show. ``nondifferentiable``, ``indices``, ``skip`` and ``limitations``
    map argument names, checks or variant kinds (a layout, a dtype, a device)
    to a reason, and the report shows each. ``only`` runs the named checks
    alone; ``quick`` runs the fast ones (``QUICK_CHECKS``) on the samples as
    given. Every check left out is a ``skipped`` row that says why.

    **Isolation.** ``isolate=True`` runs the operator in a child process: a
    crash or a hang of its code is a failed row naming the signal and the
    variant, and the other checks go on in a fresh child. The child finds the
    operator by name: ``imports`` lists the modules, ``.py`` files or ``.so``
    libraries that register it (the libraries this process loaded with
    ``torch.ops.load_library`` are added), and ``timeout`` is the seconds the
    child may stay silent, importing included. The child stays for the next
    isolated call with the same ``imports``, while their files are unchanged.
    With ``isolate=False`` the checks compile in this process, each a
    function of its own: nothing this process compiled before is discarded.
    """
    skip = {check_id(k): v for k, v in dict(skip or {}).items()}
    limitations = {check_id(k): v for k, v in dict(limitations or {}).items()}
    skip.update(left_out(only, quick, skip))
    options = dict(
        devices=devices,
        dtypes=dtypes,
        exact=exact,
        nondet_tol=nondet_tol,
        nondifferentiable=nondifferentiable,
        indices=indices,
        skip=skip,
        limitations=limitations,
        quick=quick,
    )
    if isolate:
        from operator_checker import isolation

        return isolation.check_isolated(
            op, samples, imports=imports, timeout=timeout, options=options
        )
    if isinstance(op, str):
        from operator_checker.targets import resolve

        op = resolve(op, imports)
    return run_checks(op, samples, **options)


def run_checks(
    op,
    samples,
    *,
    devices=None,
    dtypes=DTYPES,
    exact=True,
    nondet_tol=0.0,
    nondifferentiable=(),
    indices=None,
    skip=None,
    limitations=None,
    quick=False,
    steps=None,
    report=None,
):
    """``check_operator`` in this process; ``steps`` and ``report`` are the
    isolated child's (see ``Steps``)."""
    steps = steps or Steps()
    devices = list(devices or ["cpu"] + (["cuda"] if torch.cuda.is_available() else []))
    samples = [as_sample(sample) for sample in samples]
    if not samples:
        raise ValueError("check_operator needs at least one sample")
    if not isinstance(nondifferentiable, dict):
        nondifferentiable = dict.fromkeys(nondifferentiable, "declared")
    if indices is not None and not isinstance(indices, dict):
        indices = dict.fromkeys(indices, "declared")
    skip_grad = set(nondifferentiable)
    skip = {check_id(k): v for k, v in dict(skip or {}).items()}
    limitations = {check_id(k): v for k, v in dict(limitations or {}).items()}
    overloads = [overload_for(op, sample) for sample in samples]
    declarations(overloads[0], nondifferentiable, skip, limitations, devices, indices)
    report = report or Report(operator_name(overloads[0]))
    report.operator = operator_name(overloads[0])
    for argument, reason in nondifferentiable.items():
        if steps.wanted("gradients", ("declared", "nondifferentiable", argument)):
            said = f"{argument} is not differentiable: {reason}"
            report.add(Row("gradients", "declared", "limitation", said))
    for argument, reason in (indices or {}).items():
        if steps.wanted("eager", ("declared", "indices", argument)):
            said = f"{argument} holds indices: {reason}"
            report.add(Row("eager", "declared", "skipped", said))
    present = {torch.device(d).type for d in devices} | {str(d) for d in devices}
    for what, reason in skip.items():
        check = what if what in CHECKS else "eager"
        if what in DEVICE_TYPES and what not in present:
            reason = f"{reason} (and {what} is not present here)"
        if steps.wanted(check, ("declared", "skip", what)):
            report.add(Row(check, "declared", "skipped", f"{what}: {reason}"))
    for index, (sample, overload) in enumerate(zip(samples, overloads, strict=True)):
        run = Run(overload, exact, nondet_tol)
        arguments = overload._schema.arguments
        declared = {a.name for a in arguments if a.alias_info and a.alias_info.is_write}
        start = time.perf_counter()
        written = steps.guarded(
            "eager",
            ("as given", index),
            lambda: scan_writes(run, sample, declared, report, index),  # noqa: B023
        )
        if isinstance(written, Crashed):
            written = frozenset(declared)
        holds = index_arguments(sample, indices)
        found, rows = variants_of(
            run, index, sample, devices, dtypes, written, skip_grad, steps, holds
        )
        if quick:
            found = [variant for variant in found if variant.given]
        for row in rows:
            if steps.wanted(row.check, ("empty row", index, row.variant), row.variant):
                report.add(row)
        report.variants += len(found)
        report.spent("setup", start)
        for variant in found:
            if {variant.layout, dtype_name(variant.dtype), variant.device} & set(skip):
                continue
            if torch.device(variant.device).type in skip:
                continue
            run_variant(run, variant, report, skip, limitations, steps)
    return report


def scan_writes(run, sample, declared, report, index):
    """``written_by_call``; when the checker cannot scan (a dtype it cannot
    compare), a row says so and only the declared writes count."""
    try:
        return written_by_call(run, sample, declared)
    except Exception as error:
        said = (
            f"the checker could not scan the sample for undeclared writes: "
            f"{cause(error)}; test_schema still compares the arguments"
        )
        at = {"sample": index}
        report.add(Row("eager", f"#{index} as given", "not applicable", said, 0, at))
        return frozenset(declared)


def operator_name(overload):
    """``ns::name``, with ``.overload`` unless it is the default one."""
    name = overload._schema.name
    if overload._overloadname != "default":
        name += f".{overload._overloadname}"
    return name


def run_variant(run, variant, report, skip, limitations, steps):
    key = (variant.index, variant.device)
    contiguous = variant.grad and variant.layout == "contiguous"
    gradients_here = contiguous and (
        variant.dtype == torch.float64
        or (variant.dtype == torch.float32 and not run.float64_gradients.get(key))
    )
    checks = [c for c in plan(variant, gradients_here) if c not in skip]
    start = time.perf_counter()
    refused = steps.guarded(
        "eager", variant.key, lambda: eager_row(run, variant), variant.name
    )
    if refused is None and variant.grad and key not in run.gradients:
        where = ("gradients", variant.index, variant.device)
        status = steps.guarded(
            "gradients", where, lambda: gradient_status(run, variant, report, steps)
        )
        if isinstance(status, Crashed):
            status = Outcome("not applicable", "the backward crashed the process")
        run.gradients[key] = status
    report.spent("setup", start)
    if gradients_here and variant.dtype == torch.float64:
        # Judged in float64, the float32 variant need not stand in, unless
        # the kernel refuses float64 (or its outputs stay in less: see
        # checks.differences).
        run.float64_gradients.setdefault(key, refused is None)
    if refused is not None:
        if isinstance(refused, Crashed):
            why = "the operator crashed the process on this variant"
        else:
            if steps.wanted(refused.check, variant.key, variant.name):
                report.add(refused)
            if refused.outcome == "failed" and "never wrote" in refused.detail:
                why = "the kernel reads memory it never wrote on this variant"
                for check in checks:
                    if steps.wanted(check, variant.key, variant.name):
                        report.add(
                            variant_row(variant, check, "not applicable", why)
                        )  # fmt: skip
                return
            why = f"the variant it runs on is refused: {refused.detail}"
        for check in (c for c in checks if c in ONCE_PER_SAMPLE):
            if steps.wanted(check, variant.key, variant.name):
                report.add(variant_row(variant, check, "not applicable", why))
        return
    for check in checks:
        if not steps.wanted(check, variant.key, variant.name):
            continue
        start = time.perf_counter()
        status = run.backward_reaches(variant)
        if check in OPCHECK_TESTS:
            try:
                result = check_opcheck(run, variant, check)[check]
            except Exception as error:  # a failed check is a row, not a crash
                result = error
            result = None if result == "SUCCESS" else result
            timed = "opcheck"
        elif check in GRADIENT_CHECKS and not isinstance(status, set):
            result = status or Outcome("not applicable", "no floating-point argument")
            if result.detail == NO_GRADIENT:  # said once, by the gradients rows
                result = Outcome("not applicable", f"{NO_GRADIENT} (see gradients)")
            timed = check
        else:
            try:
                with quiet():
                    result = CHECK_FUNCTIONS[check](run, variant)
            except Exception as error:
                result = error
            timed = check
        row = verdict(run, variant, check, result, limitations)
        row.seconds = time.perf_counter() - start
        report.add(row)
        report.spent(timed, start)


def environment():
    """Where the checks ran: torch, Python, the platform, the devices, and the
    compiler settings and variables that change verdicts."""
    import os
    import platform

    devices = ["cpu"]
    if torch.cuda.is_available():
        devices += [
            f"cuda:{i} ({torch.cuda.get_device_name(i)})"
            for i in range(torch.cuda.device_count())
        ]
    dynamo, inductor = torch._dynamo.config, torch._inductor.config
    settings = {
        f"torch._dynamo.config.{name}": getattr(dynamo, name)
        for name in (
            "capture_dynamic_output_shape_ops",
            "capture_scalar_outputs",
            "assume_static_by_default",
            "automatic_dynamic_shapes",
        )
        if hasattr(dynamo, name)
    }
    settings.update(
        {
            f"torch._inductor.config.{name}": getattr(inductor, name)
            for name in ("fallback_random", "freezing", "cpp_wrapper")
            if hasattr(inductor, name)
        }
    )
    variables = {
        key: value
        for key, value in sorted(os.environ.items())
        if re.match(r"(TORCH|PYTORCH|TORCHINDUCTOR|TORCHDYNAMO|CUDA_VISIBLE)", key)
    }
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "devices": devices,
        "settings": settings,
        "variables": variables,
    }


def location(op):
    """Where ``op`` is defined, as ``(file, line)`` relative to the working
    folder where it is under it; None where it is not known (a C++ operator
    built elsewhere)."""
    import os

    from torch._library.custom_ops import OPDEFS

    overload = getattr(op, "_opoverload", op)
    name = getattr(overload, "_schema", None)
    name = name.name if name is not None else getattr(op, "_qualified_op_name", None)
    found = None
    definition = OPDEFS.get(name) if name else None  # a custom_op's CustomOpDef
    function = getattr(op, "_init_fn", None)
    if function is None and definition is not None:
        function = definition._init_fn
    if function is not None:
        code = function.__code__
        found = (code.co_filename, code.co_firstlineno)
    elif name:
        dumped = torch._C._dispatch_dump(name)
        match = re.search(r"registered at (.+?):(\d+)", dumped)
        if match:
            found = (match.group(1), int(match.group(2)))
    if found is None or not os.path.isfile(found[0]):
        return None
    file = os.path.abspath(found[0])
    here = os.getcwd() + os.sep
    return (file[len(here) :] if file.startswith(here) else file, found[1])
