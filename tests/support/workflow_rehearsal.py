"""Run a GitHub Actions workflow's jobs on this machine, step by step.

GitHub cannot be reached from where this project is built, so the workflows
in .github/workflows/ are rehearsed here: ``Rehearsal.run`` takes a workflow,
an event and its inputs, and runs the jobs in the order of their ``needs``,
each in a fresh copy of the working tree (a job starts on a fresh runner),
evaluating ``if:`` conditions, ``${{ }}`` expressions and the ``strategy``
matrix as GitHub does, with the variables a runner sets (``GITHUB_OUTPUT``,
``GITHUB_ENV``, ``GITHUB_STEP_SUMMARY``, ``RUNNER_TEMP``, ...).

What is real and what is a stand-in:

* every ``run:`` step runs for real, in bash, in order, unless the caller
  replaces it by name (``replace``: the tests replace only the whole test
  suite, and say so); a caller may add variables to a job's environment
  (``job_env``: the tests narrow ``make matrix`` to one page with ``PAGES``);
* ``uses:`` steps are stand-ins that do what the pinned action does where it
  matters here: upload-artifact picks the artifact's root folder as its
  ``src/shared/search.ts`` does, download-artifact places one artifact or
  several as its ``src/download-artifact.ts`` (v8.0.1) does, with
  ``merge-multiple``; create-pull-request commits the changed ``add-paths``
  and reports ``created``, ``updated`` or ``none``; gh-action-pypi-publish
  uploads nothing but records, in ``Rehearsal.published``, the files it
  would upload (``packages-dir``'s, as its ``twine-upload.sh`` v1.8.14 takes
  them) and the environment, and refuses as PyPI's trusted publishing does:
  without ``id-token: write`` no OIDC token, and a token from outside the
  environment the trusted publisher names (``pypi_publisher``) matches no
  publisher; and each action refuses to run when the job lacks the
  permission it needs (``ACTION_PERMISSIONS``, the table the permissions test
  checks every job against), as GitHub's API answers "Resource not
  accessible by integration";
* ``sudo``, ``gh``, ``nvidia-smi`` and ``df`` are stand-ins on ``PATH``:
  ``sudo`` runs a command only where every path it names lies in the
  rehearsal's scratch folder and logs the others (this machine's /usr is not
  a runner's to delete); ``gh`` logs its calls and refuses a dispatch the
  job's token may not make, or of a workflow of .github/workflows/ that has
  no ``workflow_dispatch`` trigger; ``df`` reports the disks of the runner
  the test describes (``disks``), plus what each logged ``sudo rm -rf`` of a
  known folder frees (``freed``).

A push is rehearsed on a branch or a tag (``ref``), filtered by the
trigger's ``branches`` or ``tags`` as GitHub filters it. The artifacts of a
run (``WorkflowRun.artifacts``) and the pull requests and uploads to PyPI of
every run (``Rehearsal.pulls`` and ``Rehearsal.published``, the "remote")
are kept, so a job can be run again, as "Re-run failed jobs" does.
"""

import fnmatch
import hashlib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO / ".github" / "workflows"
SHA = re.compile(r"[0-9a-f]{40}")

# What each action the workflows use needs of the job's GITHUB_TOKEN, one row
# per action, from the action's own documentation at its pinned commit:
ACTION_PERMISSIONS = {
    # clones the repository with the job's token
    "actions/checkout": {"contents": "read"},
    # fetches Python builds from the public actions/python-versions: no scope
    "actions/setup-python": {},
    # the cache, artifacts of the same run and Pages artifacts go through the
    # runner's own ACTIONS_RUNTIME_TOKEN, not GITHUB_TOKEN
    "actions/cache": {},
    "actions/cache/restore": {},
    "actions/upload-artifact": {},
    "actions/download-artifact": {},
    "actions/upload-pages-artifact": {},
    # README "Workflow permissions": push the branch, open the pull request
    "peter-evans/create-pull-request": {"contents": "write", "pull-requests": "write"},
    # src/api-client.js: GET /repos/{owner}/{repo}/pages (Pages: read)
    "actions/configure-pages": {"pages": "read"},
    # README: "pages: write" and "id-token: write" (the OIDC token)
    "actions/deploy-pages": {"pages": "write", "id-token": "write"},
    # README "Trusted publishing": "id-token: write  # IMPORTANT: this
    # permission is mandatory for trusted publishing"
    "pypa/gh-action-pypi-publish": {"id-token": "write"},
}
# What commands in ``run:`` steps need of GITHUB_TOKEN (GH_TOKEN).
COMMAND_PERMISSIONS = {
    # POST /repos/{owner}/{repo}/actions/workflows/{id}/dispatches
    r"\bgh workflow run\b": {"actions": "write"},
    # a push to the repository (site.yml publishes the notebooks Colab opens)
    r"\bgit\b[^\n]*\bpush\b": {"contents": "write"},
}
LEVELS = {"none": 0, "read": 1, "write": 2}


def granted(permissions, scope, level):
    """Whether a job's ``permissions:`` grant ``scope`` at ``level``."""
    if permissions in ("read-all", "write-all"):
        return LEVELS[permissions.split("-")[0]] >= LEVELS[level]
    return LEVELS[(permissions or {}).get(scope, "none")] >= LEVELS[level]


def needed_permissions(job):
    """The union of what a job's actions and commands need."""
    needed = {}

    def add(more):
        for scope, level in more.items():
            if LEVELS[level] > LEVELS[needed.get(scope, "none")]:
                needed[scope] = level

    for step in job.get("steps", []):
        if "uses" in step:
            add(ACTION_PERMISSIONS[action_name(step["uses"])])
        for pattern, more in COMMAND_PERMISSIONS.items():
            if re.search(pattern, step.get("run", "")):
                add(more)
    return needed


