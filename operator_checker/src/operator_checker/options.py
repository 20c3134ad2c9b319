"""The checker's vocabulary: its checks, outcomes and options
-----------------------------------------------------------
``REGISTRY`` is the one list of checks: each ``Check`` has a stable id (as
``--only``, ``--skip``, the JSON and pytest's ids name it), the label a
printed report shows, its group, and whether it is one of the quick checks,
runs once per sample, or can be run at all (``eager`` and ``gradients`` hold
what the calls that make the variants find). Every list of checks elsewhere
is derived from it.

``Options`` holds a run's options, validated once, whoever gives them: the
Python API, the command, its configuration or the pytest plugin. It travels
to an isolated run's child as JSON.

This module imports no torch: the command's parent process and the pytest
plugin use it before anything loads an operator.
"""

import dataclasses
import difflib
import re


@dataclasses.dataclass(frozen=True)
class Check:
    id: str
    label: str
    group: str  # eager, opcheck, layout, gradients, transforms, compile, export
    quick: bool = False  # one of the fast checks, for a pre-commit hook
    once_per_sample: bool = False  # on the sample as given, or its float64 copy
    runnable: bool = True  # False: what the calls that make the variants find


REGISTRY = (
    Check("eager", "eager", "eager", runnable=False),
    Check("test_schema", "test_schema", "opcheck", quick=True),
    Check("test_autograd_registration", "test_autograd_registration", "opcheck",
          quick=True),
    Check("test_faketensor", "test_faketensor", "opcheck", quick=True),
    Check("test_aot_dispatch_dynamic", "test_aot_dispatch_dynamic", "opcheck",
          quick=True),
    Check("layout", "layout", "layout"),
    Check("gradients", "gradients", "gradients", runnable=False),
    Check("gradcheck", "gradcheck", "gradients", once_per_sample=True),
    Check("gradgradcheck", "gradgradcheck", "gradients", once_per_sample=True),
    Check("forward-ad", "forward AD", "gradients", once_per_sample=True),
    Check("vmap", "vmap", "transforms", quick=True, once_per_sample=True),
    Check("compiled", "compiled", "compile"),
    Check("compiled-dynamic", "compiled dynamic", "compile"),
    Check("export-load", "export + load", "export"),
    Check("export-decomposed", "export decomposed", "export"),
    Check("recompiles", "recompiles", "compile", once_per_sample=True),
)  # fmt: skip
CHECKS = tuple(check.id for check in REGISTRY)
RUNNABLE = tuple(check.id for check in REGISTRY if check.runnable)
QUICK_CHECKS = tuple(check.id for check in REGISTRY if check.quick)
OPCHECK_TESTS = tuple(check.id for check in REGISTRY if check.group == "opcheck")
GRADIENT_CHECKS = tuple(
    check.id for check in REGISTRY if check.group == "gradients" and check.runnable
)
ONCE_PER_SAMPLE = tuple(check.id for check in REGISTRY if check.once_per_sample)
LABELS = {check.id: check.label for check in REGISTRY if check.label != check.id}

OUTCOMES = ("failed", "limitation", "not applicable", "skipped", "passed")
# The floating-point dtypes the checker derives variants in, by name (torch's
# dtypes in variants.DTYPES).
DTYPE_NAMES = ("float32", "float64", "float16", "bfloat16")
# The layouts derived from a sample; the first three keep every value.
LAYOUT_NAMES = ("permuted", "strided", "expanded", "offset")
# The device types a declaration may name, present here or not.
DEVICE_TYPES = ("cpu", "cuda", "mps", "xpu", "hpu", "mtia", "meta", "privateuseone")
# An operator's name: ns::name, ns::name.overload, torch.ops.ns.name[.overload].
OPERATOR_NAME = re.compile(r"^(?:torch\.ops\.)?(\w+)(?:::|\.)(\w+)(?:\.(\w+))?$")
# What a file registering operators may be, besides a .py module.
LIBRARY_SUFFIXES = (".so", ".dylib", ".dll")


def label(check):
    """How a report shows ``check``: its label, or its id."""
    return LABELS.get(check, check)


def check_id(name):
    """The id of a check named by its id or by its label (``forward AD``, as
    1.0 named it); other names are returned as they are."""
    return {value: key for key, value in LABELS.items()}.get(name, name)


def suggestion(name, known):
    """`` (did you mean X?)`` for a near miss among ``known``, else ''."""
    aliases = {"bf16": "bfloat16", "fp16": "float16", "half": "float16",
               "fp32": "float32", "float": "float32", "fp64": "float64",
               "double": "float64"}  # fmt: skip
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    guess = aliases.get(name) or (close[0] if close else None)
    return f" (did you mean {guess!r}?)" if guess in known else ""


