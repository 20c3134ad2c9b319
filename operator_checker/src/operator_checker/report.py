"""The report
----------
Every check on every variant adds one ``Row``. Printing the report groups
the rows of a check that share an outcome and a cause (numbers aside), and
names the page and section that teach the fix of a failure, or the remedy
of a limitation.

Causes and fixes
----------------
A row's detail is the deepest error of the chain, whole, without the
traceback and the hints PyTorch appends: a C++ check's file and line go,
the message that Dynamo's wrapper quotes comes out. The detail then picks
the page and section that teach the fix, first match first.
"""

import contextlib
import dataclasses
import logging
import os
import re
import textwrap
import time
import warnings

OUTCOMES = ("failed", "limitation", "not applicable", "skipped", "passed")
# Each check's stable id, as --only, --skip, the JSON and pytest's ids name it.
CHECKS = (
    "eager",
    "test_schema",
    "test_autograd_registration",
    "test_faketensor",
    "test_aot_dispatch_dynamic",
    "layout",
    "gradients",
    "gradcheck",
    "gradgradcheck",
    "forward-ad",
    "vmap",
    "compiled",
    "compiled-dynamic",
    "export-load",
    "export-decomposed",
    "recompiles",
)

# The fast checks, for a pre-commit hook: opcheck's four tests and vmap.
QUICK_CHECKS = (*CHECKS[1:5], "vmap")
# How the printed report and the Markdown name a check, where not by its id.
LABELS = {
    "forward-ad": "forward AD",
    "compiled-dynamic": "compiled dynamic",
    "export-load": "export + load",
    "export-decomposed": "export decomposed",
}
# The floating-point dtypes the checker derives variants in, by name (torch's
# dtypes in variants.DTYPES; named here, where no torch is imported).
DTYPE_NAMES = ("float32", "float64", "float16", "bfloat16")
# An operator's name: ns::name, ns::name.overload, torch.ops.ns.name[.overload].
OPERATOR_NAME = re.compile(r"^(?:torch\.ops\.)?(\w+)(?:::|\.)(\w+)(?:\.(\w+))?$")


def label(check):
    """How a report shows ``check``: its label, or its id."""
    return LABELS.get(check, check)


def check_id(name):
    """The id of a check named by its id or by its label (``forward AD``, as
    1.0 named it); other names are returned as they are."""
    return {value: key for key, value in LABELS.items()}.get(name, name)


# "eager" and "gradients" are not checks one runs but what the calls that make
# the variants find: never chosen, never left out.
RUNNABLE = tuple(c for c in CHECKS if c not in ("eager", "gradients"))


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
            raise ValueError(f"only: {name!r} {why}; the checks: {', '.join(RUNNABLE)}")


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


@dataclasses.dataclass
class Row:
    """One check on one variant: its ``outcome`` (one of ``OUTCOMES``), the
    ``detail`` (the deepest error of the chain on one line, without the
    traceback, or a note), and ``see``: the course's page and section that
    teach the fix of a failure or the remedy of a limitation."""

    check: str
    variant: str
    outcome: str  # one of OUTCOMES
    detail: str = ""
    see: str = ""  # the course's page and section with the fix or remedy
    # How telling a failure on the variant is, from 0: the sample as given,
    # its layouts, gradients, other dtypes, expanded, empty, the rest.
    rank: int = 6
    # The variant as fields (sample, layout, dtype, device, grad), where the
    # row is about one; what the JSON writes beside the label.
    at: dict = None
    seconds: float = 0.0  # what the check took on this variant


