"""The README and the user docs stay short, true and current.

The README's two set-up commands are the ones CI runs; the README stays within 200 lines;
every relative link in the README, docs/ and benchmarks/ reaches a file (and its heading);
docs/compile.md's lists of what plugtorch.compile guards and what it runs eagerly are the
ones in plugtorch/compiler's docstring; the console script and ``python -m plugtorch`` reach
the application, which ``import plugtorch`` does not load; and no document or docstring
carries history (dates, issue numbers), which belongs in commit messages.
"""
from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
TRAIN_COMMAND = "pip install -e . && plugtorch train --data-dir data --dataset mnist --model cnn --epochs 3"
TEST_COMMAND = 'pip install -e ".[dev]" && python -m pytest -q'


def _bash_lines(markdown: str) -> list[str]:
    blocks = re.findall(r"^```bash\n(.*?)^```", markdown, re.M | re.S)
    return [line.strip() for block in blocks for line in block.splitlines()]


def test_the_readme_is_at_most_200_lines():
    assert len(README.splitlines()) <= 200


def test_the_readme_shows_the_two_set_up_commands_verbatim():
    lines = _bash_lines(README)
    assert TRAIN_COMMAND in lines
    assert TEST_COMMAND in lines


def test_ci_runs_the_readmes_test_command():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    # CI spells pip as a module and quietly; otherwise the command is the README's
    as_readme = [re.sub(r"^python -m pip install -q ", "pip install ", line.strip()) for line in ci]
    assert TEST_COMMAND in as_readme


def _markdown_files():
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "benchmarks").glob("*.md"))]


def _without_code_blocks(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def _anchors(path: pathlib.Path) -> set[str]:
    """GitHub's anchors for a Markdown file's headings: lower case, punctuation dropped, spaces as -."""
    headings = re.findall(r"^#+ (.*)$", _without_code_blocks(path.read_text()), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_reach_a_file_and_a_heading(path):
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", _without_code_blocks(path.read_text())):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = path.parent / file if file else path
        if not dest.exists() or (anchor and dest.suffix == ".md" and anchor not in _anchors(dest)):
            broken.append(target)
    assert not broken, f"{path.relative_to(ROOT)} has broken links: {broken}"


def _bullets(text: str, heading: str, end: str) -> list[str]:
    """The bullet items between ``heading`` and ``end``, each joined into one line, with
    reStructuredText's double backquotes as Markdown's single ones."""
    section = text[text.index(heading) + len(heading):]
    section = section[:section.index(end)].replace("``", "`")
    items = re.split(r"^[*-] ", section, flags=re.M)[1:]
    return [" ".join(item.split("\n\n")[0].split()) for item in items]


def test_docs_compile_lists_exactly_what_the_compiler_guards_and_refuses():
    doc = (ROOT / "docs" / "compile.md").read_text()
    source = (ROOT / "plugtorch" / "compiler" / "__init__.py").read_text()
    guarded = _bullets(doc, "## What is guarded", "##")
    assert guarded == _bullets(source, "**What is guarded**", "What cannot be replayed")
    assert len(guarded) >= 6
    assert (_bullets(doc, "## What runs eagerly instead", "##")
            == _bullets(source, "What cannot be replayed", "An optimizer making"))


def test_the_console_script_is_the_applications_main():
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"plugtorch": "plugtorch.apps.cli:main"}
    module, name = scripts["plugtorch"].split(":")
    code = f"import {module}; assert callable({module}.{name})"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def test_python_m_plugtorch_is_the_same_command():
    r = subprocess.run([sys.executable, "-m", "plugtorch", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "usage: plugtorch" in r.stdout and "train" in r.stdout and "plugins" in r.stdout


def test_importing_plugtorch_does_not_load_the_application():
    code = "import sys, plugtorch; print(sorted(m for m in sys.modules if m.startswith('plugtorch.apps')))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


HISTORY = re.compile(r"\b(issue|stop) [0-9]+\b|\b20[0-9]{2}-[0-9]{2}-[0-9]{2}\b", re.I)


def _text_files():
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "README.md", "docs", "plugtorch", "backends",
                          "tests", "benchmarks", "examples"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"not a git checkout ({out.stderr.strip()})")
    this = pathlib.Path(__file__).resolve()
    return [ROOT / p for p in out.stdout.split()
            if p.endswith((".md", ".py", ".pyi", ".c", ".h", ".cu", ".cuh", ".sh")) and (ROOT / p).resolve() != this]


def test_no_document_or_source_carries_dates_or_issue_numbers():
    found = []
    for path in _text_files():
        if not path.is_file():
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if HISTORY.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not found, "history belongs in commit messages:\n" + "\n".join(found[:20])
