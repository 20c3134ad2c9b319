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

import re
import time
import warnings

import torch

from operator_checker import _torch
from operator_checker.checks import (
    CHECK_FUNCTIONS,
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
from operator_checker.errors import cause, deepest, quiet
from operator_checker.fixes import see_for
from operator_checker.options import (
    CHECKS,
    DEVICE_TYPES,
    GRADIENT_CHECKS,
    LAYOUT_NAMES,
    ONCE_PER_SAMPLE,
    OPCHECK_TESTS,
    Options,
    suggestion,
)
from operator_checker.report import Report, Row
from operator_checker.samples import as_sample, overload_for
from operator_checker.steps import Crashed, Steps
from operator_checker.variants import (
    DTYPES,
    dtype_name,
    identical,
    index_arguments,
    refusal,
    variants_of,
    written_by_call,
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
    if _torch.is_overload(owner) or _torch.is_packet(owner):
        return _torch.qualified_name(owner) == _torch.qualified_name(op)
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
        if variant.layout in LAYOUT_NAMES:
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
    see = see_for("eager", detail) if variant.layout in LAYOUT_NAMES else ""
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


def declarations(overload, nondifferentiable, skip, limitations, devices, indices):
    """Check the declared names; a misspelt one is an error, not a silent no-op.
    A device may be named where it is absent (CPU-only CI, say)."""
    arguments = [a.name for a in _torch.schema_of(overload).arguments]
    kinds = {*CHECKS, *LAYOUT_NAMES, "empty", *map(dtype_name, DTYPES)}
    kinds |= {*DEVICE_TYPES, *(str(d) for d in devices)}
    for option, names in (("nondifferentiable", nondifferentiable),
                          ("indices", indices or ())):  # fmt: skip
        for name in names:
            if name not in arguments:
                raise ValueError(
                    f"{option}: {_torch.qualified_name(overload)} has no argument "
                    f"{name!r}"
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


def run_checks(op, samples, options=None, *, steps=None, report=None):
    """The checks of ``options`` (an ``Options``) on ``op`` in this process;
    ``steps`` and ``report`` are an isolated child's (see ``Steps``)."""
    options = options or Options.make()
    steps = steps or Steps()
    default = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    devices = list(options.devices or default)
    dtypes = tuple(getattr(torch, name) for name in options.dtypes)
    bound = [overload_for(op, as_sample(sample)) for sample in samples]
    if not bound:
        raise ValueError("check_operator needs at least one sample")
    overloads = [overload for overload, _ in bound]
    skip, limitations = options.skip, options.limitations
    nondifferentiable, indices = options.nondifferentiable, options.indices
    declarations(overloads[0], nondifferentiable, skip, limitations, devices, indices)
    report = report or Report(_torch.operator_name(overloads[0]))
    report.operator = _torch.operator_name(overloads[0])
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
    for index, (overload, sample) in enumerate(bound):
        run = Run(overload, options.exact, options.nondet_tol)
        arguments = _torch.schema_of(overload).arguments
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
            run, index, sample, devices, dtypes, written, set(nondifferentiable),
            steps, holds,
        )  # fmt: skip
        if options.quick:
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
        "settings": _torch.compiler_settings(),
        "variables": variables,
    }


def location(op):
    """Where ``op`` is defined, as ``(file, line)`` relative to the working
    folder where it is under it; None where it is not known (a C++ operator
    built elsewhere)."""
    import os

    function = _torch.defining_function(op)
    if function is not None:
        found = (function.__code__.co_filename, function.__code__.co_firstlineno)
    else:
        found = _torch.registration(_torch.qualified_name(op) or "")
    if found is None or not os.path.isfile(found[0]):
        return None
    file = os.path.abspath(found[0])
    here = os.getcwd() + os.sep
    return (file[len(here) :] if file.startswith(here) else file, found[1])