@dataclasses.dataclass
class Report:
    """What ``check_operator`` found: every ``Row``, and the seconds each check
    took. Each row has one of five outcomes:

    * ``failed``: a bug of the operator, with the page and section that teach
      the fix;
    * ``limitation``: true and by design (no backward, no double backward, no
      forward-mode derivative, an argument that gets no gradient, a clear
      refusal of some layout), with the remedy where the course has one;
    * ``not applicable``: a variant the eager kernel refuses, or a check that
      makes no sense for the operator, with the reason;
    * ``skipped``: what you declared not to check, with your reason;
    * ``passed``.

    ``passed`` is true when no row failed and some check ran (``checked``).
    Printing the report groups the rows
    of a check that share an outcome and a cause. ``as_json`` and
    ``as_markdown`` write reports for a machine and for a CI job's summary.
    """

    operator: str
    variants: int = 0
    rows: list = dataclasses.field(default_factory=list)
    seconds: dict = dataclasses.field(default_factory=dict)  # per check
    # Called with each row as it is added (an isolated run's child streams
    # them to its parent, so that a crash loses none).
    listener: object = dataclasses.field(default=None, repr=False, compare=False)
    # Ctrl-C stopped the check of this operator: the rows are what finished.
    interrupted: bool = False
    # Where the operator is defined: (file, line), for annotations; or None.
    location: tuple = None
    # Where it was checked (core.environment), for the JSON report.
    environment: dict = dataclasses.field(default=None, repr=False, compare=False)

    def add(self, row):
        """Add ``row``, and tell the listener."""
        self.rows.append(row)
        if self.listener is not None:
            self.listener(row)

    @property
    def checked(self):
        """Whether any check ran (a row passed, failed or found a limitation)."""
        return any(r.outcome in ("passed", "failed", "limitation") for r in self.rows)

    @property
    def passed(self):
        """No row failed, and something was checked."""
        return self.checked and not self.failed

    @property
    def failed(self):
        """The failed rows, the most telling first (on the sample as given,
        then its other layouts, gradients, other dtypes, expanded, empty)."""
        return sorted(
            (row for row in self.rows if row.outcome == "failed"),
            key=lambda row: row.rank,
        )

    @property
    def limitations(self):
        """The limitation rows (see ``limitation_causes`` for how many
        limitations they say)."""
        return [row for row in self.rows if row.outcome == "limitation"]

    @property
    def limitation_causes(self):
        """How many limitations the operator has (its limitation rows grouped
        by check and cause, as the printed report lists them). The report's
        first line, the JSON and the Markdown all count them this way."""
        return sum(1 for group in self.groups() if group[0].outcome == "limitation")

    def spent(self, what, start):
        """Add the seconds since ``start`` to ``what``'s time."""
        self.seconds[what] = self.seconds.get(what, 0) + time.perf_counter() - start

    def outcome(self, check):
        """The worst outcome of ``check`` over the variants."""
        outcomes = {row.outcome for row in self.rows if row.check == check}
        return next((o for o in OUTCOMES if o in outcomes), "")

    def groups(self):
        """The rows, grouped by check, outcome and cause (numbers aside, but
        for declarations)."""
        grouped = {}
        order = sorted(self.rows, key=lambda row: CHECKS.index(row.check))
        for row in order:
            cause_key = row.detail  # a declaration is its own cause
            if row.variant != "declared":
                cause_key = re.sub(r"\d+", "#", row.detail)
            grouped.setdefault((row.check, row.outcome, cause_key), []).append(row)
        return list(grouped.values())

    def declared_skips(self):
        """{reason: [what it leaves out]} of the skips declared or asked for."""
        found = {}
        for row in self.rows:
            if (row.variant, row.outcome) == ("declared", "skipped"):
                what, _, reason = row.detail.partition(": ")
                found.setdefault(reason, []).append(what)
        return found

    def shown_groups(self):
        """The groups in the order the printed report lists them: failures
        first, the most telling first (see ``failed``), then the others by
        check."""
        groups = self.groups()
        failed = [g for g in groups if g[0].outcome == "failed"]
        failed.sort(key=lambda g: (min(r.rank for r in g), CHECKS.index(g[0].check)))
        return failed + [g for g in groups if g[0].outcome != "failed"]

    def __str__(self):
        limits = self.limitation_causes
        failed = len(self.failed)
        verdict = (
            "passed"
            if self.passed
            else f"{failed} row{'s' * (failed != 1)} failed"
            if failed
            else "nothing checked"
        )
        seconds = sum(self.seconds.values())
        lines = [
            f"{self.operator}: {self.variants} variant{'s' * (self.variants != 1)}, "
            f"{verdict}, "
            f"{limits} limitation{'s' * (limits != 1)}, {seconds:.1f} s"
        ]
        if self.interrupted:
            lines[0] += " (interrupted: what finished)"
        for group in self.shown_groups():
            if (group[0].variant, group[0].outcome) == ("declared", "skipped"):
                continue  # one line per reason, below
            first, ran = group[0], [r for r in self.rows if r.check == group[0].check]
            shown = first.variant
            if len(group) == len(ran) > 1:
                shown = f"all {len(ran)} variants"
            elif len(group) > 1:
                shown += f" and {len(group) - 1} more"
            lines.append(f"  {label(first.check)}: {first.outcome}, {shown}")
            notes = [first.detail]
            if first.see:
                kind = "fix" if first.outcome == "failed" else "remedy"
                notes.append(f"{kind}: {first.see}")
            for note in filter(None, notes):
                lines += textwrap.wrap(
                    note, 68, initial_indent=" " * 6, subsequent_indent=" " * 8
                )
        for reason, left in self.declared_skips().items():
            lines += textwrap.wrap(
                f"skipped ({reason}): {', '.join(map(label, left))}",
                70,
                initial_indent=" " * 2,
                subsequent_indent=" " * 6,
            )
        return "\n".join(lines)


