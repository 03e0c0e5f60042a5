"""Every code block in docs/plugins.md runs, and prints what the guide says it prints.

The guide marks its blocks with HTML comments (invisible when rendered) on the line
before the fence:

* a ``python`` block with no mark runs alone, in a fresh interpreter in an empty
  directory; ``<!-- run: NAME -->`` blocks with the same NAME run in one interpreter,
  in order (later blocks use what earlier ones defined);
* ``<!-- output -->`` on a ``text`` block: what the python block before it prints. A line
  ``...`` stands for any number of lines, and ``...`` inside a line for any text;
* ``<!-- excerpt of: PATH -->``: the block is a verbatim part of that file (an example
  package's file, which that package's tests run);
* ``<!-- exercised by: TEST -->`` on a ``bash`` block, and ``<!-- output of: TEST -->`` on
  a ``text`` block: commands that install packages or run pytest, which the named test
  (tests/core/test_third_party_plugin.py, tests/core/test_array_api_backend_example.py)
  runs as written, and output that test checks.

Any other block fails the suite, so no snippet goes unchecked. And the package section
is enough on its own: its two files, copied into a fresh directory, pip-install into a
working plugin (test_a_package_made_from_the_guide_alone_installs_and_works).
"""
from __future__ import annotations

import ast
import os
import pathlib
import re
import subprocess
import sys
from dataclasses import dataclass, field

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "plugins.md"
# the guide imports the example packages' modules directly (installed, their entry points would)
EXAMPLE_PATHS = [ROOT / "examples" / "third_party_plugin", ROOT / "examples" / "array_api_backend"]

_MARK = re.compile(r"^<!--\s*(run|output of|output|excerpt of|exercised by)\s*:?\s*(.*?)\s*-->$")
_SEPARATOR = "<<<plugins.md: next block>>>"


@dataclass
class Block:
    line: int
    lang: str
    code: str
    mark: str | None = None
    arg: str = ""
    expected: str | None = None  # for a python block: the output block after it


@dataclass
class Group:
    name: str
    blocks: list[Block] = field(default_factory=list)


def parse(text: str) -> list[Block]:
    blocks, lines, i, mark = [], text.splitlines(), 0, None
    while i < len(lines):
        line = lines[i]
        m = _MARK.match(line.strip())
        if m:
            mark = (m.group(1), m.group(2))
        elif line.startswith("```"):
            lang, start = line[3:].strip(), i
            body = []
            i += 1
            while not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            blocks.append(Block(start + 1, lang, "\n".join(body) + "\n", *(mark or (None, ""))))
            mark = None
        elif line.strip():
            mark = None  # a mark applies to the block right after it
        i += 1
    for prev, block in zip(blocks, blocks[1:]):
        if block.mark == "output":
            assert prev.lang == "python", f"docs/plugins.md:{block.line}: an output block must follow a python block"
            prev.expected = block.code
    return blocks


BLOCKS = parse(GUIDE.read_text())


def _groups() -> list[Group]:
    groups: dict[str, Group] = {}
    for b in BLOCKS:
        if b.lang == "python" and b.mark in (None, "run"):
            name = b.arg if b.mark == "run" else f"line {b.line}"
            groups.setdefault(name, Group(name)).blocks.append(b)
    return list(groups.values())


def _pattern(expected: str) -> re.Pattern:
    parts = []
    for line in expected.rstrip("\n").splitlines():
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(re.escape(p) for p in line.rstrip().split("...")) + r"\n")
    return re.compile("".join(parts), re.DOTALL)


def _matches(expected: str, got: str) -> bool:
    got = "\n".join(line.rstrip() for line in got.rstrip("\n").splitlines()) + "\n"
    return _pattern(expected).fullmatch(got) is not None


def test_the_guide_has_blocks_of_every_kind():
    kinds = {(b.lang, b.mark) for b in BLOCKS}
    assert {("python", None), ("python", "run"), ("text", "output"), ("bash", "exercised by")} <= kinds
    assert len(_groups()) >= 10


def test_output_wildcards_match_what_they_say():
    assert _matches("a\n...\nd\n", "a\nb\nc\nd\n") and _matches("a\n...\nd\n", "a\nd\n")
    assert _matches("x = ... ok\n", "x = 12 ok\n") and _matches("a  \n", "a\n")
    assert not _matches("a\nd\n", "a\nb\nd\n") and not _matches("a\n", "a\nb\n")
    assert not _matches("x = ... ok\n", "x = 12 not ok\nmore\n")