def action_name(uses):
    """'actions/cache/restore@<sha>' -> 'actions/cache/restore'."""
    return uses.split("@", 1)[0]


# -- Reading the workflows -------------------------------------------------------


def lint_python():
    """The python of the workflow linters' environment (``make lint-venv``),
    which holds a YAML parser (ruamel.yaml); made if missing."""
    process = subprocess.run(
        ["make", "--no-print-directory", "-s", "-f", "Makefile", "-f", "-"]
        + ["lint-venv", "print-lint-venv"],
        input="print-lint-venv:\n\t@echo $(LINT_VENV)\n",
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert process.returncode == 0, process.stdout + process.stderr
    return Path(process.stdout.strip().splitlines()[-1]) / "bin" / "python"


def load_workflows(paths=None):
    """{path: the workflow as data} for ``paths`` (every workflow by default)."""
    paths = [str(p) for p in (paths or sorted(WORKFLOWS.glob("*.yml")))]
    script = (
        "import json, sys\nfrom ruamel.yaml import YAML\n"
        "yaml = YAML(typ='safe')\n"
        "print(json.dumps({p: yaml.load(open(p)) for p in sys.argv[1:]}))\n"
    )
    process = subprocess.run(
        [str(lint_python()), "-c", script, *paths],
        capture_output=True,
        text=True,
        check=False,
    )
    assert process.returncode == 0, process.stderr
    return {Path(p): data for p, data in json.loads(process.stdout).items()}


# -- Expressions -------------------------------------------------------------------

TOKEN = re.compile(
    r"\s*(?:(?P<number>\d+(?:\.\d+)?)|(?P<string>'(?:[^']|'')*')"
    r"|(?P<op>==|!=|<=|>=|&&|\|\||[!<>()\[\].,*])"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_-]*))"
)


class ExpressionError(Exception):
    pass


def tokenize(text):
    tokens, position = [], 0
    text = text.strip()
    while position < len(text):
        match = TOKEN.match(text, position)
        if not match or match.end() == position:
            raise ExpressionError(f"cannot read {text[position:]!r} in {text!r}")
        position = match.end()
        kind = match.lastgroup
        tokens.append((kind, match.group(kind)))
    return tokens


def truthy(value):
    return value not in (None, False, 0, "") and value == value


def as_number(value):
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip()) if value.strip() else 0.0
        except ValueError:
            return float("nan")
    return float("nan")


def loose_equal(left, right):
    """GitHub's ==: numbers compared as numbers, strings case-insensitively,
    other types coerced to numbers."""
    if isinstance(left, str) and isinstance(right, str):
        return left.lower() == right.lower()
    if type(left) is type(right) or (left is None and right is None):
        return left == right
    if isinstance(left, dict | list) or isinstance(right, dict | list):
        return left is right
    return as_number(left) == as_number(right)


