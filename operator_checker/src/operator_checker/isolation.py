"""Checking an operator in a child process, so that its crash is a row.

The parent starts ``python -m operator_checker.isolation`` and writes the
path of a spec (the jobs) to its stdin. The child imports what registers
each operator, finds it by name, loads or builds its samples, and runs the
checks; it announces every step (a check on a variant, or one of the eager
calls that make the variants) before it starts and streams every row as it
is added, as JSON lines, then says the spec is finished and waits for the
next one. When the child dies (a signal, any exit before that), the parent
records a failed row for the step it was in ("crashed the process: SIGSEGV
on #0 strided float32 cpu"), quoting what the child printed during that step
alone, and starts a fresh child that skips the steps already done and the
one that crashed. Python's fault handler is on in the child: when the crash
happened in the checker's own code rather than in a call of the operator, the
row says so, and is no failure of the operator.

``timeout`` is how long the child may stay silent, whatever it is doing: a
step that outlives it is killed and reads "hung", and a child that hangs
before its first step (importing, building samples) is an error of the run
for that operator, not a row.

The parent of the command imports no torch and runs none of the operator's
code, nor the module that builds samples: it stays quick to start, and
nothing the operator does can reach it. Ctrl-C in the parent kills the child
and returns what finished, marked ``interrupted``.

``check_operator(..., isolate=True)`` keeps its child for the next isolated
call in the same process, as long as that call imports the same modules and
files, none of them has changed on disk, and the variables that change what
the child does (``PATH``, ``PYTHONPATH``, ``TORCH*``, ``CUDA*``...) are the
same: in a pytest session, the tests of every operator with the same
imports share one child. A child that has imported torch and compiled once
checks the next operator in the time the check takes in-process
(``make bench-checker`` measures both). A crash or a hang ends the child;
the next call starts a fresh one.
"""

import atexit
import dataclasses
import functools
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from operator_checker.fixes import see_for
from operator_checker.options import LAYOUT_NAMES, LIBRARY_SUFFIXES
from operator_checker.report import Report, Row

# More crashes than this in one operator's run, and the rest is not checked.
MAX_CRASHES = 40
PACKAGE = Path(__file__).resolve().parent


class JobError(Exception):
    """The child could not check an operator: a bad target, a failed import,
    samples that do not fit; said in one line."""


class Interrupted(JobError):
    """Ctrl-C stopped the run before this operator was checked."""


@dataclasses.dataclass
class Job:
    """One operator for the child: a target, what registers it, a samples
    source (a file written by save_samples, or ``module:function``) and
    ``check_operator``'s options (JSON: dtypes by name)."""

    target: str
    samples: str
    sample_key: str | None = None  # its entry for this operator (None: by name)
    imports: list = dataclasses.field(default_factory=list)
    options: dict = dataclasses.field(default_factory=dict)
    done: list = dataclasses.field(default_factory=list)  # [check, where]
    crashed: list = dataclasses.field(default_factory=list)


def signal_name(returncode):
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit status {returncode}"


def output_since(log, start=0):
    """What the child wrote to its output after ``start`` bytes."""
    try:
        with open(log, "rb") as file:
            file.seek(start)
            return file.read().decode(errors="replace")
    except OSError:
        return ""


FAULT = re.compile(r"^Fatal Python error: ", re.M)
FRAME = re.compile(r'^\s+File "(.*)", line (\d+) in (\S+)', re.M)


def last_words(text):
    """The last line the child printed before it died, leaving out Python's
    fault handler report."""
    text = FAULT.split(text)[0]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def where_it_crashed(text):
    """``(whose, where)`` from the fault handler's report: ``"checker"`` when
    the innermost frame outside the standard library and torch is the
    checker's own code, else ``"operator"`` (a kernel's C++ code runs below
    torch's operator call; a Python kernel is the user's file); ``where`` is
    that frame, or None."""
    report = FAULT.split(text, maxsplit=1)
    if len(report) < 2:
        return "operator", None
    stdlib = os.path.dirname(os.__file__)
    for path, line, function in FRAME.findall(report[1]):
        if path.startswith(stdlib) and "site-packages" not in path:
            continue
        if path.startswith(str(PACKAGE)):
            return "checker", f"{Path(path).name}:{line} in {function}"
        if f"{os.sep}torch{os.sep}" in path:
            if path.endswith(f"torch{os.sep}_ops.py"):
                return "operator", None  # the call of an operator
            continue
        return "operator", f"{Path(path).name}:{line} in {function}"
    return "operator", None


