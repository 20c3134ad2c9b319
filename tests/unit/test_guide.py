"""The contributor's guide's machinery (tools/guide.py): generated tables
between markers, relative links and their headings, every make target
described."""

import re
import subprocess

import guide
import pytest

REPO = guide.REPO


def test_a_link_to_no_file_or_no_heading_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(guide, "REPO", tmp_path)
    (tmp_path / "there.md").write_text(
        "# A `Title`, with words\n\n## Twice\n## Twice\n"
    )
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md) [ok](there.md#a-title-with-words) [ok](there.md#twice-1)\n"
        "[ok](#local) [web](https://example.org/x) ![ok](there.md)\n"
        "[gone](nowhere.md) [no heading](there.md#missing)\n"
        "`[in code](nowhere.md)`\n```\n[in a block](nowhere.md)\n```\n"
        "## Local\n"
    )
    assert guide.broken_links([page]) == [
        "page.md: nowhere.md (no such file)",
        "page.md: there.md#missing (no such heading)",
    ]


def test_a_table_is_replaced_between_its_markers_only():
    start, end = guide.markers("t")
    text = f"before\n{start}\nold\n{end}\nafter\n"
    assert guide.with_table(text, "t", "new") == f"before\n{start}\nnew\n{end}\nafter\n"
    with pytest.raises(LookupError, match="no markers for u"):
        guide.with_table(text, "u", "new")


def test_a_docstrings_first_sentence_ends_outside_literals():
    said = guide.first_sentence(
        "The table, rendered by ``.. a-directive::`` here. More.\n\nElse."
    )
    assert said == "The table, rendered by `.. a-directive::` here."
    assert guide.first_sentence("A | B:\n\n* item") == "A \\| B."


def test_the_disk_table_shows_each_jobs_step_beside_its_measure():
    figures = {"jobs": {"test": 35.4}, "shards": {"2.15.0": 6.4, "2.10.0": 13.1}}
    steps = [("site.yml", "test", 40, "the environments"), ("m.yml", "gpu", 8, "one")]
    table = guide.job_disk_table(figures, steps)
    assert "| site.yml: test | the environments | 35.4 GiB | 40 GiB |" in table
    assert "| m.yml: gpu | one | – | 8 GiB |" in table
    assert "a machine it did not record" in table


def test_every_disk_step_of_the_workflows_is_found():
    jobs = {(workflow, job) for workflow, job, _, _ in guide.disk_steps()}
    assert {("site.yml", "test"), ("site.yml", "build"), ("matrix.yml", "cpu")} <= jobs


def makefile_targets():
    text = (REPO / "Makefile").read_text()
    phony = re.search(r"^\.PHONY:(.*?)(?<!\\)$", text, re.M | re.S).group(1)
    return text, phony.replace("\\\n", " ").split()


def test_every_make_target_says_what_it_does_and_help_is_the_default():
    text, targets = makefile_targets()
    assert re.search(r"^\.DEFAULT_GOAL := help$", text, re.M)
    described = set(re.findall(r"^([a-z-]+):[^\n]*## ", text, re.M))
    assert set(targets) == described, set(targets) ^ described
    shown = subprocess.run(
        ["make", "-s", "--no-print-directory", "help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for target in targets:
        assert re.search(rf"^  {re.escape(target)} ", shown, re.M), target
