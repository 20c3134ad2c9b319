"""Checking an operator in a child process, so that its crash is a row.

The parent starts ``python -m operator_checker.isolation`` and writes the
path of a spec (the jobs) to its stdin. The child finds each operator by
name, loads its samples, and runs the checks; it announces every step (a
check on a variant, or the eager calls that make the variants) before it
starts and streams every row as it is added, as JSON lines, then says the
spec is finished and waits for the next one. When the child dies (a signal,
any exit before that), or stays silent in one step for longer than
``timeout``, the parent records a failed row for the step it was in ("crashed
the process: SIGSEGV on #0 strided float32 cpu"), and starts a fresh child
that skips the steps already done and the one that crashed. The parent of the
command imports no torch: it stays quick to start, and nothing the operator
does can reach it.

``check_operator(..., isolate=True)`` keeps its child for the next isolated
call in the same process, as long as that call imports the same modules and
files, none of them has changed on disk, and the environment is the same: a
child that has imported torch and compiled once checks the next operator in
the time the check takes in-process (``make bench-checker`` measures both).
A crash or a hang ends the child; the next call starts a fresh one.
"""

import atexit
import dataclasses
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from operator_checker.report import Report, Row, see_for

# More crashes than this in one operator's run, and the rest is not checked.
MAX_CRASHES = 40


class JobError(Exception):
    """The child could not check an operator: a bad target, a failed import,
    samples that do not fit; said in one line."""


@dataclasses.dataclass
class Job:
    """One operator for the child: a target, what registers it, a samples
    file and ``check_operator``'s options (JSON: dtypes by name)."""

    target: str
    samples: str  # a file written by save_samples
    sample_key: str | None = None  # its entry for this operator (None: the only one)
    imports: list = dataclasses.field(default_factory=list)
    options: dict = dataclasses.field(default_factory=dict)
    done: list = dataclasses.field(default_factory=list)
    crashed: list = dataclasses.field(default_factory=list)


def signal_name(returncode):
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit status {returncode}"


def last_words(log, start=0):
    """The last line the child wrote to its output after ``start`` bytes."""
    try:
        with open(log, "rb") as file:
            file.seek(start)
            text = file.read().decode(errors="replace")
    except OSError:
        return ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


class Worker:
    """A child process that checks one spec after another, and the folder
    that holds its log and the specs it was given."""

    def __init__(self, key=None):
        self.key = key
        self.folder = tempfile.mkdtemp(prefix="operator-checker-")
        self.log = Path(self.folder) / "child.log"
        self.specs = 0
        self.said_before = 0  # the log's size when the current spec was sent
        with open(self.log, "wb") as log_file:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "operator_checker.isolation"],
                stdin=subprocess.PIPE,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=child_environment(),
                text=True,
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
        self.said_before = self.log.stat().st_size
        try:
            self.process.stdin.write(f"{path}\n")
            self.process.stdin.flush()
        except OSError:
            pass  # it died: poll() says how
        return events

    def last_words(self):
        """The last line the child wrote to its output for this spec, if any."""
        return last_words(self.log, self.said_before)

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


_warm = None  # the Worker kept by check_operator(isolate=True)


@atexit.register
def _close_warm():
    global _warm
    if _warm is not None:
        _warm.close()
        _warm = None


def worker_for(key):
    """The kept child if ``key`` matches and it is alive, else a fresh one."""
    global _warm
    if key is None:
        return Worker()
    if _warm is not None and _warm.key == key and _warm.alive():
        worker, _warm = _warm, None
        return worker
    _close_warm()
    return Worker(key)


