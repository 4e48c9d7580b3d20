#!/usr/bin/env python3
"""Checks tools/deps.sh's groups against the code: every module a tracked Python file imports and
every system header a tracked C file includes must be found on this machine, in a file that a
Debian package owns (dpkg-query -S), and that package must be in the group of each target that
uses the file: the group's packages or what they depend on (Depends and Pre-Depends, as
installed). A package installed by hand but listed in no group is what this catches (issue 23:
make test needed python3-matplotlib, which the test group did not list).

Which groups use a file is the table GROUPS_OF below (a tool that a test runs is used by the test
group too: say so there); a group that uses a Python file uses the repository's modules it imports
too, and theirs (all their imports, those inside functions as well). A tracked file in no group
fails the check.

usage: /usr/bin/python3 tools/deps_check.py [--deps DEPS_SH] [-v]
  --deps   the deps.sh whose groups are checked (default tools/deps.sh; tests/test_deps.py gives a
           copy with a package taken out, to see the check fail)
  -v       print each module's file, package and groups
Headers are found as gcc finds them (the build group's compiler, whatever CC a make is given),
after STB_INCLUDE (the Makefile's -I of stb_ds.h; default /usr/include/stb).
Run from the repository root with Debian's Python (make test does). Prints one line for each
module a group lacks, naming the module, the file that uses it and the group, then
"dependencies: N passed, M failed" (one count per module and group); exit 1 if any failed.
"""
import ast
import fnmatch
import importlib.util
import os
import re
import subprocess
import sys

PROG = "tools/deps_check.py"

# (pattern, groups): the first pattern that matches a tracked file's path gives its groups. A
# pattern's directories must match the path's ("*.py" is the top directory only).
GROUPS_OF = [
    ("tests/fuzz_*.c", ["fuzz"]),  # make fuzz
    ("tests/gguf_seed.py", ["fuzz", "test"]),  # make fuzz's GGUF seeds
    ("tests/*", ["test"]),
    ("tools/plot_compare.py", ["plot", "test"]),  # after run --compare; tests/test_export.py
    ("tools/plot_trace.py", ["plot", "test"]),  # after run --trace; tests/test_trace.py
    ("tools/plot_twins.py", ["twins"]),  # make twins
    ("tools/plot_norm_share.py", ["twins"]),  # make norm-share
    ("tools/twins.py", ["twins"]),
    ("tools/twins_lr.py", ["twins", "test"]),  # make twins-lr; tests/test_tools.py
    ("tools/train_speed.py", ["twins", "test"]),  # make siblings-speed; tests/test_tools.py
    ("tools/plot_twins_lr.py", ["twins", "test"]),  # after twins_lr.py, in its test too
    ("tools/bench_norm.py", ["bench"]),  # make bench-norm
    ("tools/norm_half.py", ["twins", "test"]),  # make norm-half; tests/test_tools.py
    ("tools/norm_share.py", ["twins", "test"]),  # make norm-share; tests/test_tools.py
    ("tools/bench_tokenizer.py", ["test"]),  # make bench-tokenizer asks for the test group
    ("tools/deps_check.py", ["test"]),  # make test
    ("tools/bpe_vocab.py", ["train", "fuzz"]),  # a user's converter; make fuzz's BPE vocabularies
    ("tools/*.c", ["build"]),  # make bench's and the tools' C programs
    ("tools/*.h", ["build"]),
    ("*.py", ["train", "test"]),  # export.py, train.py and their modules; tests run both
    ("*.c", ["build"]),
    ("*.h", ["build"]),
]


# modules that come from elsewhere than Debian, with where; the tests that import them skip by name
# when they are absent
NOT_DEBIAN = {"gguf": "llama.cpp's gguf-py: make llama-oracle's npm package, build/llama.cpp"}


def fail(message):
    sys.exit(f"{PROG}: error: {message}")


def groups_of(path):
    """The groups whose targets use the file path, or None when no pattern matches."""
    for pattern, groups in GROUPS_OF:
        if fnmatch.fnmatch(path, pattern) and path.count("/") == pattern.count("/"):
            return groups
    return None


def python_imports(path):
    """The top-level names of the absolute imports in a Python file."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def python_file(module, local):
    """Where this interpreter finds module: a path, or None; "" for the repository's own."""
    if module in local or module in NOT_DEBIAN:
        return ""
    spec = importlib.util.find_spec(module)
    if spec is None:
        return None
    if spec.origin in ("built-in", "frozen"):  # compiled into the interpreter
        return os.path.realpath(sys.executable)
    if spec.origin:
        return spec.origin
    return list(spec.submodule_search_locations)[0]  # a namespace package's directory


def include_dirs():
    """gcc's search list for #include <...>, after the Makefile's -I of stb."""
    cc = "gcc"
    try:
        out = subprocess.run([cc, "-xc", "-E", "-v", os.devnull], capture_output=True,
                             text=True).stderr
    except OSError as e:
        fail(f"cannot run the compiler {cc}: {e.strerror}")
    found = re.search(r"#include <\.\.\.> search starts here:\n(.*?)\nEnd of search list", out,
                      re.S)
    if not found:
        fail(f"{cc} -E -v printed no include search list")
    return [os.environ.get("STB_INCLUDE", "/usr/include/stb")] + found.group(1).split()