@functools.cache
def default_path():
    """The folders this Python imports from with no ``PYTHONPATH``: what a
    child finds without help."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", "import json, sys; print(json.dumps(sys.path))"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    try:
        return frozenset(os.path.realpath(p) for p in json.loads(done.stdout) if p)
    except ValueError:
        return frozenset()


def child_environment(extra=()):
    """The parent's environment, with faulthandler on and this package and the
    folders ``extra`` importable where the child would not find them."""
    env = dict(os.environ)
    known = default_path()
    folders = []
    for folder in [str(PACKAGE.parent), *extra]:
        real = os.path.realpath(folder)
        if real not in known and folder not in folders and os.path.isdir(folder):
            folders.append(folder)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [*folders, env.get("PYTHONPATH")]))
    env["PYTHONFAULTHANDLER"] = "1"
    return env


class Worker:
    """A child process that checks one spec after another, and the folder
    that holds its log and the specs it was given."""

    def __init__(self, key=None, extra_path=()):
        self.key = key
        self.folder = tempfile.mkdtemp(prefix="operator-checker-")
        self.log = Path(self.folder) / "child.log"
        self.specs = 0
        with open(self.log, "wb") as log_file:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "operator_checker.isolation"],
                stdin=subprocess.PIPE,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=child_environment(extra_path),
                text=True,
                start_new_session=True,  # Ctrl-C reaches the parent alone
            )

    def alive(self):
        return self.process.poll() is None

    def send(self, spec):
        """Give the child a spec (a dict); the events file it writes to."""
        self.specs += 1
        path = Path(self.folder) / f"spec-{self.specs}.json"
        events = Path(self.folder) / f"events-{self.specs}.jsonl"
        events.touch()
        path.write_text(json.dumps({**spec, "events": str(events)}))
        try:
            self.process.stdin.write(f"{path}\n")
            self.process.stdin.flush()
        except OSError:
            pass  # it died: poll() says how
        return events

    def output(self, since):
        return output_since(self.log, since)

    def log_size(self):
        try:
            return self.log.stat().st_size
        except OSError:
            return 0

    def close(self, wait=5.0):
        if self.process.stdin and not self.process.stdin.closed:
            try:
                self.process.stdin.close()  # end of input: the child exits
            except OSError:
                pass
        try:
            self.process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            kill(self.process)
        shutil.rmtree(self.folder, ignore_errors=True)

    def kill(self):
        kill(self.process)
        shutil.rmtree(self.folder, ignore_errors=True)


_warm = None  # the Worker kept by check_operator(isolate=True)


@atexit.register
def _close_warm():
    global _warm
    if _warm is not None:
        _warm.close()
        _warm = None


def worker_for(key, extra_path=()):
    """The kept child if ``key`` matches and it is alive, else a fresh one."""
    global _warm
    if key is None:
        return Worker(extra_path=extra_path)
    if _warm is not None and _warm.key == key and _warm.alive():
        worker, _warm = _warm, None
        return worker
    _close_warm()
    return Worker(key, extra_path)


@dataclasses.dataclass
class Progress:
    """What the parent knows of one job so far."""

    operator: str
    rows: list = dataclasses.field(default_factory=list)
    seen: set = dataclasses.field(default_factory=set)
    seconds: dict = dataclasses.field(default_factory=dict)  # this child's
    spent: dict = dataclasses.field(default_factory=dict)  # dead children's
    variants: int = 0
    crashes: int = 0
    location: tuple = None
    environment: dict = None

    def add(self, row):
        fields = dataclasses.asdict(row)
        fields.pop("seconds")  # a row emitted again took other seconds
        key = json.dumps(fields, sort_keys=True)
        if key not in self.seen:
            self.seen.add(key)
            self.rows.append(row)

    def report(self, interrupted=False):
        report = Report(self.operator, self.variants)
        report.rows = list(self.rows)
        report.seconds = add_seconds(self.spent, self.seconds)
        report.interrupted = interrupted
        report.location = self.location
        report.environment = self.environment
        return report


def run_jobs(jobs, timeout=300.0, echo=None, keep=None, extra_path=()):
    """Check each job's operator in child processes; a ``Report`` or a
    ``JobError`` per job, in order. ``echo(line)`` gets each step as it
    starts. ``keep``: a key (``reuse_key``) under which the last child is
    kept for the next call with the same key; None ends it. ``extra_path``:
    folders the child imports from too. Ctrl-C kills the child: the report
    of the operator it was checking is marked ``interrupted``, and the ones
    not started are ``Interrupted`` errors."""
    global _warm
    results = [None] * len(jobs)
    state = [Progress(job.target) for job in jobs]
    current = 0
    worker = None
    try:
        while current < len(jobs):
            if worker is None or not worker.alive():
                worker = worker_for(keep, extra_path)
            events = worker.send(
                {"first": current, "jobs": [dataclasses.asdict(job) for job in jobs]}
            )
            pending, outcome = None, None
            since = worker.log_size()
            with open(events) as stream:
                last, buffer = time.monotonic(), ""
                while outcome is None:
                    returncode = worker.process.poll()
                    chunk = stream.read()
                    buffer += chunk
                    *complete, buffer = buffer.split("\n")
                    for line in complete:
                        if not line:
                            continue
                        event = json.loads(line)
                        last = time.monotonic()
                        kind = event["event"]
                        if kind == "finished":
                            outcome = "finished"
                            break
                        if kind == "environment":
                            for progress in state:
                                progress.environment = event["environment"]
                            continue
                        index = event["job"]
                        current = max(current, index)
                        if kind == "start":
                            pending = (
                                index,
                                event["check"],
                                event["where"],
                                event["variant"],
                            )
                            since = event.get("log", since)
                            if echo:
                                echo(
                                    f"{jobs[index].target}: {event['check']} on "
                                    f"{event['variant']}"
                                )
                        elif kind == "row":
                            progress = state[index]
                            progress.add(Row(**event["row"]))
                            progress.seconds = event["seconds"]
                            progress.operator = event["operator"]
                            progress.variants = event["variants"]
                            if pending and pending[0] == index:
                                jobs[index].done.append(list(pending[1:3]))
                        elif kind == "done":
                            progress = state[index]
                            progress.location = event.get("location")
                            progress.operator = event["operator"]
                            progress.variants = event["variants"]
                            progress.seconds = event["seconds"]
                            if pending and pending[0] == index:
                                jobs[index].done.append(list(pending[1:3]))
                            results[index] = progress.report()
                            current, pending = index + 1, None
                        elif kind == "error":
                            results[index] = JobError(event["message"])
                            current, pending = index + 1, None
                    if outcome is not None or chunk:
                        continue
                    if returncode is not None:
                        outcome = signal_name(returncode)
                    elif time.monotonic() - last > timeout:
                        worker.kill()
                        outcome = f"hung: no result within {timeout:g} s (timeout)"
                    else:
                        time.sleep(0.05)
            if outcome == "finished" or current >= len(jobs):
                break
            # The child died, or hung and was killed.
            said = worker.output(since)
            worker.close()
            worker = None
            if pending is None:
                if results[current] is None:
                    doing = "importing or preparing"
                    what = (
                        outcome if outcome.startswith("hung") else f"ended ({outcome})"
                    )
                    words = last_words(said)
                    results[current] = JobError(
                        f"the child process {what} while {doing} "
                        f"{jobs[current].target}" + (f": {words}" if words else "")
                    )
                current += 1
                continue
            index, check, where, label = pending
            progress = state[index]
            progress.add(crash_row(check, label, outcome, said))
            progress.spent = add_seconds(progress.spent, progress.seconds)
            progress.seconds = {}
            jobs[index].crashed.append([check, where])
            progress.crashes += 1
            if list(where)[:1] == ["as given"]:
                # The first call on the operator's own sample: every other
                # variant would crash or hang the same way, one fresh child
                # each, and say nothing more.
                progress.add(
                    Row(
                        "eager",
                        "all",
                        "failed",
                        f"{'hung' if outcome.startswith('hung') else 'crashed'} on "
                        "its own sample: the remaining checks were not run",
                    )
                )
                results[index] = progress.report()
                current = index + 1
            elif progress.crashes >= MAX_CRASHES:
                progress.add(
                    Row(
                        "eager",
                        "all",
                        "failed",
                        f"{MAX_CRASHES} crashes: the remaining checks were not run",
                    )
                )
                results[index] = progress.report()
                current = index + 1
    except KeyboardInterrupt:
        if worker is not None:
            worker.kill()
            worker = None
        for index, result in enumerate(results):
            if result is None and (state[index].rows or index == current):
                results[index] = state[index].report(interrupted=True)
            elif result is None:
                results[index] = Interrupted("interrupted before it was checked")
    finally:
        if worker is not None:
            if keep is not None and worker.alive():
                _warm = worker
            else:
                worker.close()
    # A job no child finished is said, never dropped: the run did not check it.
    return [
        result
        if result is not None
        else JobError("the checker stopped before finishing it")
        for result in results
    ]


def crash_row(check, label, outcome, said):
    """The row of a step that a dead or killed child did not finish."""
    hung = outcome.startswith("hung")
    whose, where = ("operator", None) if hung else where_it_crashed(said)
    words = last_words(said)
    quoted = f" (last output: {words})" if words else ""
    if whose == "checker":
        detail = (
            f"the checker's own code crashed the process ({outcome}, {where}) on "
            f"{label}, outside any call of the operator: not the operator's "
            f"fault{quoted}"
        )
        return Row(check, label, "not applicable", detail)
    what = outcome if hung else f"crashed the process: {outcome}"
    at = f", in {where}" if where else ""
    detail = f"{what} on {label}{at}{quoted}"
    # Only a crash on another layout is a layout problem; on the sample as
    # given, or empty, the kernel itself is at fault, and no section of the
    # course teaches that fix.
    layout = label.split()[1] if len(label.split()) > 1 else ""
    see = see_for("eager", detail) if layout in LAYOUT_NAMES else ""
    return Row(check, label, "failed", detail, see, rank=crash_rank(label))


def crash_rank(label):
    """``Row.rank`` from a variant's label (see ``core.rank``)."""
    words = label.split()
    kind = words[1] if len(words) > 1 else ""
    if kind in ("as", "contiguous") and "grad" not in words:
        return 0
    if kind in ("permuted", "strided", "offset"):
        return 1
    if kind.startswith("empty"):
        return 5
    return {"expanded": 4}.get(kind, 3)