def to_string(value):
    """How ${{ }} writes a value into a string."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict | list):
        return json.dumps(value, indent=2)
    return str(value)


class Evaluator:
    """Evaluates GitHub expressions against ``contexts`` ({'github': ...});
    ``functions`` adds hashFiles and the status functions."""

    def __init__(self, contexts, functions):
        self.contexts = contexts
        self.functions = functions

    def evaluate(self, text):
        self.tokens = tokenize(text)
        self.index = 0
        value = self.or_()
        if self.index != len(self.tokens):
            raise ExpressionError(f"unexpected {self.tokens[self.index]} in {text!r}")
        return value

    def peek(self):
        return (
            self.tokens[self.index] if self.index < len(self.tokens) else (None, None)
        )

    def take(self, value=None):
        token = self.peek()
        if value is not None and token[1] != value:
            raise ExpressionError(f"expected {value!r}, found {token[1]!r}")
        self.index += 1
        return token

    def or_(self):
        value = self.and_()
        while self.peek() == ("op", "||"):
            self.take()
            right = self.and_()
            value = value if truthy(value) else right
        return value

    def and_(self):
        value = self.equality()
        while self.peek() == ("op", "&&"):
            self.take()
            right = self.equality()
            value = right if truthy(value) else value
        return value

    def equality(self):
        value = self.comparison()
        while self.peek()[1] in ("==", "!="):
            op = self.take()[1]
            equal = loose_equal(value, self.comparison())
            value = equal if op == "==" else not equal
        return value

    def comparison(self):
        value = self.unary()
        while self.peek()[1] in ("<", ">", "<=", ">="):
            op = self.take()[1]
            left, right = as_number(value), as_number(self.unary())
            value = {
                "<": left < right,
                ">": left > right,
                "<=": left <= right,
                ">=": left >= right,
            }[op]
        return value

    def unary(self):
        if self.peek() == ("op", "!"):
            self.take()
            return not truthy(self.unary())
        return self.postfix()

    def postfix(self):
        kind, text = self.take()
        if kind == "number":
            value = float(text)
        elif kind == "string":
            value = text[1:-1].replace("''", "'")
        elif text == "(":
            value = self.or_()
            self.take(")")
        elif kind == "name" and self.peek() == ("op", "("):
            self.take("(")
            arguments = []
            while self.peek()[1] != ")":
                arguments.append(self.or_())
                if self.peek()[1] == ",":
                    self.take()
            self.take(")")
            value = self.call(text, arguments)
        elif kind == "name":
            value = {"true": True, "false": False, "null": None}.get(
                text, self.contexts.get(text)
            )
        else:
            raise ExpressionError(f"unexpected {text!r}")
        while self.peek()[1] in (".", "["):
            if self.take()[1] == ".":
                key = self.take()[1]
            else:
                key = self.or_()
                self.take("]")
            value = value.get(key) if isinstance(value, dict) else None
        return value

    def call(self, name, arguments):
        name = name.lower()
        if name == "fromjson":
            return json.loads(arguments[0])
        if name == "tojson":
            return json.dumps(arguments[0], indent=2)
        if name == "contains":
            haystack, needle = arguments
            if isinstance(haystack, list):
                return any(loose_equal(item, needle) for item in haystack)
            return to_string(needle).lower() in to_string(haystack).lower()
        if name == "startswith":
            return (
                to_string(arguments[0])
                .lower()
                .startswith(to_string(arguments[1]).lower())
            )
        if name == "endswith":
            return (
                to_string(arguments[0])
                .lower()
                .endswith(to_string(arguments[1]).lower())
            )
        if name == "format":
            text = to_string(arguments[0])
            for index, argument in enumerate(arguments[1:]):
                text = text.replace("{" + str(index) + "}", to_string(argument))
            return text
        if name == "join":
            separator = to_string(arguments[1]) if len(arguments) > 1 else ","
            return separator.join(to_string(item) for item in arguments[0])
        if name in self.functions:
            return self.functions[name](*arguments)
        raise ExpressionError(f"no function {name}()")


INTERPOLATION = re.compile(r"\$\{\{((?:(?!\}\}).)*)\}\}", re.DOTALL)
STATUS_FUNCTIONS = re.compile(r"\b(success|failure|cancelled|always)\s*\(", re.I)


def interpolate(value, evaluator):
    """A workflow value with its ${{ }} expressions evaluated (recursively)."""
    if isinstance(value, str):
        whole = INTERPOLATION.fullmatch(value)
        if whole:  # one expression: its value, whatever its type
            return evaluator.evaluate(whole.group(1))
        return INTERPOLATION.sub(
            lambda match: to_string(evaluator.evaluate(match.group(1))), value
        )
    if isinstance(value, list):
        return [interpolate(item, evaluator) for item in value]
    if isinstance(value, dict):
        return {key: interpolate(item, evaluator) for key, item in value.items()}
    return value


def condition(text, evaluator):
    """An ``if:``, as GitHub reads it: success() && (...) unless it calls a
    status function itself."""
    if text is None:
        return truthy(evaluator.evaluate("success()"))
    if isinstance(text, bool):
        return text
    text = str(text).strip()
    whole = INTERPOLATION.fullmatch(text)
    expression = whole.group(1) if whole else text
    if not STATUS_FUNCTIONS.search(expression):
        expression = f"success() && ({expression})"
    return truthy(evaluator.evaluate(expression))


def hash_files(workspace):
    def hash_files_(*patterns):
        files = sorted(
            {
                path
                for pattern in patterns
                for path in workspace.glob(pattern)
                if path.is_file() and ".git" not in path.relative_to(workspace).parts
            }
        )
        if not files:
            return ""
        digest = hashlib.sha256()
        for path in files:
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        return digest.hexdigest()

    return hash_files_


# -- Stand-in programs -----------------------------------------------------------

SUDO = """\
# sudo: runs a command only where every path it names lies in the scratch
# folder; logs every call, run or not.
import json, os, subprocess, sys
args = sys.argv[1:]
env = dict(os.environ)
while args and "=" in args[0] and not args[0].startswith("-"):
    key, value = args.pop(0).split("=", 1)
    env[key] = value
scratch = os.path.realpath(os.environ["REHEARSAL_SCRATCH"])
paths = [a for a in args[1:] if a.startswith("/")]
inside = bool(paths) and all(
    os.path.realpath(p).startswith(scratch + os.sep) for p in paths
)
with open(os.environ["REHEARSAL_SUDO_LOG"], "a") as log:
    log.write(json.dumps({"argv": args, "ran": inside}) + "\\n")
sys.exit(subprocess.call(args, env=env) if inside else 0)
"""

DF = """\
# df -P -BG PATH... / df -h PATH...: the disks of the runner the test
# describes, plus what the logged sudo rm -rf calls freed.
import json, os, sys
disks = json.loads(os.environ["REHEARSAL_DISKS"])
freed = json.loads(os.environ.get("REHEARSAL_FREED", "{}"))
removed = set()
try:
    with open(os.environ["REHEARSAL_SUDO_LOG"]) as log:
        for line in log:
            argv = json.loads(line)["argv"]
            if argv[:1] == ["rm"]:
                removed.update(a for a in argv[1:] if not a.startswith("-"))
except FileNotFoundError:
    pass
gained = sum(size for folder, size in freed.items() if folder in removed)
paths = [a for a in sys.argv[1:] if not a.startswith("-")] or ["/"]
print("Filesystem 1G-blocks Used Available Capacity Mounted on")
for path in paths:
    real = os.path.realpath(path)
    mount = max(
        (m for m in disks if real == m or real.startswith(m.rstrip("/") + "/")),
        key=len,
    )
    free = disks[mount] + (gained if mount == "/" else 0)
    print(f"stand-in 100G {100 - free}G {free}G {100 - free}% {mount}")
"""

GH = """\
# gh: logs the call; refuses what the job's token may not do, and a dispatch
# of a workflow that is not there or cannot be dispatched.
import json, os, sys
permissions = json.loads(os.environ.get("REHEARSAL_PERMISSIONS", "{}"))
with open(os.environ["REHEARSAL_GH_LOG"], "a") as log:
    log.write(json.dumps({
        "argv": sys.argv[1:],
        "repo": os.environ.get("GH_REPO"),
        "token": bool(os.environ.get("GH_TOKEN")),
    }) + "\\n")
