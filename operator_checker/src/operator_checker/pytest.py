"""pytest integration: one test per check of an operator.

In a test file::

    from operator_checker.pytest import operator_tests

    test_nms = operator_tests(
        "torchvision::nms", samples="tests/nms_samples.pt", imports=["torchvision"]
    )

pytest then collects ``test_nms[eager]``, ``test_nms[test_schema]``, ...,
``test_nms[recompiles]``: one test per check, by its id, those that
``only=`` or ``quick=True`` leave out included (they are skipped).
``check_operator`` runs once for the operator (in a child process, unless
``isolate=False``), on the checks the session selected (``-k
"gradcheck"`` checks gradcheck alone), before the first test runs (in an
xdist worker, by its first test; each operator's tests are one xdist group);
every test reads its check's rows of that report:

* a failed row fails the test, with the row's variant, detail and fix;
* limitations pass, each recorded as a property (``--junitxml`` writes it)
  and listed in the "operator_checker limitations" section of the summary;
* a check with only rows that do not apply, or that were declared skipped,
  is skipped, with the reason;
* an operator that cannot be checked (a bad target, samples that do not fit)
  errors every test with the one-line reason.

``test_nms[eager]`` stands for the plain calls that make the variants: it
fails when the kernel refuses its own sample, or crashes or hangs on one.

``samples`` is a file written by ``save_samples`` (a relative path is looked
for in the current directory, the rootdir, then beside the test file, as are
the ``.py`` and ``.so`` files of ``imports``), a list of samples, or a
function returning either. The other keyword arguments are
``check_operator``'s. An isolated run's child process imports from the
folders on the session's ``sys.path`` too, so an operator defined in a test
file or beside it is found there; the tests of every operator with the same
``imports`` share one child for the session.

``--operator-checker-quick``, or ``operator_checker_quick = true`` in the
ini file, runs the fast checks alone, as in a pre-commit hook.

This module is a pytest plugin (the package registers it), so it imports no
torch when it is loaded: pytest loads it in every run of an environment that
has the package. Without the package installed, add
``pytest_plugins = ["operator_checker.pytest"]`` to a ``conftest.py``.
"""

import os
import sys
from pathlib import Path

import pytest

from operator_checker.options import (
    ARGUMENTS,
    CHECKS,
    LIBRARY_SUFFIXES,
    OPERATOR_NAME,
    RUNNABLE,
    check_id,
    check_only,
)

LIMITATION = "operator_checker limitation"  # the name of a recorded property
SHOWN = 5  # the causes a message lists before saying how many more


class NotChecked(Exception):
    """The operator could not be checked: the reason, in one line."""


class OperatorTests:
    """What ``operator_tests`` was given, and the report once computed."""

    def __init__(self, op, samples, options):
        self.op, self.samples, self.options = op, samples, options
        self.result = None  # a Report, or the exception that stopped the check
        self.selected = None  # the checks the session selected (-k), if fewer
        self.quick = False  # --operator-checker-quick, or its ini key

    @property
    def name(self):
        if isinstance(self.op, str):
            return self.op
        from operator_checker import _torch

        return _torch.display_name(self.op)

    def report(self, test_file, rootdir):
        """The report, computed by the first test that asks for it."""
        if self.result is None:
            try:
                self.result = self.compute(test_file, rootdir)
            except Exception as error:
                self.result = unchecked(error)
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result

    def compute(self, test_file, rootdir):
        from operator_checker.api import check_operator

        samples = self.samples() if callable(self.samples) else self.samples
        if isinstance(samples, (str, os.PathLike)):
            samples = self.loaded(find(samples, test_file, rootdir))
        elif isinstance(samples, dict):
            from operator_checker.samples import as_samples

            samples = self.chosen(as_samples(samples), "the samples")
        options = {"isolate": True, **self.options}
        if self.quick:
            options["quick"] = True
        if self.selected is not None:
            # Only what the session runs: -k "test_nms and gradcheck" checks
            # gradcheck alone (the calls that make the variants always run).
            wanted = [c for c in CHECKS if c in self.selected and c in RUNNABLE]
            if options.get("only") is not None:
                wanted = [c for c in wanted if c in map(check_id, options["only"])]
            options["only"] = wanted
        options["imports"] = [
            str(find(what, test_file, rootdir, "imports"))
            if what.endswith((".py", *LIBRARY_SUFFIXES))
            else what
            for what in map(str, options.get("imports", ()))
        ]
        return check_operator(self.op, samples, **options)

    def loaded(self, path):
        from operator_checker.samples import load_samples

        return self.chosen(load_samples(path), str(path))

    def chosen(self, found, where):
        """This operator's samples in ``{operator: [samples]}``: its own entry,
        or a lone entry that names no operator; never another's."""
        from operator_checker.samples import qualified_name, samples_for

        wanted = [self.name]
        if isinstance(self.op, str):
            match = OPERATOR_NAME.match(self.op)
            if match:
                wanted.append("::".join(match.groups()[:2]))
        else:
            wanted.append(qualified_name(self.op))
        try:
            return samples_for(found, wanted, where)
        except ValueError as error:
            raise NotChecked(str(error)) from None