def check_only(only):
    """``ValueError`` for a name in ``only`` that is not a check one can run."""
    for name in map(check_id, only or ()):
        if name not in RUNNABLE:
            why = (
                "is not a check one runs alone (it holds what the calls that make "
                "the variants found)"
                if name in CHECKS
                else "is not a check"
            )
            raise ValueError(
                f"only: {name!r} {why}{suggestion(name, RUNNABLE)}; the checks: "
                f"{', '.join(RUNNABLE)}"
            )


def left_out(only, quick, skip):
    """The checks that ``only`` and ``quick`` leave out, each with its reason."""
    check_only(only)
    only = None if only is None else [check_id(name) for name in only]
    found = {}
    for check in RUNNABLE:
        if check in skip:
            continue
        if only is not None and check not in only:
            found[check] = "left out by only="
        elif quick and check not in QUICK_CHECKS:
            found[check] = "quick: not one of the fast checks"
    return found


def reasons(value, what="declared"):
    """A declaration as ``{name: reason}``: a dict as it is, a list or a
    tuple of names with ``what`` as their reason."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(value, str):
        return {value: what}
    return dict.fromkeys(map(str, value), what)


@dataclasses.dataclass(frozen=True)
class Options:
    """A run's options, normalised and validated once (``Options.make``).

    ``skip`` includes what ``only`` and ``quick`` leave out, each with its
    reason; check names are ids; dtypes are names; ``indices`` is None (every
    integer or bool tensor holds indices) or the arguments that do.
    """

    devices: tuple = None  # None: the CPU, and CUDA if there is one
    dtypes: tuple = DTYPE_NAMES
    exact: bool = True
    nondet_tol: float = 0.0
    nondifferentiable: dict = dataclasses.field(default_factory=dict)
    indices: dict = None
    skip: dict = dataclasses.field(default_factory=dict)
    limitations: dict = dataclasses.field(default_factory=dict)
    quick: bool = False

    @classmethod
    def make(
        cls,
        *,
        devices=None,
        dtypes=DTYPE_NAMES,
        exact=True,
        nondet_tol=0.0,
        nondifferentiable=(),
        indices=None,
        skip=None,
        limitations=None,
        only=None,
        quick=False,
    ):
        """The options ``check_operator`` takes, normalised: ``ValueError``
        for a check, a dtype or a device that does not exist."""
        names = tuple(
            d if isinstance(d, str) else str(d).removeprefix("torch.") for d in dtypes
        )
        for name in names:
            if name not in DTYPE_NAMES:
                raise ValueError(
                    f"dtypes: {name!r} is not one of {', '.join(DTYPE_NAMES)}"
                    + suggestion(name, DTYPE_NAMES)
                )
        if devices is not None:
            devices = tuple(str(d) for d in devices)
            for device in devices:
                if device.partition(":")[0] not in DEVICE_TYPES:
                    raise ValueError(
                        f"devices: {device!r} is not a device type "
                        f"({', '.join(DEVICE_TYPES)})"
                    )
        skip = {check_id(k): v for k, v in reasons(skip).items()}
        limitations = {check_id(k): v for k, v in reasons(limitations).items()}
        for name in limitations:
            if name not in CHECKS:
                raise ValueError(
                    f"limitations: {name!r} is not a check" + suggestion(name, CHECKS)
                )
        skip.update(left_out(only, quick, skip))
        return cls(
            devices=devices,
            dtypes=names,
            exact=bool(exact),
            nondet_tol=float(nondet_tol),
            nondifferentiable=reasons(nondifferentiable),
            indices=None if indices is None else reasons(indices),
            skip=skip,
            limitations=limitations,
            quick=bool(quick),
        )

    def checks_nothing(self):
        """Whether every check is left out."""
        return not set(RUNNABLE) - set(self.skip)

    def to_json(self):
        """The options as JSON values, for an isolated run's child."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data):
        data = dict(data)
        for key in ("devices", "dtypes"):
            if data.get(key) is not None:
                data[key] = tuple(data[key])
        return cls(**data)


# What check_operator takes beyond the options: where it runs.
RUN_ARGUMENTS = ("isolate", "imports", "timeout")
# Every keyword argument of check_operator (and so of operator_tests).
ARGUMENTS = (
    *(field.name for field in dataclasses.fields(Options)),
    "only",
    *RUN_ARGUMENTS,
)
