"""Verdicts
--------
``gradient_status`` runs one backward per sample and device, with
gradients for every floating-point argument, and records which arguments
the backward reaches. Without a backward, compiling on inputs that require
grad fails although eager mode runs; the checker reports that as a
limitation with its remedy rather than as a failure or a skip. ``verdict``
turns what a check returned or raised into a row.

Running every check
-------------------
``plan`` lists the checks of a variant. ``check_operator`` binds each
sample, finds the arguments a call writes (declared or not), makes the
variants, and runs the plan of each variant that the eager kernel accepts.
A refused variant is one row: a failure for the sample as given, a
limitation for a layout, not applicable otherwise. Before each variant it
resets Dynamo: every check compiles the same function, and with
``fullgraph=True`` Dynamo's limit of eight recompilations per function
raises instead of falling back to eager mode, which would fail later
variants for no fault of the operator.
"""

import re
import time

import torch

from operator_checker.checks import (
    CHECK_FUNCTIONS,
    GRADIENT_CHECKS,
    ONCE_PER_SAMPLE,
    OPCHECK_TESTS,
    Outcome,
    Refused,
    Run,
    check_opcheck,
    flat_tensors,
    incoming,
)
from operator_checker.report import (
    CHECKS,
    Report,
    Row,
    cause,
    deepest,
    left_out,
    quiet,
    see_for,
)
from operator_checker.samples import as_sample, is_tensor, overload_for
from operator_checker.variants import (
    DTYPES,
    LAYOUTS,
    Variant,
    changes,
    convert,
    dtype_name,
    empty_sizes,
    first_row_everywhere,
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
            if steps.wanted("gradients", where):
                report.add(Row("gradients", where, "limitation", said, see))
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


def variants_of(run, index, sample, devices, dtypes, written, nondifferentiable, steps):
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
        where = f"#{index} empty {device}"
        sizes = steps.guarded(
            "eager",
            where,
            lambda base=base: empty_sizes(run, base),
        )
        if isinstance(sizes, dict):
            emptied = resized(base, sizes)
            label = "empty(" + ",".join(sorted({names[i] for i, _ in sizes})) + ")"
            add("empty", reference, device, False, emptied, label)
        elif not isinstance(sizes, Crashed):  # a crash is a failed row already
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


class Crashed:
    """What a guarded step gives when it crashed an earlier child (the
    parent recorded that as a failed row)."""


class Steps:
    """Where an isolated run stands (see ``operator_checker.isolation``).

    In one process every step runs. In the child of an isolated run, each step
    is announced before it starts, so that the parent knows which check and
    variant a crash interrupted; a step that an earlier child finished, or
    that crashed one, is not run again.
    """

    def __init__(self, done=(), crashed=(), announce=None):
        self.done = {tuple(key) for key in done}
        self.crashed = {tuple(key) for key in crashed}
        self.announce = announce

    def wanted(self, check, variant):
        """Whether to run the step; announces it if so."""
        key = (check, variant)
        if key in self.done or key in self.crashed:
            return False
        if self.announce is not None:
            self.announce(check, variant)
        return True

    def guarded(self, check, variant, step):
        """``step()``, or ``Crashed()`` where it crashed an earlier child."""
        if (check, variant) in self.crashed:
            return Crashed()
        if self.announce is not None:
            self.announce(check, variant)
        return step()


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
    enough, the checker derives the rest.

    **Variants.** From each sample the checker makes the inputs a caller may
    really pass: the sample row-major (``contiguous``), in column-major order
    (``permuted``), as every other element of a wider buffer (``strided``),
    with every row the first one (``expanded``, stride 0), one element into
    its storage (``offset``), and with a size of zero (``empty``); in each
    dtype of ``dtypes``; with gradients, in its own precision and in float64;
    on every device. A size changes only where the eager kernel accepts the
    change, so sizes that move together (four box coordinates, say) stay
    consistent.

    **Checks**, each on the variants where it can say something:

    * ``test_schema``, ``test_autograd_registration``, ``test_faketensor``,
      ``test_aot_dispatch_dynamic``: ``torch.library.opcheck``'s four tests
      (every variant);
    * ``layout``: outputs and gradients on a variant equal those on its
      row-major copy (the other layouts);
    * ``gradcheck``, ``gradgradcheck``, ``forward AD``: first and second
      derivatives, and forward mode, against finite differences (float64
      with gradients, on the arguments a backward reaches);
    * ``vmap``: ``torch.func.vmap`` against a loop (the sample);
    * ``compiled``, ``compiled dynamic``: ``torch.compile(fullgraph=True)``
      with Inductor gives the eager results bit for bit, and the gradients
      within tolerance;
    * ``export + load``, ``export decomposed``: ``torch.export``, saved and
      loaded, or after ``run_decompositions()``, gives the eager results;
    * ``recompiles``: one dynamic compilation serves larger sizes.

    **Options.** ``exact=False`` compares compiled, exported and batched
    results with ``assert_close``'s tolerances instead of bit for bit;
    ``nondet_tol`` is the run-to-run difference a nondeterministic kernel may
    show. ``nondifferentiable``, ``skip`` and ``limitations`` map argument
    names, checks or variant kinds (a layout, a dtype, a device) to a reason,
    and the report shows each. ``only`` runs the named checks alone;
    ``quick`` runs the fast ones (``QUICK_CHECKS``) on the samples as given.
    Every check left out is a ``skipped`` row that says why.

    **Isolation.** ``isolate=True`` runs the operator in a child process: a
    crash or a hang of its code is a failed row naming the signal and the
    variant, and the other checks go on in a fresh child. The child finds the
    operator by name: ``imports`` lists the modules, ``.py`` files or ``.so``
    libraries that register it (the libraries this process loaded with
    ``torch.ops.load_library`` are added), and ``timeout`` is the seconds one
    step may take. The child stays for the next isolated call with the same
    ``imports``, while their files are unchanged.
    """
    skip, limitations = dict(skip or {}), dict(limitations or {})
    skip.update(left_out(only, quick, skip))
    options = dict(
        devices=devices,
        dtypes=dtypes,
        exact=exact,
        nondet_tol=nondet_tol,
        nondifferentiable=nondifferentiable,
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
    skip_grad = set(nondifferentiable)
    skip, limitations = dict(skip or {}), dict(limitations or {})
    overloads = [overload_for(op, sample) for sample in samples]
    declarations(overloads[0], nondifferentiable, skip, limitations, devices)
    report = report or Report(operator_name(overloads[0]))
    report.operator = operator_name(overloads[0])
    for argument, reason in nondifferentiable.items():
        if steps.wanted("gradients", "declared"):
            said = f"{argument} is not differentiable: {reason}"
            report.add(Row("gradients", "declared", "limitation", said))
    for what, reason in skip.items():
        check = what if what in CHECKS else "eager"
        if steps.wanted(check, "declared"):
            report.add(Row(check, "declared", "skipped", f"{what}: {reason}"))
    for index, (sample, overload) in enumerate(zip(samples, overloads, strict=True)):
        run = Run(overload, exact, nondet_tol)
        arguments = overload._schema.arguments
        declared = {a.name for a in arguments if a.alias_info and a.alias_info.is_write}
        start = time.perf_counter()
        written = steps.guarded(
            "eager",
            f"#{index} as given",
            lambda: written_by_call(run, sample, declared),  # noqa: B023
        )
        if isinstance(written, Crashed):
            written = frozenset(declared)
        found, rows = variants_of(
            run, index, sample, devices, dtypes, written, skip_grad, steps
        )
        if quick:
            found = [variant for variant in found if variant.given]
        for row in rows:
            if steps.wanted(row.check, row.variant):
                report.add(row)
        report.variants += len(found)
        report.spent("setup", start)
        for variant in found:
            if {variant.layout, dtype_name(variant.dtype), variant.device} & set(skip):
                continue
            run_variant(run, variant, report, skip, limitations, steps)
    return report


def operator_name(overload):
    """``ns::name``, with ``.overload`` unless it is the default one."""
    name = overload._schema.name
    if overload._overloadname != "default":
        name += f".{overload._overloadname}"
    return name


def run_variant(run, variant, report, skip, limitations, steps):
    contiguous64 = (variant.layout, variant.dtype) == ("contiguous", torch.float64)
    checks = [c for c in plan(variant, variant.grad and contiguous64) if c not in skip]
    start = time.perf_counter()
    refused = steps.guarded("eager", variant.name, lambda: eager_row(run, variant))
    key = (variant.index, variant.device)
    if refused is None and key not in run.gradients and variant.dtype is not None:
        where = f"#{variant.index} {variant.device}"
        status = steps.guarded(
            "gradients", where, lambda: gradient_status(run, variant, report, steps)
        )
        if isinstance(status, Crashed):
            status = Outcome("not applicable", "the backward crashed the process")
        run.gradients[key] = status
    report.spent("setup", start)
    if refused is not None:
        if isinstance(refused, Crashed):
            why = "the operator crashed the process on this variant"
        else:
            if steps.wanted(refused.check, refused.variant):
                report.add(refused)
            why = f"the variant it runs on is refused: {refused.detail}"
        for check in (c for c in checks if c in ONCE_PER_SAMPLE):
            if steps.wanted(check, variant.name):
                report.add(Row(check, variant.name, "not applicable", why))
        return
    torch.compiler.reset()
    for check in checks:
        if not steps.wanted(check, variant.name):
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
            timed = check
        else:
            try:
                with quiet():
                    result = CHECK_FUNCTIONS[check](run, variant)
            except Exception as error:
                result = error
            timed = check
        report.add(verdict(run, variant, check, result, limitations))
        report.spent(timed, start)