def test_every_block_is_run_or_checked():
    for b in BLOCKS:
        where = f"docs/plugins.md:{b.line}"
        if b.lang == "python":
            assert b.mark in (None, "run", "excerpt of"), f"{where}: python block marked {b.mark!r}"
            ast.parse(b.code, filename=where)
        elif b.lang == "text":
            assert b.mark in ("output", "output of"), f"{where}: a text block must be a marked output"
        else:
            assert b.mark in ("excerpt of", "exercised by"), \
                f"{where}: a {b.lang or 'plain'} block is neither run nor checked; mark it (see this test's docstring)"


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.mark == "excerpt of"], ids=lambda b: f"line {b.line}")
def test_excerpts_are_verbatim_parts_of_their_files(block):
    source = (ROOT / block.arg).read_text()
    assert block.code.rstrip("\n") in source, f"docs/plugins.md:{block.line} is not a verbatim part of {block.arg}"


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.mark in ("exercised by", "output of")],
                         ids=lambda b: f"line {b.line}")
def test_shell_commands_and_their_output_are_exercised_by_the_named_test(block):
    path, _, name = block.arg.partition("::")
    source = (ROOT / path).read_text()
    assert re.search(rf"^def {re.escape(name)}\(", source, re.M), f"docs/plugins.md:{block.line}: no test {block.arg}"
    helpers = (ROOT / "tests" / "core" / "example_packages.py").read_text()
    body = source[source.index(f"def {name}("):]
    body = body[:body.find("\ndef ", 1)] if "\ndef " in body[1:] else body
    if block.mark == "output of":  # the test compares the CLI's output with this very block
        assert "guide_block(" in body, f"{block.arg} does not check the output shown at docs/plugins.md:{block.line}"
        return
    for command in filter(None, (c.strip() for c in block.code.splitlines())):
        for option in re.findall(r"(?<!\S)(--[\w-]+|PLUGTORCH_\w+)", command):
            assert option in body or option in helpers, \
                f"docs/plugins.md:{block.line}: '{option}' in `{command}` is not what {block.arg} runs"


def test_a_package_made_from_the_guide_alone_installs_and_works(tmp_path):
    # the two files section 6 shows, in a fresh directory, pip-installed as the guide says
    files = {b.arg: b.code for b in BLOCKS if b.mark == "excerpt of" and "third_party_plugin" in b.arg}
    fresh = tmp_path / "my-plugin"
    (fresh / "plugtorch_squareplus").mkdir(parents=True)
    (fresh / "pyproject.toml").write_text(files["examples/third_party_plugin/pyproject.toml"])
    (fresh / "plugtorch_squareplus" / "__init__.py").write_text(
        files["examples/third_party_plugin/plugtorch_squareplus/__init__.py"])
    site = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--no-cache-dir", "--target", str(site), str(fresh)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLUGTORCH_")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    model = next(g for g in _groups() if g.name == "model").blocks[0]
    r = subprocess.run([sys.executable, "-c", "import sys\nfrom plugtorch.apps.cli import main\n"
                        "main(['plugins', '--op', 'squareplus::squareplus'])\n" + model.code],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "entry point 'squareplus = plugtorch_squareplus:lib', contract 1" in r.stdout
    assert "kernel from squareplus" in r.stdout and r.stdout.rstrip().endswith(model.expected.strip())
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--plugtorch-conformance",
                        "--plugtorch-ops", "plugin:squareplus", "--plugtorch-backends", "numpy"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert r.returncode == 0 and " passed" in r.stdout, r.stdout[-3000:]


@pytest.mark.parametrize("group", _groups(), ids=lambda g: g.name)
def test_the_guide_snippets_run_and_print_what_the_guide_shows(group, tmp_path):
    code = "\n".join(f"print({_SEPARATOR!r}, flush=True)\n{b.code}" for b in group.blocks)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [*map(str, EXAMPLE_PATHS), os.environ.get("PYTHONPATH", "")])}
    for k in ("PLUGTORCH_PLUGINS", "PLUGTORCH_PLUGINS_ALLOW", "PLUGTORCH_DISABLE_PLUGIN_AUTOLOAD"):
        env.pop(k, None)
    script = tmp_path / "snippet.py"
    script.write_text(code)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=300)
    first = group.blocks[0].line
    assert r.returncode == 0, f"docs/plugins.md:{first} ({group.name}) failed:\n{r.stdout}\n{r.stderr}"
    outputs = r.stdout.split(_SEPARATOR + "\n")[1:]
    for block, out in zip(group.blocks, outputs):
        if block.expected is not None:
            assert _matches(block.expected, out), (
                f"docs/plugins.md:{block.line} prints\n{out}\nbut the guide shows\n{block.expected}")