def add_seconds(first, second):
    return {k: first.get(k, 0) + second.get(k, 0) for k in {*first, *second}}


def kill(child):
    child.kill()
    child.wait()


# -- The Python API: check_operator(..., isolate=True) -------------------------


# The variables that change what a child does; the others (pytest's
# PYTEST_CURRENT_TEST, a terminal's COLUMNS...) do not stop its reuse.
KEPT_VARIABLES = re.compile(
    r"^(PATH|PYTHON\w*|LD_\w+|DYLD_\w+|TORCH\w*|PYTORCH\w*|CUDA\w*|NVIDIA\w*"
    r"|HIP\w*|ROCM\w*|TRITON\w*|OMP_\w+|MKL\w*|KMP_\w+|CC|CXX"
    r"|OPERATOR_CHECKER\w*)$"
)


def reuse_key(job, extra_path=()):
    """What a kept child must share with ``job`` to check it: this Python, the
    folder it started in, the variables that change what it does, the
    folders it imports from, and the imports, each with the size and
    modification time of its files (a changed file needs a fresh child)."""
    imports = list(job.imports)
    if ":" in job.target and "::" not in job.target:
        imports.append(job.target.partition(":")[0])
    environment = child_environment(extra_path)
    return (
        sys.executable,
        os.getcwd(),
        tuple(
            sorted((k, v) for k, v in environment.items() if KEPT_VARIABLES.match(k))
        ),
        tuple((what, files_stamp(what)) for what in imports),
    )


