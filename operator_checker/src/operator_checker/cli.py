"""The command: ``python -m operator_checker TARGET ... --samples FILE``.

With no TARGET, it checks what ``[tool.operator_checker]`` in the project's
``pyproject.toml`` names (see ``operator_checker.config``); options on the
command line take precedence over the file's, and declarations add to its.

Exit status, one meaning each:

* 0: every operator was checked and no row failed;
* 1: a row failed (a bug of an operator);
* 2: the checker could not run: a bad target, option, configuration or
  samples source, an import that fails, samples that do not fit the schema;
  one line on stderr names what to fix;
* 3: the checker itself failed (a bug of the checker): one line, no
  traceback;
* 5: nothing was checked (every check left out), as pytest's 5;
* 130: interrupted (Ctrl-C): what finished is printed and written, marked
  interrupted.
"""

import argparse
import difflib
import enum
import json
import os
import sys
import time

import operator_checker
from operator_checker.config import ConfigError, load
from operator_checker.isolation import Interrupted, Job, JobError, run_jobs
from operator_checker.options import (
    DEVICE_TYPES,
    DTYPE_NAMES,
    QUICK_CHECKS,
    RUNNABLE,
    Options,
    check_id,
)
from operator_checker.report import Report


class ExitCode(enum.IntEnum):
    """The command's exit status, one meaning each (as pytest's ``ExitCode``
    and ruff's statuses). When rows failed and a target could not be checked
    too, the status is ``CANNOT_RUN``: a run that did not check everything
    it was asked to check says so first."""

    #: Every operator was checked, and no row failed.
    OK = 0
    #: A row failed: a bug of an operator.
    ROWS_FAILED = 1
    #: The checker could not run: a bad target, option, configuration or
    #: samples source, an import that fails, samples that do not fit.
    CANNOT_RUN = 2
    #: The checker itself failed: its bug, said in one line.
    INTERNAL_ERROR = 3
    #: Nothing was checked: every check, or every variant, was left out.
    NOTHING_CHECKED = 5
    #: Interrupted (Ctrl-C): what finished was printed and written.
    INTERRUPTED = 130


OK, FAILED, CANNOT_RUN = ExitCode.OK, ExitCode.ROWS_FAILED, ExitCode.CANNOT_RUN
INTERNAL, NOTHING_CHECKED = ExitCode.INTERNAL_ERROR, ExitCode.NOTHING_CHECKED
INTERRUPTED = ExitCode.INTERRUPTED
FORMATS = ("text", "json", "markdown", "github", "junit")

EXAMPLES = """\
examples:
  record samples once, from calls your code makes:
    with operator_checker.capture_samples(torch.ops.torchvision.nms) as found:
        torchvision.ops.nms(boxes, scores, 0.5)
    operator_checker.save_samples("samples.pt", found)
  then check:
    python -m operator_checker torchvision::nms --import torchvision \\
        --samples samples.pt
    python -m operator_checker mylib::op --import mylib \\
        --samples tests/ops.py:samples --quick
    python -m operator_checker torchvision::roi_align --import torchvision \\
        --samples samples.pt --nondifferentiable "rois=holds image indices"
  or name all of it in pyproject.toml's [tool.operator_checker], and run
    python -m operator_checker --output-format github

exit status: {statuses}.
"""


def statuses():
    """The exit statuses, for --help: ``0 ok, 1 rows failed, ...``."""
    return ", ".join(
        f"{code.value} {code.name.lower().replace('_', ' ')}" for code in ExitCode
    )