if sys.argv[1:3] == ["workflow", "run"]:
    if not os.environ.get("GH_TOKEN"):
        sys.exit("gh: no GH_TOKEN")
    if permissions.get("actions") != "write":
        sys.exit("HTTP 403: Resource not accessible by integration")
    name = sys.argv[3]
    workflow = os.path.join(os.environ["REHEARSAL_WORKFLOWS"], name)
    if not os.path.isfile(workflow):
        sys.exit(f"could not find any workflows named {name}")
    if "workflow_dispatch" not in open(workflow).read():
        sys.exit("HTTP 422: Workflow does not have 'workflow_dispatch' trigger")
"""

NVIDIA_SMI = """\
print("nvidia-smi stand-in: the rehearsal machine has no GPU")
"""


# -- Running ------------------------------------------------------------------------


@dataclass
class StepRun:
    name: str
    outcome: str  # success, failure or skipped
    output: str = ""


@dataclass
class JobRun:
    job: str
    matrix: dict
    result: str
    outputs: dict
    summary: str
    steps: list
    workspace: Path
    env: dict
    environment: dict | None = None  # name and url, as the job ended

    def step(self, name):
        return next(step for step in self.steps if step.name == name)


@dataclass
class WorkflowRun:
    workflow: Path
    event: str
    run_id: int
    artifacts: dict = field(default_factory=dict)
    jobs: dict = field(default_factory=dict)

    def results(self, job):
        """The job's result, as ``needs.<job>.result`` says it."""
        runs = self.jobs.get(job, [])
        if not runs:
            return None
        results = {run.result for run in runs}
        for result in ("failure", "cancelled", "success"):
            if result in results:
                return result
        return "skipped"

    def job(self, job, **matrix):
        matches = [
            run
            for run in self.jobs[job]
            if all(run.matrix.get(k) == v for k, v in matrix.items())
        ]
        assert len(matches) == 1, (job, matrix, [r.matrix for r in self.jobs[job]])
        return matches[0]

    def summary(self):
        """Every job's summary, in the order the jobs ran."""
        return "\n".join(
            run.summary for runs in self.jobs.values() for run in runs if run.summary
        )


