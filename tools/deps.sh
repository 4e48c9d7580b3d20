#!/usr/bin/env bash
# Install the Debian packages a make target needs, when any is missing: the first step of
# `make run`, `make test` and the other targets, so that each works as the first command typed
# on a fresh Debian machine.
#
# usage: tools/deps.sh GROUP...
#   build   the C build of ./run (libstb-dev; gcc, make and libgomp come with gcc)
#   fetch   models/fetch.sh's downloads (curl)
#   run     make run: build and fetch
#   test    the test suite: build and fetch, Criterion, git (tests/test_fresh_machine.sh copies
#           the repository's tracked files), the Python side of the tests
#   fuzz    make fuzz: build and fetch, clang with libFuzzer's runtime, NumPy (the GGUF seeds)
#   plot    tools/plot_compare.py and the twin study's pictures (matplotlib)
#   train   export.py, train.py and make twins (PyTorch with OpenBLAS, NumPy, SentencePiece, tqdm)
#
# Each group lists everything its target needs, so that one target asks for one install line.
#
# Installed packages are found with dpkg-query. Missing ones are installed with apt-get when
# running as root; otherwise one line gives the exact `sudo apt-get install` to type, and the
# exit status is 1. On a machine without dpkg, one line names the packages to install by hand.
#
# Exit status: 0 everything present or installed, 1 missing and not installed, 2 usage error.
set -euo pipefail

prog=tools/deps.sh

packages_of() { # packages_of GROUP -> the group's Debian package names
    case $1 in
    build) echo libc6-dev libstb-dev ;;
    fetch) echo curl ca-certificates ;;
    run) echo "$(packages_of build) $(packages_of fetch)" ;;
    test) echo "$(packages_of run) libcriterion-dev git $(packages_of train)" ;;
    fuzz) echo "$(packages_of run) clang libclang-rt-14-dev python3 python3-numpy" ;;
    plot) echo python3 python3-matplotlib ;;
    train) echo python3 python3-numpy python3-torch libopenblas0-pthread python3-sentencepiece \
        python3-tqdm ;;
    *) return 1 ;;
    esac
}

groups="build, fetch, run, test, fuzz, plot, train"
(($# > 0)) || { echo "$prog: error: usage: $prog GROUP... (groups: $groups)" >&2; exit 2; }
wanted=()
for group in "$@"; do
    names=$(packages_of "$group") ||
        { echo "$prog: error: unknown group '$group' (groups: $groups)" >&2; exit 2; }
    for p in $names; do
        [[ " ${wanted[*]-} " == *" $p "* ]] || wanted+=("$p")
    done
done

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "$prog: error: not a Debian machine (no dpkg-query); install by hand: ${wanted[*]}" >&2
    exit 1
fi

missing=()
for p in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
((${#missing[@]} == 0)) && exit 0

if [[ $(id -u) != 0 ]]; then
    echo "$prog: error: missing Debian packages; run: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
fi
echo "$prog: installing ${missing[*]}"
# apt's own lines are shown only when it fails
if ! out=$(apt-get update -qq 2>&1 &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" 2>&1); then
    printf '%s\n' "$out" >&2
    echo "$prog: error: apt-get install ${missing[*]} failed" >&2
    exit 1
fi
