"""The documentation: the README's shape, the site's generated parts, and every Python and shell block
of the site's pages (docs/) and of the README, run as printed.

A page's blocks run in order, in one temporary folder per page (``examples/`` linked into it):
``python`` blocks are exec'd in one fresh namespace per page, ``bash`` blocks run with ``bash -euo
pipefail`` with ``fedpne`` and ``python3`` on PATH.  A comment on the line before a block decides how
it runs:

* none: the gate runs it (cheap blocks: the gate's share of this file is held to about 20 s);
* ``<!-- test: thorough -->``: only the thorough tier runs it (pytest --thorough);
* ``<!-- file: NAME -->``: the block is written to NAME in the page's folder, for the blocks after it;
* ``<!-- not run: REASON -->``: never run, for what no CI machine has (a GPU, several hosts, a
  cluster, an install); ``test_blocks_not_run_say_why`` counts them.

Any other fenced block (``text``, ``toml`` without a file name, ``bibtex``) is text: sample output,
formats and synopses.
"""
import os
import re
import subprocess
import sys
import textwrap

import pytest

import objectives
from fedpne_jax.core import registry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
sys.path.insert(0, DOCS)
import hooks  # noqa: E402  (docs/hooks.py: the site's generated parts)

README_LINES = 200
GATE_COMMAND = "pip install -e \".[test]\" && python3 -m pytest -q -n auto --dist loadfile tests"
THOROUGH_COMMAND = "FEDPNE_MULTIPROCESS_TESTS=1 python3 -m pytest -q -n auto --dist loadfile --thorough tests"
# The blocks that need what no CI machine has; a new one is a visible change of this number.
NOT_RUN = 11
BASH_TIMEOUT = 600
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)\n(?P<code>.*?)^(?P=indent)```$", re.S | re.M)
MARK = re.compile(r"<!-- (test: thorough|not run: .+?|file: [\w./-]+) -->\s*$")


def pages() -> list[str]:
    """The site's pages (docs/, less generated data and drafts: folders starting with '_') and the README."""
    found = ["README.md"]
    for folder, dirs, files in os.walk(DOCS):
        dirs[:] = sorted(d for d in dirs if not d.startswith("_") and d != "figures")
        found += sorted(os.path.relpath(os.path.join(folder, f), ROOT) for f in files if f.endswith(".md"))
    return found


def blocks(page: str) -> list[tuple[str, str, str]]:
    """(language, code, how) of each fenced block of ``page``; how: 'gate', 'thorough', 'text',
    'file: NAME' or 'not run: REASON'."""
    text = open(os.path.join(ROOT, page)).read()
    out = []
    for match in FENCE.finditer(text):
        before = text[:match.start()].rstrip().rsplit("\n", 1)[-1]
        mark = MARK.search(before)
        how = mark.group(1) if mark else "gate"
        lang = match.group("lang")
        if how == "test: thorough":
            how = "thorough"
        if lang not in ("python", "bash") and not how.startswith("file: "):
            how = "text"
        out.append((lang, textwrap.dedent(match.group("code")), how))
    return out


def _runnable(tier: str) -> list[str]:
    wanted = {"gate"} if tier == "gate" else {"gate", "thorough"}
    return [p for p in pages() if any(how in wanted for _, _, how in blocks(p))]


@pytest.fixture
def registries():
    """The registries as they were: a page that loads a plugin must not change what later tests see."""
    tables = (registry._ALGORITHMS, registry._BY_TYPE, registry._STYLES, registry._OWNER, registry._LOADED_FILES,
              objectives.OBJECTIVES)
    saved = [(table, table.copy()) for table in tables]
    yield
    for table, copy in saved:
        table.clear()
        table.update(copy)


def run_page(page: str, tier: str, folder, monkeypatch) -> int:
    """Run ``page``'s blocks of ``tier`` (thorough: every runnable block) in ``folder``; the number run."""
    os.symlink(os.path.join(ROOT, "examples"), folder / "examples")
    bin_dir = folder / ".bin"
    bin_dir.mkdir()
    (bin_dir / "fedpne").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m fedpne_jax "$@"\n')
    (bin_dir / "fedpne").chmod(0o755)
    for name in ("python", "python3"):
        os.symlink(sys.executable, bin_dir / name)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
               PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    monkeypatch.chdir(folder)
    namespace: dict = {"__name__": "__docs__"}
    ran = 0
    for i, (lang, code, how) in enumerate(blocks(page)):
        if how.startswith("file: "):
            (folder / how.removeprefix("file: ")).write_text(code)
        elif how == "gate" or (how == "thorough" and tier == "thorough"):
            where = f"{page}, block {i + 1} ({lang})"
            if lang == "python":
                exec(compile(code, where, "exec"), namespace)
            else:
                done = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=folder, env=env,
                                      capture_output=True, text=True, timeout=BASH_TIMEOUT)
                assert done.returncode == 0, f"{where} exited {done.returncode}:\n{code}\n{done.stdout}\n{done.stderr}"
            ran += 1
    return ran


@pytest.mark.parametrize("page", _runnable("gate"))
def test_gate_blocks_run_as_printed(page, tmp_path, monkeypatch, registries):
    assert run_page(page, "gate", tmp_path, monkeypatch) > 0


@pytest.mark.thorough
@pytest.mark.parametrize("page", _runnable("thorough"))
def test_every_block_runs_as_printed(page, tmp_path, monkeypatch, registries):
    assert run_page(page, "thorough", tmp_path, monkeypatch) > 0


def test_blocks_not_run_say_why():
    not_run = [(page, how) for page in pages() for _, _, how in blocks(page) if how.startswith("not run: ")]
    assert all(len(how.removeprefix("not run: ").strip()) > 8 for _, how in not_run), not_run
    assert len(not_run) == NOT_RUN, "\n".join(f"{page}: {how}" for page, how in not_run)


def test_every_code_block_says_its_language():
    bare = [page for page in pages() for lang, _, _ in blocks(page) if not lang]
    assert not bare, f"fenced blocks without a language (python, bash, text, toml ...): {bare}"


def test_readme_is_a_landing_page():
    text = open(os.path.join(ROOT, "README.md")).read()
    assert len(text.splitlines()) <= README_LINES
    first = [code for lang, code, _ in blocks("README.md") if lang == "bash"][0].splitlines()
    assert first[:2] == ["pip install -e . && fedpne run", GATE_COMMAND]
    assert THOROUGH_COMMAND in text and 'pip install -e ".[docs]" && mkdocs serve' in text
    for target in re.findall(r"\]\((docs/[^)#]+)", text):
        assert os.path.exists(os.path.join(ROOT, target)), target


def test_generated_tables_list_every_algorithm_and_option():
    names = list(registry.names())
    table = hooks.render("<!-- generated: algorithms -->")
    assert all(f"| `{name}` |" in table for name in names)
    listed = [name for family in hooks.FAMILIES for name in re.findall(r"^### `([\w-]+)`",
                                                                          hooks.render(f"<!-- generated: params {family} -->"),
                                                                          re.M)]
    assert sorted(listed) == sorted(names)
    cli = hooks.render("<!-- generated: cli -->")
    for option in ("--instance", "--help-params", "--plugin", "--dim", "--devices", "--jobs", "--format"):
        assert f"`{option}" in cli, option
    for command in ("run", "sweep", "reproduce", "plot", "report", "export", "flower local"):
        assert f"### `fedpne {command}`" in cli, command