def unchecked(error):
    """``error`` as one line, where it says what to fix; else as it is."""
    from operator_checker.isolation import JobError
    from operator_checker.targets import TargetError

    if isinstance(error, (NotChecked, TargetError, JobError)):
        return NotChecked(first_line(error))
    if isinstance(error, (ValueError, TypeError, OSError)):
        return NotChecked(f"{type(error).__name__}: {first_line(error)}")
    return error


def first_line(error):
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def find(samples, test_file, rootdir, what="samples"):
    """A file named by ``samples=`` (or ``imports=``): as given, else under the
    rootdir, else beside the test."""
    path = Path(samples)
    candidates = [path]
    if not path.is_absolute():
        candidates += [Path(rootdir) / path, Path(test_file).parent / path]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise NotChecked(f"{what}={str(samples)!r}: no such file")


def operator_tests(op, samples, **options):
    """A test function, parametrized with one test per check of ``op``.

    Assign it to a name that pytest collects: ``test_crop =
    operator_tests(crop, samples=[(image, 2)])``. ``op`` and the options are
    ``check_operator``'s, with ``isolate=True`` unless you say otherwise.
    """
    unknown = sorted(set(options) - set(ARGUMENTS))
    if unknown:
        raise TypeError(
            f"operator_tests() got an unexpected keyword argument {unknown[0]!r}; "
            f"it takes {', '.join(ARGUMENTS)}"
        )
    check_only(options.get("only"))
    tests = OperatorTests(op, samples, options)

    # One xdist group per operator: under --dist loadgroup, its tests run in
    # one worker, which checks it once.
    @pytest.mark.xdist_group(f"operator_checker {tests.name}")
    @pytest.mark.parametrize("check", CHECKS)
    def test_operator(check, operator_checker_report, request):
        check_verdict(operator_checker_report, check, request.node.user_properties)

    test_operator.operator_checker = tests
    # Where the tests are defined, for pytest's locations (a skip's line, a
    # failure's header): the line that called operator_tests, not this file.
    caller = sys._getframe(1)
    test_operator.__code__ = test_operator.__code__.replace(
        co_filename=caller.f_code.co_filename, co_firstlineno=caller.f_lineno
    )
    return test_operator


def pytest_configure(config):
    # operator_tests marks each operator's tests with xdist_group (for
    # pytest-xdist's --dist loadgroup): known, with or without xdist.
    config.addinivalue_line(
        "markers", "xdist_group(name): run these tests in one xdist worker"
    )