class Rehearsal:
    """A scratch folder, stand-in programs and a "remote" (pull requests,
    uploads to PyPI), shared by the workflow runs of one test module.
    ``pypi_publisher`` is the trusted publisher configured on PyPI
    ({"repository", "workflow", "environment"}; none, no upload), always
    with an environment, whose protection rules guard the upload: a job
    outside it is refused."""

    def __init__(
        self, scratch, disks, freed=None, runner_env=None, pypi_publisher=None
    ):
        self.scratch = Path(scratch).resolve()
        self.bin = self.scratch / "bin"
        self.bin.mkdir(parents=True, exist_ok=True)
        for name, code in {
            "sudo": SUDO,
            "df": DF,
            "gh": GH,
            "nvidia-smi": NVIDIA_SMI,
        }.items():
            program = self.bin / name
            program.write_text(f"#!{sys.executable}\n{code}")
            program.chmod(0o755)
        self.sudo_log = self.scratch / "sudo.log"
        self.gh_log = self.scratch / "gh.log"
        self.disks = disks
        self.freed = freed or {}
        self.runner_env = runner_env or {}
        self.pulls = {}  # branch -> the pull request's fields
        assert pypi_publisher is None or pypi_publisher.get("environment")
        self.pypi_publisher = pypi_publisher
        self.published = []  # each upload to PyPI: its files and claims
        self.runs = 0

    def log(self, path):
        if not path.is_file():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    def sudo_calls(self):
        return self.log(self.sudo_log)

    def gh_calls(self):
        return self.log(self.gh_log)

    # A runner's environment: this interpreter's folder first on PATH (it is
    # what setup-python gives the job, and what made the environments), then
    # the stand-ins, then the system's programs.
    def base_env(self, home):
        python_bin = Path(
            os.path.realpath(getattr(sys, "_base_executable", sys.executable))
        ).parent
        path = os.pathsep.join(
            [str(self.bin), str(python_bin), os.environ.get("PATH", "/usr/bin:/bin")]
        )
        env = {
            "PATH": path,
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "REHEARSAL_SCRATCH": str(self.scratch),
            "REHEARSAL_SUDO_LOG": str(self.sudo_log),
            "REHEARSAL_GH_LOG": str(self.gh_log),
            "REHEARSAL_WORKFLOWS": str(WORKFLOWS),
            "REHEARSAL_DISKS": json.dumps(self.disks),
            "REHEARSAL_FREED": json.dumps(self.freed),
        }
        # The package registry's configuration, if this machine has one.
        for key, value in os.environ.items():
            if key.startswith(("UV_", "PIP_")) or key.lower() in (
                "http_proxy",
                "https_proxy",
                "no_proxy",
                "ssl_cert_file",
            ):
                env[key] = value
        return env

    def run(
        self,
        workflow,
        event,
        inputs=None,
        variables=None,
        ref="refs/heads/main",
        job_env=None,
        replace=None,
        only=None,
        previous=None,
    ):
        """Run ``workflow`` (a path) for ``event``; ``job_env`` {job: {var:
        value}} adds to a job's environment (the runner's own, such as its
        CUDA toolkits, or a narrowing of a command the test says); ``replace``
        {step name: (its command, the stand-in command)} replaces a step and
        checks the command it replaces; ``only`` runs those jobs alone, in the
        run ``previous`` (a re-run), whose other jobs' results stand."""
        data = load_workflows([workflow])[Path(workflow)]
        if previous is None:
            self.runs += 1
            run = WorkflowRun(Path(workflow), event, 4242 + self.runs)
        else:
            run = previous
        triggers = data["on"]
        assert event in triggers, f"{workflow} has no {event} trigger"
        if event == "push":
            assert pushed(triggers["push"], ref), f"{workflow} does not run on {ref}"
        declared = {}
        if event == "workflow_dispatch":
            declared = (triggers["workflow_dispatch"] or {}).get("inputs") or {}
        unknown = set(inputs or {}) - set(declared)
        assert not unknown, f"{workflow} declares no input {unknown}"
        full_inputs = {
            name: (inputs or {}).get(name, spec.get("default", ""))
            for name, spec in declared.items()
        }
        for name, spec in declared.items():
            if spec.get("type") == "choice":
                assert full_inputs[name] in spec["options"], (name, full_inputs[name])
        github = {
            "event_name": event,
            "ref": ref,
            "ref_name": re.sub(r"^refs/(heads|tags|pull)/", "", ref),
            "ref_type": "tag" if ref.startswith("refs/tags/") else "branch",
            "run_id": run.run_id,
            "run_attempt": 1,
            "repository": "octo-org/custom-ops",
            "server_url": "https://github.com",
            "token": "rehearsal-token",
        }
        contexts = {
            "github": github,
            "inputs": full_inputs,
            "vars": variables or {},
            "secrets": {},
        }
        jobs = data["jobs"]
        for job_id in order(jobs):
            if only is not None and job_id not in only:
                continue
            run.jobs[job_id] = self.run_job(
                run,
                data,
                job_id,
                contexts,
                (job_env or {}).get(job_id, {}),
                replace or {},
            )
        return run

    def run_job(self, run, data, job_id, contexts, extra_env, replace):
        job = data["jobs"][job_id]
        needs = job.get("needs", [])
        needs = [needs] if isinstance(needs, str) else needs
        needs_context = {
            name: {
                "result": run.results(name),
                "outputs": (run.jobs[name][-1].outputs if run.jobs.get(name) else {}),
            }
            for name in needs
        }
        results = [needs_context[name]["result"] for name in needs]
        status = {
            "success": lambda: all(r == "success" for r in results),
            "failure": lambda: any(r == "failure" for r in results),
            "cancelled": lambda: False,
            "always": lambda: True,
        }
        job_contexts = {**contexts, "needs": needs_context, "matrix": {}}
        evaluator = Evaluator(job_contexts, status)
        if not condition(job.get("if"), evaluator):
            return [
                JobRun(job_id, {}, "skipped", {}, "", [], Path(), {}),
            ]
        combos = [{}]
        matrix = (job.get("strategy") or {}).get("matrix")
        if matrix is not None:
            values = interpolate(matrix, evaluator)
            keys = [key for key in values if key not in ("include", "exclude")]
            combos = [
                dict(zip(keys, combo, strict=True))
                for combo in itertools.product(*(values[key] for key in keys))
            ]
        return [
            self.run_steps(
                run,
                data,
                job_id,
                job,
                {**job_contexts, "matrix": combo},
                extra_env,
                replace,
            )
            for combo in combos
        ]

    def checkout(self, destination):
        """The working tree as a fresh clone of it would hold it: the
        tracked and untracked files git does not ignore, committed once."""
        destination.mkdir(parents=True, exist_ok=True)
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        ).stdout.split(b"\0")
        for name in filter(None, (item.decode() for item in listed)):
            source = REPO / name
            if source.is_file():
                (destination / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, destination / name)
        git = ["git", "-c", "user.name=rehearsal", "-c", "user.email=r@example.org"]
        for command in (
            ["init", "-q"],
            ["add", "-A"],
            ["commit", "-q", "-m", "checkout"],
        ):
            subprocess.run(
                git + command, cwd=destination, check=True, capture_output=True
            )

    def run_steps(self, run, data, job_id, job, contexts, extra_env, replace):
        label = "-".join([job_id, *map(str, contexts["matrix"].values())])
        root = self.scratch / f"run-{run.run_id}" / label
        attempt = 1
        while (root.parent / f"{label}.{attempt}").exists():
            attempt += 1
        root = root.parent / f"{label}.{attempt}"
        workspace, home, temp = root / "workspace", root / "home", root / "temp"
        home.mkdir(parents=True)
        temp.mkdir()
        permissions = job.get("permissions", data.get("permissions", "read-all"))
        evaluator_functions = {}
        steps_context = {}
        env_context = {**(data.get("env") or {})}
        failed = False

        def status_functions():
            return {
                "success": lambda: not failed,
                "failure": lambda: failed,
                "cancelled": lambda: False,
                "always": lambda: True,
                "hashfiles": hash_files(workspace),
            }

        contexts = {
            **contexts,
            "steps": steps_context,
            "env": env_context,
            "runner": {"os": "Linux", "arch": "X64", "temp": str(temp)},
            "job": {"status": "success"},
        }
        contexts["github"] = {**contexts["github"], "workspace": str(workspace)}
        evaluator = Evaluator(contexts, evaluator_functions)
        evaluator_functions.update(status_functions())
        runs_on = interpolate(job["runs-on"], evaluator)
        labels = runs_on if isinstance(runs_on, list) else [runs_on]
        # GitHub's own runners are named by their image; any other label is
        # a self-hosted runner's.
        hosted = all(
            re.match(r"(ubuntu|windows|macos)-", str(label)) for label in labels
        )
        contexts["runner"]["environment"] = "github-hosted" if hosted else "self-hosted"
        env_context.update(interpolate(job.get("env") or {}, evaluator))
        environment = job.get("environment")
        if isinstance(environment, str):
            environment = {"name": environment}
        environment_name = (
            to_string(interpolate(environment["name"], evaluator))
            if environment
            else None
        )
        path_additions = []
        job_env = {
            **self.base_env(home),
            "GITHUB_WORKSPACE": str(workspace),
            "GITHUB_RUN_ID": str(run.run_id),
            "GITHUB_RUN_ATTEMPT": "1",
            "GITHUB_REPOSITORY": contexts["github"]["repository"],
            "GITHUB_SERVER_URL": contexts["github"]["server_url"],
            "GITHUB_REF": contexts["github"]["ref"],
            "GITHUB_REF_NAME": contexts["github"]["ref_name"],
            "GITHUB_EVENT_NAME": contexts["github"]["event_name"],
            "GITHUB_JOB": job_id,
            "RUNNER_TEMP": str(temp),
            "RUNNER_OS": "Linux",
            "RUNNER_ARCH": "X64",
            "RUNNER_ENVIRONMENT": contexts["runner"]["environment"],
            "REHEARSAL_PERMISSIONS": json.dumps(
                permissions if isinstance(permissions, dict) else {}
            ),
            **self.runner_env,
            **extra_env,
        }
        summary, steps = [], []
        workspace.mkdir(parents=True)
        for index, step in enumerate(job["steps"]):
            evaluator_functions.update(status_functions())
            name = to_string(
                interpolate(step.get("name"), evaluator)
                or step.get("uses")
                or step.get("run", "").split("\n")[0]
            )
            if not condition(step.get("if"), evaluator):
                steps.append(StepRun(name, "skipped"))
                if "id" in step:
                    steps_context[step["id"]] = {
                        "outputs": {},
                        "outcome": "skipped",
                        "conclusion": "skipped",
                    }
                continue
            files = {
                key: temp / f"step-{index}-{key.lower()}"
                for key in (
                    "GITHUB_OUTPUT",
                    "GITHUB_ENV",
                    "GITHUB_PATH",
                    "GITHUB_STEP_SUMMARY",
                )
            }
            for path in files.values():
                path.write_text("")
            step_env = {
                **job_env,
                **env_context,
                **{
                    k: to_string(v)
                    for k, v in interpolate(step.get("env") or {}, evaluator).items()
                },
                **{key: str(path) for key, path in files.items()},
            }
            if path_additions:
                step_env["PATH"] = os.pathsep.join([*path_additions, step_env["PATH"]])
            if "uses" in step:
                uses = step["uses"]
                action, _, pin = uses.partition("@")
                assert SHA.fullmatch(pin), f"{uses} is not pinned to a commit"
                inputs = {
                    k: to_string(v)
                    for k, v in interpolate(step.get("with") or {}, evaluator).items()
                }
                outcome, outputs, output = self.action(
                    run,
                    action,
                    inputs,
                    workspace,
                    home,
                    step_env,
                    permissions,
                    environment_name,
                )
                files["GITHUB_OUTPUT"].write_text(
                    "".join(f"{k}={v}\n" for k, v in outputs.items())
                )
            else:
                script = step["run"]
                if name in replace:
                    original, stand_in = replace[name]
                    assert script.strip() == original, (name, script)
                    script = stand_in
                script = INTERPOLATION.sub(
                    lambda match: to_string(evaluator.evaluate(match.group(1))), script
                )
                shell = step.get("shell") or (
                    (job.get("defaults") or {}).get("run") or {}
                ).get("shell")
                command = (
                    ["bash", "--noprofile", "--norc", "-eo", "pipefail"]
                    if shell == "bash"
                    else ["bash", "-e"]
                )
                script_file = temp / f"step-{index}.sh"
                script_file.write_text(script)
                cwd = workspace / step.get("working-directory", ".")
                process = subprocess.run(
                    [*command, str(script_file)],
                    cwd=cwd,
                    env=step_env,
                    capture_output=True,
                    text=True,
                    stdin=subprocess.DEVNULL,
                    timeout=1800,
                )
                outcome = "success" if process.returncode == 0 else "failure"
                output = process.stdout + process.stderr
            step_outputs = read_key_values(files["GITHUB_OUTPUT"].read_text())
            env_context.update(read_key_values(files["GITHUB_ENV"].read_text()))
            path_additions = [
                line for line in files["GITHUB_PATH"].read_text().splitlines() if line
            ] + path_additions
            summary.append(files["GITHUB_STEP_SUMMARY"].read_text())
            if "id" in step:
                steps_context[step["id"]] = {
                    "outputs": step_outputs,
                    "outcome": outcome,
                    "conclusion": outcome,
                }
            steps.append(StepRun(name, outcome, output))
            if outcome == "failure":
                failed = True
        outputs = {
            key: to_string(interpolate(value, evaluator))
            for key, value in (job.get("outputs") or {}).items()
        }
        return JobRun(
            job_id,
            contexts["matrix"],
            "failure" if failed else "success",
            outputs,
            "".join(summary),
            steps,
            workspace,
            {**job_env, **env_context},
            # The environment's url is read as the job ends, as GitHub does.
            {
                "name": environment_name,
                "url": to_string(interpolate(environment.get("url"), evaluator)),
            }
            if environment
            else None,
        )

    # -- Actions ------------------------------------------------------------------

    def action(
        self, run, action, inputs, workspace, home, env, permissions, environment
    ):
        """A stand-in for ``action``, run in a job in ``environment`` (a
        name, or None): (outcome, outputs, log)."""
        assert action in ACTION_PERMISSIONS, f"no stand-in for {action}"
        for scope, level in ACTION_PERMISSIONS[action].items():
            if not granted(permissions, scope, level):
                return (
                    "failure",
                    {},
                    REFUSALS.get(action, REFUSAL).format(
                        action=action, scope=scope, level=level
                    ),
                )
        handler = {
            "actions/checkout": lambda: self.checkout(workspace) or ({}, "checked out"),
            "actions/setup-python": lambda: setup_python(inputs, env),
            "actions/cache": lambda: cache(inputs, home),
            "actions/cache/restore": lambda: cache(inputs, home),
            "actions/upload-artifact": lambda: upload(run, inputs, workspace),
            "actions/download-artifact": lambda: download(run, inputs, workspace),
            "peter-evans/create-pull-request": lambda: self.pull_request(
                run, inputs, workspace, env
            ),
            "actions/configure-pages": lambda: (
                {
                    "base_url": "https://octo-org.github.io/custom-ops",
                    "base_path": "/custom-ops",
                },
                "Pages site found",
            ),
            "actions/upload-pages-artifact": lambda: upload(
                run,
                {
                    "name": "github-pages",
                    "path": inputs["path"],
                    "include-hidden-files": "false",
                    "if-no-files-found": "error",
                },
                workspace,
            ),
            "actions/deploy-pages": lambda: deploy(run),
            "pypa/gh-action-pypi-publish": lambda: self.publish(
                run, inputs, workspace, env, environment
            ),
        }[action]
        try:
            outputs, output = handler()
        except StepFailed as failure:
            return "failure", {}, str(failure)
        return "success", outputs, output

    def pull_request(self, run, inputs, workspace, env):
        paths = inputs.get("add-paths", "").split() or ["."]
        branch = inputs["branch"]
        base = env["GITHUB_REF_NAME"]
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--", *paths],
            cwd=workspace,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        outputs = {"pull-request-branch": branch, "pull-request-operation": "none"}
        if not changed.strip():
            return outputs, "no changes: no pull request"
        diff = subprocess.run(
            ["git", "diff", "HEAD", "--", *paths],
            cwd=workspace,
            capture_output=True,
            text=True,
            check=True,
        ).stdout + "".join(
            (workspace / line[3:]).read_text()
            for line in changed.splitlines()
            if line.startswith("??") and (workspace / line[3:]).is_file()
        )
        body = inputs.get("body", "")
        if inputs.get("body-path"):
            body = Path(inputs["body-path"]).read_text()
        held = self.pulls.get(branch)
        operation = (
            "created"
            if held is None
            else ("updated" if held["diff"] != diff else "none")
        )
        self.pulls[branch] = {
            "branch": branch,
            "base": base,
            "title": inputs.get("title", ""),
            "body": body,
            "commit-message": inputs.get("commit-message", ""),
            "diff": diff,
            "files": sorted(line[3:] for line in changed.splitlines()),
        }
        outputs.update(
            {"pull-request-number": "1", "pull-request-operation": operation}
        )
        return outputs, f"pull request {operation}: {branch} -> {base}"

    def publish(self, run, inputs, workspace, env, environment):
        """gh-action-pypi-publish v1.8.14: trusted publishing (no password
        given), then ``twine upload <packages-dir>/*``; records the upload."""
        claims = {
            "repository": env["GITHUB_REPOSITORY"],
            "workflow": run.workflow.name,
            "environment": environment,
        }
        # PyPI matches the OIDC token's claims against the publisher.
        if self.pypi_publisher != claims:
            rendered = ", ".join(
                f"{key}: {value or 'MISSING'}" for key, value in claims.items()
            )
            raise StepFailed(
                "::error::Trusted publishing exchange failure: Token request "
                "failed: the server refused the request for the following "
                "reasons: * `invalid-publisher`: valid token, but no "
                "corresponding publisher (Publisher with matching claims was "
                f"not found) [claims: {rendered}]"
            )
        folder = (workspace / (inputs.get("packages-dir") or "dist")).resolve()
        files = sorted(path for path in folder.glob("*") if path.is_file())
        if not files:
            raise StepFailed(
                f"ERROR InvalidDistribution: Cannot find file (or expand "
                f"pattern): '{folder}/*'"
            )
        for path in files:
            if not path.name.endswith((".whl", ".tar.gz")):
                raise StepFailed(
                    "ERROR InvalidDistribution: Unknown distribution format: "
                    f"'{path.name}'"
                )
        self.published.append(
            {
                "repository-url": inputs.get("repository-url")
                or "https://upload.pypi.org/legacy/",
                "files": {path.name: path.read_bytes() for path in files},
                "ref": env["GITHUB_REF"],
                **claims,
            }
        )
        return {}, "would upload: " + ", ".join(path.name for path in files)