NOISE = re.compile(
    r"\n\s*(from user code:|Set TORCH_LOGS|Exception raised from|While executing"
    r"|Original traceback|For more information|Developer debug context"
    r"|Explanation:|Hint:|To execute this test|The above exception"
    r"|The error above occurred)"
)
CPP_LOCATION = re.compile(r"^[^,]+, \S+\.(?:cpp|cu|cuh|h|hpp):\d+, ")
QUOTED = re.compile(r"got (\w+)\((['\"])(.*?)\2\)", re.S)
DEBUG_CONTEXT = re.compile(r"Developer debug context: (\w+(?:Error|Exception)) (.*)")


def deepest(error):
    """The innermost error that ``error`` names as its cause and that has a
    message. An error raised while another was handled is not caused by it."""
    chain = [error]
    while True:
        inner = getattr(chain[-1], "inner_exception", None) or chain[-1].__cause__
        if not isinstance(inner, BaseException) or inner in chain:
            break
        chain.append(inner)
    return next((e for e in reversed(chain) if str(e).strip()), error)


def cause(error):
    """The deepest error's type and message, on one line."""
    inner = deepest(error)
    kind, text = type(inner).__name__, str(inner).strip()
    quoted = QUOTED.search(text)  # what Dynamo's run with fake tensors got
    context = DEBUG_CONTEXT.search(text)
    if quoted:
        kind, text = quoted.group(1), quoted.group(3).replace("\\'", "'")
    elif context:
        kind, text = context.groups()
    text = NOISE.split("\n" + text)[0]
    text = re.split(r",?\s*numerical:", text)[0]  # gradcheck's Jacobians
    return f"{kind}: {CPP_LOCATION.sub('', ' '.join(text.split()))}"