def test_every_placeholder_of_the_pages_renders():
    for page in pages():
        text = open(os.path.join(ROOT, page)).read()
        assert "<!-- generated:" not in hooks.render(text), page


def test_every_benchmark_file_names_its_machine():
    for line in hooks.render("<!-- generated: bench-files -->").splitlines()[2:]:
        assert "processor not recorded" not in line, line


@pytest.mark.thorough
def test_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocstrings_handlers.python", reason="the site needs the docs extra: pip install -e \".[docs]\"")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-5000:]


def test_docstring_roles_become_links_to_the_api_page_or_code():
    """The API page shows no Sphinx role as written: one naming a documented object links to it (an
    alias too, through its target), any other is code (docs/roles.py)."""
    griffe = pytest.importorskip("griffe", reason="the site needs the docs extra: pip install -e \".[docs]\"")
    import roles
    extension = roles.SphinxRoles()
    loader = griffe.GriffeLoader(search_paths=[ROOT], extensions=griffe.load_extensions(extension))
    loader.load("objectives")
    package = loader.load("fedpne_jax")
    run = package["run"].final_target
    assert "[`fedpne_jax.make_config`][fedpne_jax.make_config]" in run.docstring.value
    anchors = extension._anchors(loader)
    executor = package["core.executor"]
    assert extension.rewrite(loader, anchors, executor, ":func:`fedpne_jax.core.run.run`") == "[`fedpne_jax.core.run.run`][fedpne_jax.run]"
    assert extension.rewrite(loader, anchors, executor, ":func:`~fedpne_jax.core.executor.execute`") == "`execute`"
    assert extension.rewrite(loader, anchors, executor, ":class:`fp.Optimizer`") == "[`fp.Optimizer`][fedpne_jax.Optimizer]"
    assert extension.rewrite(loader, anchors, executor, ":mod:`objectives`") == "`objectives`"
    left = [obj.path for obj in _objects(package) if obj.docstring is not None and roles.ROLE.search(obj.docstring.value)]
    assert left == []


def _objects(obj):
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _objects(member)


MODULE_DOCSTRING_LINES = 15
TIMING = re.compile(r"(?<![\w.])(?<!e-)\d+(?:\.\d+)?\s*(?:us|µs|μs|ms|s|secs?|seconds?|mins?|minutes?)\b"
                    r"|\bloaded\b|\b2-core\b|\bEPYC\b|\bXeon\b|\bZen\b", re.I)


def test_module_docstrings_are_short_and_cite_no_timing():
    """A module's docstring says what the module is for in at most 15 lines and cites no timing nor
    machine: the narratives live on the site (docs/), the measured figures in docs/bench/ and the
    benchmark page, each with its machine."""
    import ast
    long, timed = [], []
    for package in ("fedpne_jax", "objectives"):
        for folder, _, names in sorted(os.walk(os.path.join(ROOT, package))):
            for name in sorted(n for n in names if n.endswith(".py")):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as f:
                    doc = ast.get_docstring(ast.parse(f.read()))
                if not doc:
                    continue
                where = os.path.relpath(path, ROOT)
                if len(doc.splitlines()) > MODULE_DOCSTRING_LINES:
                    long.append(f"{where} ({len(doc.splitlines())} lines)")
                timed += [f"{where}: {m.group(0)!r}" for m in TIMING.finditer(doc)]
    assert not long and not timed, "module docstrings over 15 lines:\n  " + "\n  ".join(long) + \
        "\nmodule docstrings citing a timing or machine:\n  " + "\n  ".join(timed)
