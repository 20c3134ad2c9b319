"""The command: ``python -m operator_checker TARGET ... --samples FILE``.

Exit status, one meaning each:

* 0: every operator was checked and no row failed;
* 1: a row failed (a bug of an operator);
* 2: the checker could not run: a bad target, option or samples source, an
  import that fails, samples that do not fit the schema; one line on stderr
  names what to fix;
* 3: the checker itself failed (a bug of the checker): one line, no
  traceback;
* 5: nothing was checked (every check left out), as pytest's 5;
* 130: interrupted (Ctrl-C): what finished is printed and written, marked
  interrupted.
"""

import argparse
import difflib
import json
import os
import sys
import time

import operator_checker
from operator_checker.isolation import Interrupted, Job, JobError, run_jobs
from operator_checker.report import QUICK_CHECKS, RUNNABLE, Report, left_out

OK, FAILED, CANNOT_RUN, INTERNAL, NOTHING_CHECKED, INTERRUPTED = 0, 1, 2, 3, 5, 130
# The device types --device and --skip may name (torch's, without importing it).
DEVICE_TYPES = ("cpu", "cuda", "mps", "xpu", "hpu", "mtia", "meta", "privateuseone")

# The floating-point dtypes the checker converts samples to (variants.DTYPES,
# named here so that the command's parent process need not import torch).
DTYPE_NAMES = ("float32", "float64", "float16", "bfloat16")

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
    python -m operator_checker mypkg.ops:crop --samples samples.pt \\
        --json report.json

exit status: 0 no row failed, 1 a row failed, 2 the checker could not run,
3 the checker failed, 5 nothing was checked, 130 interrupted.
"""


def parser(prog="python -m operator_checker"):
    parse = argparse.ArgumentParser(
        prog=prog,
        description=(
            "Run every check of the PyTorch custom operators course on each "
            "TARGET operator, in a child process: a crash of the operator is a "
            "failed row, not the end of the run."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parse.add_argument(
        "targets",
        nargs="+",
        metavar="TARGET",
        help="ns::name, ns::name.overload, torch.ops.ns.name or "
        "package.module:attribute",
    )
    parse.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE (or run FILE.py, or load LIBRARY.so) first: what registers "
        "the operators; repeat for several",
    )
    parse.add_argument(
        "--samples",
        required=True,
        metavar="SOURCE",
        help="a file written by operator_checker.save_samples, or module:function "
        "returning samples ({operator: [samples]} or a list for one operator)",
    )
    parse.add_argument("--json", metavar="FILE", help="write every row as JSON")
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
        metavar="NAME",
        action="append",
        default=[],
        help="leave out a check, a layout, a dtype or a device (repeat)",
    )
    parse.add_argument(
        "--quick",
        action="store_true",
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
        default=300.0,
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
        action="store_true",
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


def run(argv=None, prog=None):
    arguments = list(sys.argv[1:] if argv is None else argv)
    args = parser(prog or "python -m operator_checker").parse_args(arguments)
    unknown_dtypes = [name for name in args.dtypes or [] if name not in DTYPE_NAMES]
    if unknown_dtypes:
        names = ", ".join(DTYPE_NAMES)
        return fail(f"--dtype {unknown_dtypes[0]}: not one of {names}")
    for device in args.devices or []:
        if device.partition(":")[0] not in DEVICE_TYPES:
            return fail(
                f"--device {device}: not a device type ({', '.join(DEVICE_TYPES)})"
            )
    options = {
        "devices": args.devices,
        "dtypes": args.dtypes or list(DTYPE_NAMES),
        "exact": True,
        "nondet_tol": 0.0,
        "nondifferentiable": {},
        "indices": None,
        "skip": dict.fromkeys(args.skip, "--skip"),
        "limitations": {},
        "quick": args.quick,
    }
    for name in args.only or []:
        if name not in RUNNABLE:
            close = difflib.get_close_matches(name, RUNNABLE, n=1)
            guess = f" (did you mean {close[0]}?)" if close else ""
            return fail(
                f"--only {name}: not a check one can run{guess}; the checks: "
                f"{', '.join(RUNNABLE)}"
            )
    options["skip"].update(left_out(args.only, args.quick, options["skip"]))
    if not set(RUNNABLE) - set(options["skip"]):
        return fail("every check is left out: nothing to check", NOTHING_CHECKED)
    try:
        source = samples_source(args.samples)
        writable(args.json, "--json")
        writable(args.markdown, "--markdown")
    except JobError as error:
        return fail(str(error))
    jobs = [
        Job(target, source, None, list(args.imports), options)
        for target in args.targets
    ]
    echo = None
    if args.verbose or sys.stderr.isatty():

        def echo(line):
            print(f"  {line}", file=sys.stderr, flush=True)

    start = time.perf_counter()
    if args.no_isolate:
        results = in_process(jobs)
    else:
        results = run_jobs(jobs, timeout=args.timeout, echo=echo)
    seconds = time.perf_counter() - start
    command = [prog or "python -m operator_checker", *arguments]
    return finish(args, jobs, results, seconds, command)


def in_process(jobs):
    """The jobs in this process (``--no-isolate``); Ctrl-C keeps what finished."""
    from operator_checker.core import run_checks
    from operator_checker.isolation import job_inputs, one_line

    results = []
    for job in jobs:
        try:
            op, samples, options = job_inputs(job)
        except Exception as error:
            results.append(JobError(one_line(error)))
            continue
        report = Report(job.target)
        try:
            results.append(run_checks(op, samples, **options, report=report))
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


def finish(args, jobs, results, seconds, command):
    """Print the reports, write the files asked for, and give the exit status."""
    from operator_checker.report import as_json, as_markdown

    reports = [r for r in results if isinstance(r, Report)]
    errors = [
        (job.target, str(result))
        for job, result in zip(jobs, results, strict=True)
        if isinstance(result, JobError) and not isinstance(result, Interrupted)
    ]
    interrupted = any(
        isinstance(r, Interrupted) or getattr(r, "interrupted", False) for r in results
    )
    out = sys.stderr if args.json == "-" else sys.stdout
    for report in reports:
        print(report, file=out)
    for target, message in errors:
        print(f"{target}: not checked: {message}", file=out)
    about = {
        "operator_checker": operator_checker.__version__,
        "command": command,
        "seconds": round(seconds, 2),
        "interrupted": interrupted,
    }
    if args.json:
        text = json.dumps(as_json(reports, errors, **about), indent=1)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as file:
                file.write(text)
    if args.markdown:
        with open(args.markdown, "w") as file:
            file.write(as_markdown(reports, errors))
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
        file=out,
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