SHAPES = "Fake Kernels and Dynamic Shapes"
TROUBLE = "Troubleshooting Custom Operators"
MUTABLE = "Functional and Mutable Operators"
PYTHON_OPS = "Custom Python Operators"
LAYOUTS_PAGE = "Layouts, CUDA Graphs and Streams"
EDGES = "Sharp Edges: PyTorch Behaviours That Surprise Operator Authors"
CPP = "C++ Custom Operators"
FIXES = [  # (check, pattern of the detail, page, section): the first match wins
    ("", r"torch\.no_grad", "What a Custom Operator Costs",
     "Switching autograd off, properly"),
    ("", r"(?:^|\()no backward", PYTHON_OPS, "Adding training support for crop"),
    ("", r"no double backward.*numpy", TROUBLE, "A backward written in NumPy"),
    ("", r"no double backward", CPP, "A backward formula, registered from Python"),
    ("gradgradcheck", r"modified by an inplace operation",
     "Training and Other Registrations", "Training with register_autograd"),
    ("forward-ad", r"zero tangents", EDGES, "Forward-mode AD returns no tangent"),
    ("eager", r"", LAYOUTS_PAGE, "What the operator receives"),
    ("gradients", r"", PYTHON_OPS, "Adding training support for crop"),
    ("test_autograd", r"", PYTHON_OPS, "Adding training support for crop"),
    ("gradcheck", r"", PYTHON_OPS, "gradcheck catches it"),
    ("gradgradcheck", r"", TROUBLE, "A backward written in NumPy"),
    ("forward-ad", r"", "Custom Operators in Function Transforms",
     "The fix: an autograd.Function around the operator"),
    ("vmap", r"", "Training and Other Registrations", "Batching with register_vmap"),
    ("recompiles", r"", SHAPES, "A fake kernel that specializes"),
    ("layout", r"", LAYOUTS_PAGE, "An operator that sees the layout"),
    ("compiled", r"^Inductor fails", None, None),  # PyTorch's bug: no section
    ("", r"u\d+ >= 2", EDGES, "create_unbacked_symint assumes at least two"),
    ("", r"\bhas size \[|invalid gradient at index \d+ - got \[|negative dimension",
     SHAPES, "Output sizes computed from input sizes"),
    ("compiled", r"capture_dynamic", SHAPES, "Output sizes that depend on the data"),
    ("", r"stride", TROUBLE, "Fake kernel with the wrong strides"),
    ("", r"dtype", TROUBLE, "The two detectors"),
    ("", r"mismatched tensor metadata|MetadataMismatch", TROUBLE, "The two detectors"),
    ("", r"fake impl|fake kernel|\bmeta\b", TROUBLE,
     "No fake kernel under torch.compile"),
    ("", r"not defined as mutable|after the call differs", MUTABLE,
     "What breaks when mutates_args lies"),
    ("", r"alias", MUTABLE, "Never return an input, or a view of one"),
    ("", r"device", TROUBLE, "Tensors on the wrong device"),
    ("compiled", r"differs", PYTHON_OPS, "Testing Python custom operators"),
    ("export", r"", "Custom Operators in torch.export", "Export needs fake kernels"),
    ("", r"", TROUBLE, "Which check catches which mistake"),
]  # fmt: skip


# The file of each page FIXES names, for links to the published course.
PAGES = {
    SHAPES: "fake_kernels_and_shapes",
    TROUBLE: "custom_op_troubleshooting",
    MUTABLE: "mutable_custom_ops",
    PYTHON_OPS: "python_custom_ops",
    LAYOUTS_PAGE: "strides_and_runtime",
    EDGES: "sharp_edges",
    CPP: "cpp_custom_ops",
    "What a Custom Operator Costs": "custom_op_performance",
    "Custom Operators in Function Transforms": "custom_op_transforms",
    "Training and Other Registrations": "custom_op_registrations",
    "Custom Operators in torch.export": "custom_ops_in_export",
}


def see_for(check, detail):
    """The page and section that teach the fix of ``detail``, as
    ``Page > Section``, followed by its address when ``SITE_URL`` is set."""
    sizes = re.search(r"expected size (\d+)==(\d+)", detail)
    if sizes and sizes.group(1) != sizes.group(2):  # Inductor's check: a size
        section = "Output sizes computed from input sizes"
        return f"{SHAPES} > {section}" + link(SHAPES, section)
    for where, pattern, page, section in FIXES:
        if check.startswith(where) and re.search(pattern, detail, re.I):
            return f"{page} > {section}" + link(page, section) if page else ""
    return ""


def link(page, section):
    """`` (https://.../tutorials/page.html#section)`` under ``SITE_URL``, else ''."""
    site = os.environ.get("SITE_URL", "").rstrip("/")
    if not site:
        return ""
    anchor = re.sub(r"[^a-z0-9]+", "-", section.lower()).strip("-")
    return f" ({site}/tutorials/{PAGES[page]}.html#{anchor})"