def run_jobs(jobs, timeout=300.0, echo=None, keep=None):
    """Check each job's operator in child processes; a ``Report`` or a
    ``JobError`` per job, in order. ``echo(line)`` gets the child's progress.
    ``keep``: a key (``reuse_key``) under which the last child is kept for
    the next call with the same key; None ends it."""
    global _warm
    results = [None] * len(jobs)
    state = [{"rows": [], "seconds": {}, "variants": 0, "crashes": 0} for _ in jobs]
    current = 0
    worker = None
    try:
        while current < len(jobs):
            if worker is None or not worker.alive():
                worker = worker_for(keep)
            events = worker.send(
                {"first": current, "jobs": [dataclasses.asdict(job) for job in jobs]}
            )
            pending, outcome = None, None
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
                        index = event["job"]
                        current = max(current, index)
                        if kind == "start":
                            pending = (index, event["check"], event["variant"])
                            if echo:
                                _, check, variant = pending
                                echo(f"{jobs[index].target}: {check} on {variant}")
                        elif kind == "row":
                            row = Row(**event["row"])
                            key = (row.check, row.variant)
                            if dataclasses.astuple(row) not in {
                                dataclasses.astuple(r)
                                for r in state[index]["rows"][-50:]
                            }:
                                state[index]["rows"].append(row)
                            jobs[index].done.append(key)
                            state[index]["seconds"] = event["seconds"]
                        elif kind == "error":
                            results[index] = JobError(event["message"])
                            current, pending = index + 1, None
                        elif kind == "done":
                            report = Report(event["operator"], event["variants"])
                            report.rows = state[index]["rows"]
                            report.seconds = add_seconds(
                                state[index].get("spent", {}), event["seconds"]
                            )
                            results[index] = report
                            current, pending = index + 1, None
                    if outcome is not None or chunk:
                        continue
                    if returncode is not None:
                        outcome = signal_name(returncode)
                    elif pending and time.monotonic() - last > timeout:
                        kill(worker.process)
                        outcome = f"hung: no result within {timeout:g} s (timeout)"
                    else:
                        time.sleep(0.05)
            if outcome == "finished" or current >= len(jobs):
                break
            # The child died, or hung and was killed.
            said = worker.last_words()
            worker.close()
            worker = None
            if pending is None:
                if results[current] is None:
                    results[current] = JobError(
                        f"the child process ended ({outcome}) before checking "
                        f"{jobs[current].target}" + (f": {said}" if said else "")
                    )
                current += 1
                continue
            index, check, variant = pending
            what = (
                outcome
                if outcome.startswith("hung")
                else f"crashed the process: {outcome}"
            )
            detail = f"{what} on {variant}" + (
                f" (last output: {said})" if said else ""
            )
            state[index]["rows"].append(
                Row(check, variant, "failed", detail, see_for(check, detail))
            )
            state[index]["spent"] = add_seconds(
                state[index].get("spent", {}), state[index]["seconds"]
            )
            jobs[index].crashed.append((check, variant))
            state[index]["crashes"] += 1
            if state[index]["crashes"] >= MAX_CRASHES:
                report = Report(jobs[index].target, state[index]["variants"])
                report.rows = state[index]["rows"] + [
                    Row(
                        "eager",
                        "all",
                        "failed",
                        f"{MAX_CRASHES} crashes: the remaining checks were not run",
                    )
                ]
                results[index] = report
                current = index + 1
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


def add_seconds(first, second):
    return {k: first.get(k, 0) + second.get(k, 0) for k in {*first, *second}}


def kill(child):
    child.kill()
    child.wait()


def child_environment():
    """The parent's environment, with this package importable."""
    env = dict(os.environ)
    here = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [here, env.get("PYTHONPATH")]))
    env.setdefault("PYTHONFAULTHANDLER", "")
    return env


# -- The Python API: check_operator(..., isolate=True) -------------------------


def target_of(op, imports=()):
    """The name a child finds ``op`` by, and the module that defines it (None
    when ``op`` is defined in ``__main__`` and ``imports`` register it)."""
    import torch

    if isinstance(op, str):
        return op, None
    module = None
    init = getattr(op, "_init_fn", None)  # a custom_op's CustomOpDef
    if init is not None:
        module = init.__module__
        if module == "__main__" and imports:
            module = None  # the imports define it again in the child
        elif module == "__main__":
            raise JobError(
                f"isolate=True runs {op._qualname} in a fresh process, which cannot "
                "import __main__: define it in a module, or pass imports=[path to "
                "the .py file that defines it]"
            )
    op = getattr(op, "_opoverload", op)
    if isinstance(op, torch._ops.OpOverload):
        return f"{op._schema.name}.{op._overloadname}", module
    if isinstance(op, torch._ops.OpOverloadPacket):
        return op._qualified_op_name, module
    raise JobError(
        f"{op!r} is not an operator: pass a custom_op, torch.ops.ns.name or one "
        "of its overloads"
    )


