"""The command: ``python -m operator_checker TARGET ... --samples FILE``.

Exit status: 0 when no row failed, 1 when a row failed, 2 when the checker
could not run (a bad target, an import that fails, samples that do not fit),
with one line naming what to fix.
"""

import argparse
import json
import os
import sys
import tempfile
import time

import operator_checker
from operator_checker.isolation import Job, JobError, run_jobs
from operator_checker.report import CHECKS, QUICK_CHECKS, Report, left_out

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

exit status: 0 no row failed, 1 a row failed, 2 the checker could not run.
"""


def parser():
    parse = argparse.ArgumentParser(
        prog="python -m operator_checker",
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
        help=f"run only this check (repeat); the checks: {', '.join(CHECKS[1:])}",
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
        help="check in this floating-point dtype (repeat); default: "
        f"{', '.join(DTYPE_NAMES)} (gradients are checked in float64 anyway)",
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
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="a step silent for longer is a failed row (default 300)",
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


def fail(message):
    print(f"operator_checker: error: {message}", file=sys.stderr)
    return 2


def samples_file(source, folder):
    """A file of samples: ``source`` itself, or what ``module:function``
    returns, saved."""
    if os.path.exists(source) or ":" not in source:
        if not os.path.exists(source):
            raise JobError(f"--samples {source}: no such file")
        return source
    module_name, _, function_name = source.partition(":")
    from operator_checker.samples import save_samples
    from operator_checker.targets import load

    module = load(module_name)
    function = getattr(module, function_name, None)
    if function is None:
        raise JobError(f"--samples {source}: {module_name} has no {function_name}")
    found = function()
    path = os.path.join(folder, "samples.pt")
    save_samples(path, found if isinstance(found, dict) else {"": found})
    return path


def main(argv=None):
    args = parser().parse_args(argv)
    unknown_dtypes = [name for name in args.dtypes or [] if name not in DTYPE_NAMES]
    if unknown_dtypes:
        names = ", ".join(DTYPE_NAMES)
        return fail(f"--dtype {unknown_dtypes[0]}: not one of {names}")
    unknown = [name for name in args.only or [] if name not in CHECKS]
    if unknown:
        return fail(
            f"--only {unknown[0]}: not a check; the checks are {', '.join(CHECKS[1:])}"
        )
    options = {
        "devices": args.devices,
        "dtypes": args.dtypes or list(DTYPE_NAMES),
        "exact": True,
        "nondet_tol": 0.0,
        "nondifferentiable": {},
        "skip": dict.fromkeys(args.skip, "--skip"),
        "limitations": {},
        "quick": args.quick,
    }
    options["skip"].update(left_out(args.only, args.quick, options["skip"]))
    with tempfile.TemporaryDirectory(prefix="operator-checker-cli-") as folder:
        try:
            path = samples_file(args.samples, folder)
        except Exception as error:
            return fail(str(error))
        jobs = [
            Job(target, path, None, list(args.imports), options)
            for target in args.targets
        ]
        start = time.perf_counter()
        if args.no_isolate:
            results = in_process(jobs)
        else:
            results = run_jobs(jobs, timeout=args.timeout)
        seconds = time.perf_counter() - start
    return finish(args, jobs, results, seconds)


def in_process(jobs):
    """The jobs in this process (``--no-isolate``)."""
    from operator_checker.core import run_checks
    from operator_checker.isolation import job_inputs
    from operator_checker.targets import TargetError

    results = []
    for job in jobs:
        try:
            op, samples, options = job_inputs(job)
            results.append(run_checks(op, samples, **options))
        except (TargetError, TypeError, ValueError, OSError) as error:
            results.append(JobError(str(error)))
    return results


def finish(args, jobs, results, seconds):
    """Print the reports, write the files asked for, and give the exit status."""
    from operator_checker.report import as_json, as_markdown

    reports = [r for r in results if isinstance(r, Report)]
    errors = [
        (job.target, str(result))
        for job, result in zip(jobs, results, strict=True)
        if isinstance(result, JobError)
    ]
    for report in reports:
        print(report)
    for target, message in errors:
        print(f"{target}: not checked: {message}")
    if args.json:
        about = {
            "operator_checker": operator_checker.__version__,
            "command": ["python", "-m", "operator_checker", *sys.argv[1:]],
            "seconds": round(seconds, 2),
        }
        with open(args.json, "w") as file:
            json.dump(as_json(reports, errors, **about), file, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as file:
            file.write(as_markdown(reports, errors))
    failed = sum(len(r.failed) for r in reports)
    print(
        f"{len(reports)} operator{'s' * (len(reports) != 1)} checked, "
        f"{failed} row{'s' * (failed != 1)} failed"
        + (f", {len(errors)} not checked" if errors else "")
        + f" in {seconds:.1f} s"
    )
    if errors:
        first = errors[0]
        return fail(f"{first[0]}: {first[1]}")
    return 1 if failed else 0


def console():
    """The ``operator-checker`` script."""
    raise SystemExit(main())