def parser(prog="python -m operator_checker"):
    parse = argparse.ArgumentParser(
        prog=prog,
        description=(
            "Run every check of the PyTorch custom operators course on each "
            "TARGET operator, in a child process: a crash of the operator is a "
            "failed row, not the end of the run."
        ),
        epilog=EXAMPLES.format(statuses=statuses()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parse.add_argument(
        "targets",
        nargs="*",
        metavar="TARGET",
        help="ns::name, ns::name.overload, torch.ops.ns.name or "
        "package.module:attribute (default: the targets of [tool.operator_checker])",
    )
    parse.add_argument(
        "--config",
        metavar="FILE",
        help="read [tool.operator_checker] from FILE (default: the first "
        "pyproject.toml with one, from this folder upwards)",
    )
    parse.add_argument(
        "--import",
        dest="imports",
        action="append",
        metavar="MODULE",
        help="import MODULE (or run FILE.py, or load LIBRARY.so) first: what registers "
        "the operators; repeat for several",
    )
    parse.add_argument(
        "--samples",
        metavar="SOURCE",
        help="a file written by operator_checker.save_samples, or module:function "
        "returning samples ({operator: [samples]} or a list for any operator)",
    )
    parse.add_argument(
        "--output-format",
        choices=FORMATS,
        help="what to print on stdout: the report as text (default), JSON, "
        "Markdown, GitHub annotations or JUnit XML",
    )
    parse.add_argument(
        "--json", metavar="FILE", help="write every row as JSON (-: to stdout)"
    )
    parse.add_argument(
        "--markdown",
        metavar="FILE",
        help="write a summary in Markdown (a CI job summary)",
    )
    parse.add_argument(
        "--only",
        metavar="CHECK",
        action="append",
        help=f"run only this check (repeat); the checks: {', '.join(RUNNABLE)}",
    )
    parse.add_argument(
        "--skip",
        metavar="NAME[=REASON]",
        action="append",
        default=[],
        help="leave out a check, a layout, a dtype or a device, with your reason "
        "(repeat)",
    )
    parse.add_argument(
        "--limitation",
        metavar="CHECK=REASON",
        action="append",
        default=[],
        help="a check whose failures are known, by design (repeat)",
    )
    parse.add_argument(
        "--nondifferentiable",
        metavar="ARG=REASON",
        action="append",
        default=[],
        help="an argument the gradient checks leave alone (repeat)",
    )
    parse.add_argument(
        "--indices",
        metavar="ARG=REASON",
        action="append",
        help="an argument that holds indices, offsets or lengths (repeat; "
        "default: every integer or bool tensor); --indices none: none does",
    )
    parse.add_argument(
        "--no-exact",
        dest="exact",
        action="store_false",
        default=None,
        help="compare compiled, exported and batched results within tolerance, "
        "not bit for bit",
    )
    parse.add_argument(
        "--nondet-tol",
        type=float,
        metavar="TOLERANCE",
        help="the run-to-run difference a nondeterministic kernel may show",
    )
    parse.add_argument(
        "--quick",
        action="store_true",
        default=None,
        help=f"the fast checks ({', '.join(QUICK_CHECKS)}) on the "
        "samples as given: for a pre-commit hook",
    )
    parse.add_argument(
        "--dtype",
        dest="dtypes",
        action="append",
        metavar="DTYPE",
        help="derive variants in this floating-point dtype (repeat); default: "
        f"{', '.join(DTYPE_NAMES)} (each sample is checked in its own dtype too, "
        "and gradients in float64)",
    )
    parse.add_argument(
        "--device",
        dest="devices",
        action="append",
        metavar="DEVICE",
        help="check on this device (repeat); default: cpu, and cuda if there is one",
    )
    parse.add_argument(
        "--timeout",
        type=positive,
        metavar="SECONDS",
        help="the child process may stay silent this long, importing included; "
        "a step that takes longer is a failed row (default 300)",
    )
    parse.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print each step as it starts, on stderr (the default on a terminal)",
    )
    parse.add_argument(
        "--no-isolate",
        dest="isolate",
        action="store_false",
        default=None,
        help="run in this process (faster to start; a crash ends the run)",
    )
    parse.add_argument(
        "--version",
        action="version",
        version=f"operator-checker {operator_checker.__version__}",
    )
    return parse


def positive(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def fail(message, status=CANNOT_RUN):
    print(f"operator_checker: error: {message}", file=sys.stderr)
    return status


def samples_source(source):
    """The ``--samples`` source as the child reads it: a file (which must
    exist), or ``module:function``, which the child imports and calls."""
    if os.path.exists(source):
        return os.path.abspath(source)
    if ":" not in source:
        raise JobError(f"--samples {source}: no such file")
    module, _, function = source.rpartition(":")
    if not module or not function.isidentifier():
        raise JobError(
            f"--samples {source}: not a file, nor module:function (or file.py:function)"
        )
    if module.endswith(".py"):
        if not os.path.isfile(module):
            raise JobError(f"--samples {source}: no such file {module}")
        return f"{os.path.abspath(module)}:{function}"
    return source


def writable(path, option):
    """Refuse, before the run, a report path that cannot be written."""
    if path is None or path == "-":
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise JobError(f"{option} {path}: no such folder {folder}")
    if os.path.isdir(path) or not os.access(folder, os.W_OK):
        raise JobError(f"{option} {path}: cannot be written")


def reasons(pairs, option, reason_needed=True):
    """``{name: reason}`` from ``NAME=REASON`` arguments."""
    found = {}
    for pair in pairs or ():
        name, equals, reason = pair.partition("=")
        if not name or (reason_needed and not reason.strip()):
            raise JobError(f"{option} {pair}: write NAME=REASON")
        found[name.strip()] = reason.strip() or option
    return found


def main(argv=None, prog=None):
    """Run the command; the exit status (see the module's docstring)."""
    try:
        return run(argv, prog)
    except KeyboardInterrupt:
        print("operator_checker: interrupted", file=sys.stderr)
        return INTERRUPTED
    except Exception as error:  # a bug of the checker, never a row's status
        text = " ".join(str(error).split())[:300]
        return fail(f"internal: {type(error).__name__}: {text}", INTERNAL)


def settings(args, config):
    """The run's options: the command line's over the configuration's."""
    chosen = dict(config.options)
    for key in ("imports", "only", "dtypes", "devices"):
        if getattr(args, key):
            chosen[key] = getattr(args, key)
    for key in ("samples", "output_format", "json", "markdown", "timeout"):
        if getattr(args, key) is not None:
            chosen[key] = getattr(args, key)
    for key in ("quick", "isolate"):
        if getattr(args, key) is not None:
            chosen[key] = getattr(args, key)
    if args.targets:
        chosen["targets"] = args.targets
    return chosen


def declared(args):
    """The declarations of the command line, for every target."""
    found = {
        "skip": reasons(args.skip, "--skip", reason_needed=False),
        "limitations": reasons(args.limitation, "--limitation"),
        "nondifferentiable": reasons(args.nondifferentiable, "--nondifferentiable"),
    }
    if args.indices == ["none"]:
        found["indices"] = {}
    elif args.indices:
        found["indices"] = reasons(args.indices, "--indices")
    if args.exact is not None:
        found["exact"] = args.exact
    if args.nondet_tol is not None:
        found["nondet_tol"] = args.nondet_tol
    return found


def run(argv=None, prog=None):
    arguments = list(sys.argv[1:] if argv is None else argv)
    args = parser(prog or "python -m operator_checker").parse_args(arguments)
    try:
        config = load(args.config)
        chosen = settings(args, config)
        from_command = declared(args)
    except (ConfigError, JobError) as error:
        return fail(str(error))
    targets = chosen.get("targets")
    if not targets:
        return fail("no TARGET: name one, or list targets in [tool.operator_checker]")
    if not chosen.get("samples"):
        return fail("no samples: give --samples, or samples in [tool.operator_checker]")
    dtypes = chosen.get("dtypes") or list(DTYPE_NAMES)
    unknown_dtypes = [name for name in dtypes if name not in DTYPE_NAMES]
    if unknown_dtypes:
        names = ", ".join(DTYPE_NAMES)
        return fail(f"--dtype {unknown_dtypes[0]}: not one of {names}")
    for device in chosen.get("devices") or []:
        if device.partition(":")[0] not in DEVICE_TYPES:
            known = ", ".join(DEVICE_TYPES)
            return fail(f"--device {device}: not a device type ({known})")
    only = chosen.get("only")
    for name in map(check_id, only or []):
        if name not in RUNNABLE:
            close = difflib.get_close_matches(name, RUNNABLE, n=1)
            guess = f" (did you mean {close[0]}?)" if close else ""
            return fail(
                f"--only {name}: not a check one can run{guess}; the checks: "
                f"{', '.join(RUNNABLE)}"
            )
    jobs = []
    for target in targets:
        declarations = config.for_operator(target)
        for key, value in from_command.items():
            if isinstance(value, dict) and value:
                declarations[key] = {**declarations.get(key, {}), **value}
            elif not isinstance(value, dict) or key == "indices":
                declarations[key] = value
        try:
            options = Options.make(
                devices=chosen.get("devices"),
                dtypes=dtypes,
                exact=declarations.get("exact", True),
                nondet_tol=declarations.get("nondet_tol", 0.0),
                nondifferentiable=declarations.get("nondifferentiable", {}),
                indices=declarations.get("indices"),
                skip=declarations.get("skip", {}),
                limitations=declarations.get("limitations", {}),
                only=only,
                quick=bool(chosen.get("quick")),
            )
        except ValueError as error:
            return fail(f"{target}: {error}")
        if options.checks_nothing():
            return fail("every check is left out: nothing to check", NOTHING_CHECKED)
        imports = list(chosen.get("imports", []))
        jobs.append(Job(target, "", None, imports, options.to_json()))
    try:
        source = samples_source(chosen["samples"])
        writable(chosen.get("json"), "--json")
        writable(chosen.get("markdown"), "--markdown")
    except JobError as error:
        return fail(str(error))
    for job in jobs:
        job.samples = source
    echo = None
    if args.verbose or sys.stderr.isatty():

        def echo(line):
            print(f"  {line}", file=sys.stderr, flush=True)

    start = time.perf_counter()
    timeout = float(chosen.get("timeout", 300.0))
    if chosen.get("isolate", True):
        results = run_jobs(jobs, timeout=timeout, echo=echo)
    else:
        results = in_process(jobs)
    seconds = time.perf_counter() - start
    command = [prog or "python -m operator_checker", *arguments]
    return finish(chosen, jobs, results, seconds, command)


def in_process(jobs):
    """The jobs in this process (``--no-isolate``); Ctrl-C keeps what finished."""
    from operator_checker.core import environment, location, run_checks
    from operator_checker.isolation import job_inputs, one_line

    results = []
    for job in jobs:
        try:
            op, samples, options = job_inputs(job)
        except Exception as error:
            results.append(JobError(one_line(error)))
            continue
        report = Report(job.target)
        report.environment, report.location = environment(), location(op)
        try:
            results.append(run_checks(op, samples, options, report=report))
        except (TypeError, ValueError) as error:
            results.append(JobError(one_line(error)))
        except KeyboardInterrupt:
            report.interrupted = True
            results.append(report)
            break
    results += [Interrupted("interrupted before it was checked")] * (
        len(jobs) - len(results)
    )
    return results


def finish(chosen, jobs, results, seconds, command):
    """Print the reports, write the files asked for, and give the exit status."""
    from operator_checker.report import as_github, as_json, as_junit, as_markdown

    reports = [r for r in results if isinstance(r, Report)]
    errors = [
        (job.target, str(result))
        for job, result in zip(jobs, results, strict=True)
        if isinstance(result, JobError) and not isinstance(result, Interrupted)
    ]
    interrupted = any(
        isinstance(r, Interrupted) or getattr(r, "interrupted", False) for r in results
    )
    environment = next((r.environment for r in reports if r.environment), None)
    about = {
        "operator_checker": operator_checker.__version__,
        "command": command,
        "seconds": round(seconds, 2),
        "interrupted": interrupted,
    }
    written = {
        "json": lambda: (
            json.dumps(as_json(reports, errors, environment, **about), indent=1) + "\n"
        ),
        "markdown": lambda: as_markdown(reports, errors),
        "github": lambda: as_github(reports, errors),
        "junit": lambda: as_junit(reports, errors),
    }
    output = chosen.get("output_format") or (
        "json" if chosen.get("json") == "-" else "text"
    )
    # The text report goes to stdout, or to stderr when stdout holds another.
    text = sys.stdout if output == "text" else sys.stderr
    for report in reports:
        print(report, file=text)
    for target, message in errors:
        print(f"{target}: not checked: {message}", file=text)
    if output != "text":
        sys.stdout.write(written[output]())
    for kind in ("json", "markdown"):
        path = chosen.get(kind)
        if path and path != "-":
            with open(path, "w") as file:
                file.write(written[kind]())
    failed = sum(len(r.failed) for r in reports)
    checked = [r for r in reports if r.checked]
    unchecked = len(reports) - len(checked)
    print(
        f"{len(checked)} operator{'s' * (len(checked) != 1)} checked, "
        + (f"{unchecked} with nothing checked, " if unchecked else "")
        + f"{failed} row{'s' * (failed != 1)} failed"
        + (f", {len(errors)} not checked" if errors else "")
        + (", interrupted" if interrupted else "")
        + f" in {seconds:.1f} s",
        file=text,
    )
    if interrupted:
        return fail("interrupted: the reports hold what finished", INTERRUPTED)
    if errors:
        first = errors[0]
        return fail(f"{first[0]}: {first[1]}")
    if failed:
        return FAILED
    if not checked:
        return fail("nothing was checked: every row was skipped", NOTHING_CHECKED)
    return OK


def console():
    """The ``operator-checker`` script."""
    raise SystemExit(main(prog=os.path.basename(sys.argv[0])))