def options_as_json(options):
    """``check_operator``'s options with dtypes by name."""
    options = dict(options)
    options["dtypes"] = [str(d).removeprefix("torch.") for d in options["dtypes"]]
    if options.get("devices") is not None:
        options["devices"] = [str(d) for d in options["devices"]]
    if not isinstance(options["nondifferentiable"], dict):
        options["nondifferentiable"] = dict.fromkeys(
            options["nondifferentiable"], "declared"
        )
    return options


def check_isolated(op, samples, imports=(), timeout=300.0, options=None):
    """``check_operator(op, samples, isolate=True, ...)``: a ``Report``."""
    import torch

    from operator_checker.samples import save_samples

    target, module = target_of(op, imports)
    imports = [*torch.ops.loaded_libraries, *([module] if module else []), *imports]
    with tempfile.TemporaryDirectory(prefix="operator-checker-samples-") as folder:
        path = os.path.join(folder, "samples.pt")
        save_samples(path, {"sample": samples})
        job = Job(target, path, "sample", list(imports), options_as_json(options))
        (result,) = run_jobs([job], timeout=timeout, keep=reuse_key(job))
    if isinstance(result, JobError):
        raise result
    return result


def reuse_key(job):
    """What a kept child must share with ``job`` to check it: this Python, the
    folder and environment it started in, and the imports, each with the size
    and modification time of its files (a changed file needs a fresh child)."""
    imports = list(job.imports)
    if ":" in job.target and "::" not in job.target:
        imports.append(job.target.partition(":")[0])
    return (
        sys.executable,
        os.getcwd(),
        tuple(sorted(child_environment().items())),
        tuple((what, files_stamp(what)) for what in imports),
    )


def files_stamp(what):
    """The newest modification time and the total size of the files behind an
    import: a ``.py`` or ``.so`` path, or a module, found without importing it
    (a package: every file under it)."""
    path = Path(what)
    if path.suffix in (".py", ".so", ".dylib", ".dll"):
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

    from operator_checker.core import Steps, run_checks
    from operator_checker.targets import TargetError

    for index, job in enumerate(spec["jobs"]):
        if index < spec["first"]:
            continue
        job = Job(**job)
        try:
            op, samples, options = job_inputs(job)
        except (TargetError, ValueError, OSError) as error:
            emit(event="error", job=index, message=str(error))
            continue
        report = Report(job.target)
        report.listener = lambda row, i=index, r=report: emit(
            event="row", job=i, row=dataclasses.asdict(row), seconds=r.seconds
        )
        steps = Steps(
            job.done,
            job.crashed,
            announce=lambda check, variant, i=index: emit(
                event="start", job=i, check=check, variant=variant
            ),
        )
        try:
            run_checks(op, samples, **options, steps=steps, report=report)
        except (
            TypeError,
            ValueError,
        ) as error:  # samples or declarations that do not fit
            emit(event="error", job=index, message=str(error))
            continue
        emit(
            event="done",
            job=index,
            operator=report.operator,
            variants=report.variants,
            seconds=report.seconds,
        )
    emit(event="finished")
    events.close()


def job_inputs(job):
    """(operator, samples, ``run_checks``'s options) of ``job``, in this
    process: what a child, or the command's ``--no-isolate``, checks."""
    import torch

    from operator_checker.samples import load_samples, qualified_name
    from operator_checker.targets import resolve

    op = resolve(job.target, job.imports)
    samples = samples_for(load_samples(job.samples), job, qualified_name(op))
    options = dict(job.options)
    options["dtypes"] = tuple(getattr(torch, d) for d in options["dtypes"])
    return op, samples, options


def samples_for(found, job, name):
    """The samples of ``job``'s operator (``name``) in what ``load_samples`` read."""
    key = job.sample_key or (name if name in found else None)
    if key is not None:
        if key not in found:
            raise ValueError(
                f"{job.samples} holds no samples for {key}; it holds "
                f"{', '.join(found) or 'none'}"
            )
        return found[key]
    if len(found) == 1:
        return next(iter(found.values()))
    raise ValueError(
        f"{job.samples} holds no samples for {name}; it holds {', '.join(found)}"
    )


def serve():
    """Check each spec whose path arrives on stdin, until stdin ends."""
    for line in sys.stdin:
        if line.strip():
            child(line.strip())


if __name__ == "__main__":
    serve()