# What an action answers a job whose token lacks a permission it needs.
REFUSAL = (
    "{action}: Resource not accessible by integration (the job lacks {scope}: {level})"
)
REFUSALS = {
    # oidc-exchange.py v1.8.14, _TOKEN_RETRIEVAL_FAILED_MESSAGE
    "pypa/gh-action-pypi-publish": (
        "::error::Trusted publishing exchange failure: OpenID Connect token "
        "retrieval failed: GitHub: missing or insufficient OIDC token "
        "permissions, the ACTIONS_ID_TOKEN_REQUEST_TOKEN environment variable "
        "was unset. This generally indicates a workflow configuration error, "
        "such as insufficient permissions. Make sure that your workflow has "
        "`id-token: write` configured at the job level"
    ),
}


class StepFailed(Exception):
    pass


def pushed(trigger, ref):
    """Whether a push of ``ref`` starts a workflow ``on: push: trigger``: a
    branch is filtered by ``branches``, a tag by ``tags``, and a workflow
    that filters only one kind of ref never runs for the other."""
    trigger = trigger or {}
    unread = {"branches-ignore", "tags-ignore", "paths", "paths-ignore"} & set(trigger)
    assert not unread, f"the rehearsal reads no {unread}"
    tag = ref.startswith("refs/tags/")
    kind, other = ("tags", "branches") if tag else ("branches", "tags")
    if kind not in trigger:
        return other not in trigger
    name = re.sub(r"^refs/(heads|tags)/", "", ref)
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in trigger[kind])