def files_stamp(what):
    """The newest modification time and the total size of the files behind an
    import: a ``.py`` or ``.so`` path, or a module, found without importing it
    (a package: every file under it)."""
    path = Path(what)
    if path.suffix in (".py", *LIBRARY_SUFFIXES):
        paths = [path]
    else:
        try:
            spec = importlib.util.find_spec(what.partition(".")[0])
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            return None
        folders = list(spec.submodule_search_locations or [])
        paths = [Path(spec.origin)] if spec.origin and not folders else []
        for folder in folders:
            for root, _, names in os.walk(folder):
                paths += [Path(root, name) for name in names]
    newest, size = 0, 0
    for file in paths:
        try:
            status = file.stat()
        except OSError:
            continue
        newest, size = max(newest, status.st_mtime_ns), size + status.st_size
    return newest, size


# -- The child ----------------------------------------------------------------


def child(spec_path):
    spec = json.loads(Path(spec_path).read_text())
    events = open(spec["events"], "a", buffering=1)

    def emit(**event):
        events.write(json.dumps(event) + "\n")
        events.flush()

    def log_position():
        """Where this step's output starts in the log the parent reads."""
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            return os.fstat(1).st_size
        except OSError:
            return 0

    from operator_checker.core import environment, location, run_checks
    from operator_checker.steps import Steps

    emit(event="environment", environment=environment())
    for index, job in enumerate(spec["jobs"]):
        if index < spec["first"]:
            continue
        job = Job(**job)
        try:
            op, samples, options = job_inputs(job)
        except Exception as error:
            emit(event="error", job=index, message=one_line(error))
            continue
        report = Report(job.target)
        report.listener = lambda row, i=index, r=report: emit(
            event="row",
            job=i,
            row=dataclasses.asdict(row),
            seconds=r.seconds,
            operator=r.operator,
            variants=r.variants,
        )
        steps = Steps(
            job.done,
            job.crashed,
            announce=lambda check, where, label, i=index: emit(
                event="start",
                job=i,
                check=check,
                where=list(where),
                variant=label,
                log=log_position(),
            ),
        )
        try:
            run_checks(op, samples, options, steps=steps, report=report)
        except (TypeError, ValueError) as error:  # samples or declarations
            emit(event="error", job=index, message=one_line(error))
            continue
        emit(
            event="done",
            job=index,
            operator=report.operator,
            variants=report.variants,
            seconds=report.seconds,
            location=location(op),
        )
    emit(event="finished")
    events.close()


