#!/usr/bin/env python3
"""tools/deps_check.py, the map from each import and #include to a package of tools/deps.sh's
groups: it passes on the repository as it is, and fails, one line naming the module, its file and
the group, when a group lacks a package (python3-matplotlib, the package issue 23 found missing
from the test group; libcriterion-dev; tqdm, which the fuzz group needs through the repository's
modules that its script imports) or when a module comes from a file no Debian package owns
(installed by hand). Run from the repository root with /usr/bin/python3 (make test does).
Prints one line per test and "N passed, M failed, N skipped"."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tools"))
import deps_check  # noqa: E402
from harness import collector, run_tests  # noqa: E402  (tests/, the script's directory)

TMP = tempfile.mkdtemp(prefix="normllama-deps-")
TESTS = []
test = collector(TESTS)


def check(*args, env=None):
    """Runs the check; returns (exit code, its stdout's lines)."""
    p = subprocess.run([sys.executable, "tools/deps_check.py", *args], capture_output=True,
                       text=True, env={**os.environ, **(env or {})})
    assert not p.stderr, p.stderr
    return p.returncode, p.stdout.splitlines()


def deps_without(package):
    """A copy of tools/deps.sh with package taken out of every group."""
    text = open("tools/deps.sh").read()
    assert f" {package}" in text, package
    path = os.path.join(TMP, f"deps-without-{package}.sh")
    open(path, "w").write(text.replace(f" {package}", ""))
    return path


@test
def every_module_maps_to_a_package_of_its_groups():
    code, lines = check()
    print("\n".join(lines))
    assert code == 0 and lines[-1].endswith(" passed, 0 failed"), lines
    assert int(lines[-1].split()[1]) >= 100, lines  # 130 when written: a check that checked


@test
def a_group_without_matplotlib_fails_naming_it_and_the_groups():
    deps = deps_without("python3-matplotlib")
    code, lines = check("--deps", deps)
    want = [f"tools/deps_check.py: matplotlib (tools/plot_compare.py) comes from "
            f"python3-matplotlib: group '{g}' of {deps} lacks its package"
            for g in ("plot", "test", "twins")]
    assert code == 1 and lines[:-1] == want, lines
    assert lines[-1].endswith(" passed, 3 failed"), lines


@test
def a_group_without_criterion_fails_on_its_headers():
    deps = deps_without("libcriterion-dev")
    code, lines = check("--deps", deps)
    assert code == 1 and lines[-1].endswith(" passed, 2 failed"), lines
    for header in ("criterion.h", "redirect.h"):
        assert any(line.startswith(f"tools/deps_check.py: <criterion/{header}> (tests/") and
                   line.endswith(f"comes from libcriterion-dev: group 'test' of {deps} lacks "
                                 "its package") for line in lines), lines


@test
def a_group_needs_what_the_repositorys_modules_it_runs_import():
    # make fuzz runs tests/gguf_seed.py, which imports nllm_gguf.py and nllm_format.py, whose
    # functions import tqdm: the fuzz group needs it as much as the groups of the files importing it
    deps = deps_without("python3-tqdm")
    code, lines = check("--deps", deps)
    groups = {line.split("group '")[1].split("'")[0] for line in lines[:-1]}
    assert code == 1 and {"fuzz", "test", "train", "twins"} <= groups, lines


@test
def a_module_no_package_owns_fails():
    # a tqdm found first on PYTHONPATH, as one installed by hand would be
    os.makedirs(os.path.join(TMP, "site", "tqdm"))
    fake = os.path.join(TMP, "site", "tqdm", "__init__.py")
    open(fake, "w").close()
    code, lines = check(env={"PYTHONPATH": os.path.join(TMP, "site")})
    assert code == 1, lines
    assert any(line.startswith("tools/deps_check.py: tqdm (") and
               line.endswith(f") comes from {fake}, which no Debian package owns: group 'test' of "
                             "tools/deps.sh lacks its package") for line in lines), lines


@test
def imports_are_read_from_the_code_not_the_text():
    source = os.path.join(TMP, "imports.py")
    open(source, "w").write('"""\nfrom the docstring import nothing\n"""\nimport os.path, json\n'
                            "from numpy import linalg\nfrom . import sibling\n"
                            "def f():\n    import tqdm.auto as t\n")
    assert deps_check.python_imports(source) == {"os", "json", "numpy", "tqdm"}


@test
def files_get_their_groups_and_a_new_directory_gets_none():
    assert deps_check.groups_of("tools/plot_compare.py") == ["plot", "test"]
    assert deps_check.groups_of("tools/plot_twins.py") == ["twins"]
    assert deps_check.groups_of("export.py") == ["train", "test"]
    assert deps_check.groups_of("tests/fuzz_tokenizer.c") == ["fuzz"]
    assert deps_check.groups_of("tests/gguf_seed.py") == ["fuzz", "test"]
    assert deps_check.groups_of("tests/test_run.c") == ["test"]
    assert deps_check.groups_of("tools/stream.c") == ["build"]
    assert deps_check.groups_of("tools/new.py") is None
    assert deps_check.groups_of("lib/model.c") is None

if __name__ == "__main__":
    sys.exit(run_tests(TESTS, TMP))
