"""The report
----------
Every check on every variant adds one ``Row``. Printing the report groups
the rows of a check that share an outcome and a cause (numbers aside), and
names the page and section that teach the fix of a failure, or the remedy
of a limitation (``operator_checker.fixes``). The reports a machine reads:
JSON (with the schema the package ships), Markdown, GitHub's workflow
commands and JUnit XML. No torch here.
"""

import dataclasses
import re
import textwrap
import time

from operator_checker.options import CHECKS, OUTCOMES, label


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