def one_line(error):
    """An error as the one line the command prints."""
    from operator_checker.targets import TargetError

    text = " ".join(str(error).split())
    if isinstance(error, (JobError, TargetError, ValueError, TypeError, OSError)):
        return text or type(error).__name__
    return f"{type(error).__name__}: {text}"


def job_inputs(job):
    """(operator, samples, ``Options``) of ``job``, in this process: what a
    child, or the command's ``--no-isolate``, checks. Any error is a
    ``JobError`` naming what to fix."""
    from operator_checker import _torch
    from operator_checker.options import Options
    from operator_checker.samples import as_sample, overload_for, samples_for
    from operator_checker.targets import TargetError, resolve

    try:
        op = resolve(job.target, job.imports)
    except TargetError as error:
        raise JobError(str(error)) from None
    found = samples_source(job.samples, job.imports)
    where = f"--samples {job.samples}"
    try:
        samples = samples_for(found, [_torch.qualified_name(op)], where, job.sample_key)
    except ValueError as error:
        raise JobError(str(error)) from None
    for index, sample in enumerate(samples):
        try:
            overload_for(op, as_sample(sample))
        except TypeError as error:
            raise JobError(f"{where}: sample #{index}: {error}") from None
    return op, samples, Options.from_json(job.options)


def samples_source(source, imports=()):
    """``{key: [Sample, ...]}`` from a samples file, or from the function a
    ``module:function`` source names (called here, in the child)."""
    from operator_checker.samples import as_samples, load_samples
    from operator_checker.targets import TargetError, load

    if os.path.exists(source) or ":" not in source:
        if not os.path.exists(source):
            raise JobError(f"--samples {source}: no such file")
        try:
            return load_samples(source)
        except (ValueError, OSError) as error:
            raise JobError(f"--samples {error}") from None
    module_name, _, function_name = source.rpartition(":")
    try:
        module = load(module_name, option="--samples")
    except TargetError as error:
        raise JobError(str(error)) from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise JobError(f"--samples {source}: {module_name} has no {function_name}()")
    try:
        found = function()
    except Exception as error:
        raise JobError(
            f"--samples {source}: {function_name}() raised {type(error).__name__}: "
            f"{' '.join(str(error).split())}"
        ) from None
    try:
        return as_samples(found)
    except TypeError as error:
        raise JobError(f"--samples {source}: {function_name}() {error}") from None


def serve():
    """Check each spec whose path arrives on stdin, until stdin ends."""
    for line in sys.stdin:
        if line.strip():
            child(line.strip())


if __name__ == "__main__":
    serve()