def pytest_addoption(parser):
    group = parser.getgroup("operator_checker")
    group.addoption(
        "--operator-checker-quick",
        action="store_true",
        help="operator_tests run the fast checks alone, on the samples as given "
        "(a pre-commit hook's run)",
    )
    parser.addini(
        "operator_checker_quick",
        type="bool",
        default=False,
        help="operator_tests run the fast checks alone (as --operator-checker-quick)",
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    """Narrow each operator's check to the tests the session selected (after
    -k and -m deselected the others), and apply the quick option."""
    quick = config.getoption("operator_checker_quick", False) or config.getini(
        "operator_checker_quick"
    )
    selected = {}
    for item in items:
        tests = getattr(getattr(item, "function", None), "operator_checker", None)
        if tests is not None:
            selected.setdefault(id(tests), (tests, set()))[1].add(
                item.callspec.params["check"]
            )
    for tests, checks in selected.values():
        tests.quick = bool(quick)
        tests.selected = None if set(CHECKS) <= checks else checks


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session):
    """Check every selected operator before the first test runs, so that no
    test's setup pays for it (``--durations`` shows the tests as they are);
    in an xdist worker, which does not know which tests it will be sent, the
    first test of an operator checks it instead."""
    if (
        not hasattr(session.config, "workerinput")
        and not session.config.option.collectonly
    ):
        seen = set()
        for item in session.items:
            tests = getattr(getattr(item, "function", None), "operator_checker", None)
            if tests is not None and id(tests) not in seen:
                seen.add(id(tests))
                try:
                    tests.report(item.path, session.config.rootpath)
                except NotChecked:
                    pass  # every test of the operator says so
    return (yield)


@pytest.fixture
def operator_checker_report(request):
    """The report of the operator that ``request``'s test function checks."""
    tests = getattr(request.function, "operator_checker", None)
    if tests is None:
        raise pytest.UsageError(
            "operator_checker_report serves the tests that operator_tests() makes"
        )
    try:
        return tests.report(request.path, request.config.rootpath)
    except NotChecked as error:
        said = f"{tests.name}: not checked: {error}"
    pytest.fail(said, pytrace=False)  # outside the except: one line, no chain


def check_verdict(report, check, properties):
    """Pass, fail or skip the test of ``check`` from its rows of ``report``;
    each limitation goes to ``properties`` (the test's ``user_properties``,
    which ``--junitxml`` writes; ``record_property`` would warn under the
    default xunit2 family)."""
    rows = [row for row in report.rows if row.check == check]
    for group in groups(report, check, "limitation"):
        remedy = f" (remedy: {group[0].see})" if group[0].see else ""
        properties.append((LIMITATION, said(group) + remedy))
    failed = groups(report, check, "failed")
    if failed:
        count = sum(map(len, failed))
        lines = [f"{check} failed on {count} variant{'s' * (count != 1)}:"]
        for group in failed[:SHOWN]:
            lines.append(f"  {said(group)}")
            if group[0].see:
                lines.append(f"    fix: {group[0].see}")
        if len(failed) > SHOWN:
            lines.append(f"  and {len(failed) - SHOWN} more causes")
        pytest.fail("\n".join(lines), pytrace=False)
    if check == "eager" or {row.outcome for row in rows} & {"passed", "limitation"}:
        return  # eager's rows are only what the kernel refused, or crashed on
    if not rows:
        skip(f"no variant of the samples calls for {check}")
    reasons = [
        said(g) if g[0].outcome == "skipped" else f"not applicable on {said(g)}"
        for g in groups(report, check)
    ]
    more = f"; and {len(reasons) - SHOWN} more" if len(reasons) > SHOWN else ""
    skip("; ".join(reasons[:SHOWN]) + more)


def skip(reason):
    """Skip the running test, reported at its own location, not this file's."""
    raise pytest.skip.Exception(reason, _use_item_location=True)


def groups(report, check, outcome=None):
    """``check``'s rows grouped by outcome and cause, of ``outcome`` if given."""
    return [
        group
        for group in report.groups()
        if group[0].check == check and outcome in (None, group[0].outcome)
    ]


def said(group):
    """A group of rows in one line: its variants, short, and its detail; a
    declaration's detail alone (it names what it declares)."""
    first = group[0]
    if first.variant == "declared":
        return first.detail
    more = f" and {len(group) - 1} more" if len(group) > 1 else ""
    return f"{first.variant}{more}: {first.detail}"


def pytest_terminal_summary(terminalreporter):
    """List the limitations the operators' tests recorded."""
    found = [
        (report.nodeid, value)
        for report in terminalreporter.stats.get("passed", [])
        for name, value in getattr(report, "user_properties", ())
        if name == LIMITATION
    ]
    if found:
        terminalreporter.section("operator_checker limitations")
        for nodeid, said in found:
            terminalreporter.line(f"{nodeid}: {said}")