def order(jobs):
    """The jobs in an order that runs each after what it needs."""
    done, ordered = set(), []
    while len(ordered) < len(jobs):
        ready = [
            name
            for name, job in jobs.items()
            if name not in done
            and set(
                [job["needs"]]
                if isinstance(job.get("needs"), str)
                else job.get("needs", [])
            )
            <= done
        ]
        assert ready, "the jobs' needs form a cycle"
        for name in ready:
            done.add(name)
            ordered.append(name)
    return ordered


def read_key_values(text):
    """GITHUB_OUTPUT / GITHUB_ENV: key=value lines and key<<DELIMITER blocks."""
    values, lines = {}, iter(text.splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            key, delimiter = line.split("<<", 1)
            block = []
            for inner in lines:
                if inner == delimiter:
                    break
                block.append(inner)
            values[key] = "\n".join(block)
        elif "=" in line:
            key, value = line.split("=", 1)
            values[key] = value
    return values


def setup_python(inputs, env):
    wanted = inputs["python-version"]
    found = shutil.which(f"python{wanted}", path=env["PATH"])
    if not found:
        raise StepFailed(f"setup-python stand-in: no python{wanted} here")
    return {"python-version": wanted}, f"python {wanted}: {found}"


def cache(inputs, home):
    paths = [
        line.strip().replace("~", str(home), 1)
        for line in inputs["path"].splitlines()
        if line.strip()
    ]
    assert inputs["key"], "a cache needs a key"
    return {"cache-hit": "false"}, "cache stand-in: nothing restored ({})".format(
        ", ".join(paths)
    )


def deploy(run):
    site = run.artifacts.get("github-pages")
    if not site:
        raise StepFailed("deploy-pages stand-in: no github-pages artifact")
    return {"page_url": "https://octo-org.github.io/custom-ops/"}, "deployed"


def hidden(relative):
    return any(part.startswith(".") for part in Path(relative).parts)


def upload(run, inputs, workspace):
    """upload-artifact's choice of files and root folder (search.ts)."""
    name = inputs.get("name") or "artifact"
    patterns = [line.strip() for line in inputs["path"].splitlines() if line.strip()]
    files, search_paths = [], []
    for pattern in patterns:
        literal = re.split(r"[*?\[]", pattern, maxsplit=1)[0]
        search = (workspace / literal).resolve()
        if literal != pattern:
            search = search if literal.endswith("/") else search.parent
            matched = [Path(p) for p in sorted(workspace.glob(pattern))]
        else:
            matched = [search]
        search_paths.append(search)
        for path in matched:
            if path.is_dir():
                files += [p for p in sorted(path.rglob("*")) if p.is_file()]
            elif path.is_file():
                files.append(path)
    if len(search_paths) > 1:
        root = Path(os.path.commonpath(search_paths))
    elif len(files) == 1 and files[0] == search_paths[0]:
        root = files[0].parent
    else:
        root = search_paths[0]
    include_hidden = inputs.get("include-hidden-files", "false") == "true"
    content = {
        str(path.relative_to(root)): path.read_bytes()
        for path in files
        if include_hidden or not hidden(path.relative_to(root))
    }
    if not content:
        mode = inputs.get("if-no-files-found", "warn")
        if mode == "error":
            raise StepFailed(f"No files were found with the provided path: {patterns}")
        return {}, f"warning: no files found for {name}; no artifact uploaded"
    if name in run.artifacts and inputs.get("overwrite", "false") != "true":
        raise StepFailed(
            "Failed to CreateArtifact: Received non-retryable error: (409) "
            "Conflict: an artifact with this name already exists on the workflow run"
        )
    run.artifacts[name] = content
    return {
        "artifact-id": str(len(run.artifacts))
    }, f"uploaded {name}: {sorted(content)}"


def download(run, inputs, workspace):
    """download-artifact v8.0.1's destinations (src/download-artifact.ts)."""
    path = inputs.get("path") or str(workspace)
    resolved = (workspace / path).resolve()
    name = inputs.get("name")
    if name:
        if name not in run.artifacts:
            raise StepFailed(
                f"Unable to download artifact(s): Artifact '{name}' not found"
            )
        chosen = [name]
    else:
        pattern = inputs.get("pattern")
        chosen = sorted(
            artifact
            for artifact in run.artifacts
            if not pattern or fnmatch.fnmatchcase(artifact, pattern)
        )
    merge_multiple = inputs.get("merge-multiple", "false") == "true"
    for artifact in chosen:
        folder = (
            resolved
            if name or merge_multiple or len(chosen) == 1
            else resolved / artifact
        )
        for relative, content in run.artifacts[artifact].items():
            target = folder / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
    return {
        "download-path": str(resolved)
    }, f"Total of {len(chosen)} artifact(s) downloaded"


def show(text, width=100):
    """``text`` indented, for a failing assertion's message."""
    return textwrap.indent(text[-6000:], "    ")