@contextlib.contextmanager
def quiet():
    """Silence warnings and log messages: the rows say what went wrong."""
    before = logging.root.manager.disable  # quiet() may be nested
    logging.disable(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(before)


# -- Reports a machine reads --------------------------------------------------

JSON_FORMAT = "operator_checker.report/2"


def json_schema():
    """The JSON Schema of the JSON report (``report.schema.json``, shipped in
    the package): validate a report with it in your own CI."""
    import importlib.resources
    import json

    text = importlib.resources.files("operator_checker").joinpath("report.schema.json")
    return json.loads(text.read_text())


def at_of(where):
    """A row's ``at`` from where it was (``core.Steps``' keys): the variant's
    fields, the sample and device of a step on them, or None."""
    where = list(where) if isinstance(where, (list, tuple)) else [where]
    if where[:1] == ["variant"] and len(where) == 6:
        _, sample, layout, dtype, device, grad = where
        return {"sample": sample, "layout": layout, "dtype": dtype,
                "device": device, "grad": grad}  # fmt: skip
    if where[:1] in (["as given"], ["empty"], ["gradients"]) and len(where) > 1:
        found = {"sample": where[1]}
        if len(where) > 2:
            found["device"] = where[2]
        return found
    return None


def row_dict(operator, row):
    """One row as the JSON report writes it."""
    return {
        "operator": operator,
        "check": row.check,
        "variant": row.variant,
        "at": row.at,
        "outcome": row.outcome,
        "detail": row.detail,
        "fix": row.see,
        "seconds": round(row.seconds, 3),
    }


def as_json(reports, errors=(), environment=None, **about):
    """The JSON report of a run: where it ran (``environment``: torch,
    Python, platform, devices, the compiler settings that change verdicts),
    every row of every operator, the operators' verdicts, and the targets
    that could not be checked (``errors``: ``(target, message)``). It follows
    ``report.schema.json``, which ships in the package."""
    return {
        "format": JSON_FORMAT,
        **about,
        "environment": environment,
        "operators": [
            {
                "operator": report.operator,
                "location": location_dict(report.location),
                "passed": report.passed,
                "checked": report.checked,
                "interrupted": report.interrupted,
                "variants": report.variants,
                "failed_rows": len(report.failed),
                "limitations": report.limitation_causes,
                "limitation_rows": len(report.limitations),
                "seconds": round(sum(report.seconds.values()), 2),
            }
            for report in reports
        ],
        "not_checked": [{"target": t, "error": m} for t, m in errors],
        "rows": [row_dict(r.operator, row) for r in reports for row in r.rows],
    }


def location_dict(location):
    return {"file": location[0], "line": location[1]} if location else None


def as_github(reports, errors=()):
    """GitHub Actions workflow commands: an ``::error`` per group of failed
    rows and a ``::warning`` per limitation, at the operator's definition
    where it is known (a file under the working folder), and an ``::error``
    per target that could not be checked."""

    def escaped(text, property=False):
        text = str(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        return text.replace(":", "%3A").replace(",", "%2C") if property else text

    lines = []
    for report in reports:
        where = ""
        if report.location:
            file, line = report.location
            where = f"file={escaped(file, True)},line={line},"
        for group in report.shown_groups():
            first = group[0]
            if first.outcome not in ("failed", "limitation"):
                continue
            kind = "error" if first.outcome == "failed" else "warning"
            more = f" and {len(group) - 1} more" if len(group) > 1 else ""
            title = escaped(f"{report.operator} {first.check}: {first.outcome}", True)
            said = f"{first.variant}{more}: {first.detail}"
            if first.see:
                said += f" ({'fix' if kind == 'error' else 'remedy'}: {first.see})"
            lines.append(f"::{kind} {where}title={title}::{escaped(said)}")
    for target, message in errors:
        title = escaped(f"{target}: not checked", True)
        lines.append(f"::error title={title}::{escaped(message)}")
    return "\n".join(lines) + ("\n" if lines else "")


def as_junit(reports, errors=()):
    """A JUnit XML report: a test case per operator and check, as pytest's
    ids name them (``ns::name[check]``), failed, skipped or passed as the
    check's rows say; a target that could not be checked is an error."""
    from xml.etree import ElementTree

    suite = ElementTree.Element("testsuite", name="operator_checker")
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for report in reports:
        for check in CHECKS:
            rows = [row for row in report.rows if row.check == check]
            if not rows:
                continue
            counts["tests"] += 1
            case = ElementTree.SubElement(
                suite,
                "testcase",
                classname=report.operator,
                name=f"{report.operator}[{check}]",
                time=f"{sum(row.seconds for row in rows):.3f}",
            )
            failed = [g for g in report.groups() if g[0].check == check
                      and g[0].outcome == "failed"]  # fmt: skip
            outcomes = {row.outcome for row in rows}
            if failed:
                counts["failures"] += 1
                first = failed[0][0]
                body = "\n".join(
                    f"{g[0].variant} ({len(g)} variants): {g[0].detail}"
                    + (f"\nfix: {g[0].see}" if g[0].see else "")
                    for g in failed
                )
                element = ElementTree.SubElement(case, "failure", message=first.detail)
                element.text = body
            elif not outcomes & {"passed", "limitation"}:
                counts["skipped"] += 1
                ElementTree.SubElement(case, "skipped", message=rows[0].detail)
            for row in rows:
                if row.outcome == "limitation":
                    properties = case.find("properties")
                    if properties is None:
                        properties = ElementTree.SubElement(case, "properties")
                    ElementTree.SubElement(
                        properties,
                        "property",
                        name="operator_checker limitation",
                        value=f"{row.variant}: {row.detail}",
                    )
    for target, message in errors:
        counts["tests"] += 1
        counts["errors"] += 1
        case = ElementTree.SubElement(suite, "testcase", classname=target, name=target)
        ElementTree.SubElement(case, "error", message=message)
    for key, value in counts.items():
        suite.set(key, str(value))
    ElementTree.indent(suite)
    return ElementTree.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def as_markdown(reports, errors=()):
    """A summary for a CI job's page: one line per operator, then each failed
    row and each limitation, then what could not be checked."""

    def cell(text):
        return str(text).replace("|", "\\|").replace("\n", " ")

    lines = [
        "## operator_checker",
        "",
        "| operator | verdict | failed rows | limitations | not applicable rows "
        "| skipped rows | variants |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for report in reports:
        count = {o: sum(r.outcome == o for r in report.rows) for o in OUTCOMES}
        verdict = (
            "passed"
            if report.passed
            else "**failed**"
            if report.failed
            else "nothing checked"
        )
        lines.append(
            f"| `{report.operator}` | {verdict} | {count['failed']} | "
            f"{report.limitation_causes} | {count['not applicable']} | "
            f"{count['skipped']} | {report.variants} |"
        )
    for target, _message in errors:
        lines.append(f"| `{target}` | not checked | | | | | |")
    for title, outcome in (("Failed", "failed"), ("Limitations", "limitation")):
        # Grouped as the printed report groups them: check, cause, variants.
        groups = [
            (report.operator, group)
            for report in reports
            for group in report.shown_groups()
            if group[0].outcome == outcome
        ]
        if groups:
            lines += [
                "",
                f"### {title}",
                "",
                "| operator | check | variants | detail | fix |",
                "| --- | --- | --- | --- | --- |",
            ]
            for op, group in groups:
                first = group[0]
                more = f" and {len(group) - 1} more" if len(group) > 1 else ""
                lines.append(
                    f"| `{op}` | {label(first.check)} | {cell(first.variant)}{more} | "
                    f"{cell(first.detail)} | {cell(first.see)} |"
                )
    if errors:
        lines += ["", "### Not checked", ""]
        lines += [f"- `{target}`: {cell(message)}" for target, message in errors]
    return "\n".join(lines) + "\n"