def c_includes(path):
    text = open(path, encoding="utf-8").read()
    return set(re.findall(r"^\s*#\s*include\s*<([^>]+)>", text, re.M))


def c_file(header, dirs):
    for d in dirs:
        if os.path.isfile(os.path.join(d, header)):
            return os.path.join(d, header)
    return None


def owners(paths):
    """{path: set of the packages that own it} for the paths dpkg knows."""
    out = subprocess.run(["dpkg-query", "-S", *paths], capture_output=True, text=True).stdout
    owned = {}
    for line in out.splitlines():
        if line.startswith("diversion "):
            continue
        packages, _, path = line.rpartition(": ")
        owned[path] = {p.strip().split(":")[0] for p in packages.split(",")}
    return owned


def installed_dependencies():
    """{package: the installed packages it depends on} over the installed packages."""
    fields = "${db:Status-Abbrev}\t${Package}\t${Provides}\t${Depends}, ${Pre-Depends}\n"
    out = subprocess.run(["dpkg-query", "-W", "-f", fields], capture_output=True,
                         text=True).stdout
    rows = [line.split("\t") for line in out.splitlines()]
    rows = [r for r in rows if len(r) == 4 and r[0].startswith("ii")]
    names = lambda field: [n for n in (re.sub(r"[ (:].*", "", a.strip()) for a in field.split(","))
                           if n]
    providers = {}
    for _, package, provides, _ in rows:
        providers.setdefault(package, set()).add(package)
        for virtual in names(provides):
            providers.setdefault(virtual, set()).add(package)
    depends = {}
    for _, package, _, field in rows:
        wanted = set()
        for alternatives in field.split(","):  # any installed alternative counts
            for name in names(alternatives.replace("|", ",")):
                wanted |= providers.get(name, set())
        depends[package] = wanted
    return depends


def closure(packages, depends):
    seen, todo = set(), list(packages)
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.add(p)
            todo.extend(depends.get(p, ()))
    return seen


def main(argv):
    deps_sh, verbose = "tools/deps.sh", False
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "-v":
            verbose = True
        elif a == "--deps" and args:
            deps_sh = args.pop(0)
        else:
            fail(f"unknown argument '{a}' (usage: {PROG} [--deps DEPS_SH] [-v])")

    tracked = subprocess.run(["git", "ls-files", "*.py", "*.c", "*.h"], capture_output=True,
                             text=True, check=True).stdout.split()
    local = {}  # a repository module's name -> its files
    for p in tracked:
        if p.endswith(".py"):
            local.setdefault(os.path.basename(p)[:-3], []).append(p)
    dirs = include_dirs()

    failed_lines = []
    groups = {p: set(groups_of(p) or ()) for p in tracked}
    failed_lines += [f"{p} is in no group: add it to GROUPS_OF in {PROG}" for p in tracked
                     if groups_of(p) is None]
    imports = {p: python_imports(p) for p in tracked if p.endswith(".py")}
    changed = True
    while changed:  # a file's groups pass to the repository's modules it imports
        changed = False
        for p, names in imports.items():
            for imported in (f for m in names for f in local.get(m, ())):
                if not groups[p] <= groups[imported]:
                    groups[imported] |= groups[p]
                    changed = True

    # (module as shown, the file where it is found) -> the groups that need it, the first user
    needs, first_user, found = {}, {}, {}
    for path in tracked:
        if path.endswith(".py"):
            modules = {m: python_file(m, local) for m in imports[path]}
        else:
            modules = {f"<{h}>": c_file(h, dirs) for h in c_includes(path)}
        for module, where in modules.items():
            if where == "":
                continue
            found[module] = where
            first_user.setdefault(module, path)
            needs.setdefault(module, set()).update(groups[path])

    owned = owners(sorted({w for w in found.values() if w}))
    depends = installed_dependencies()
    group_packages = {}
    for group in sorted({g for gs in needs.values() for g in gs}):
        listed = subprocess.run(["bash", deps_sh, "--list", group], capture_output=True, text=True)
        if listed.returncode != 0:
            fail(f"{deps_sh} --list {group}: {listed.stderr.strip()}")
        group_packages[group] = closure(listed.stdout.split(), depends)

    passed = 0
    for module in sorted(needs):
        where, user = found[module], first_user[module]
        packages = owned.get(where, set()) if where else set()
        for group in sorted(needs[module]):
            if not where:
                problem = "is not on this machine"
            elif not packages:
                problem = f"comes from {where}, which no Debian package owns"
            elif not packages & group_packages[group]:
                problem = f"comes from {', '.join(sorted(packages))}"
            else:
                passed += 1
                continue
            failed_lines.append(f"{module} ({user}) {problem}: group '{group}' of {deps_sh} "
                                "lacks its package")
        if verbose:
            print(f"{module:28} {user:28} {','.join(sorted(packages)) or '-':28} "
                  f"{' '.join(sorted(needs[module]))}")
    for line in failed_lines:
        print(f"{PROG}: {line}")
    print(f"dependencies: {passed} passed, {len(failed_lines)} failed")
    return 1 if failed_lines else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
