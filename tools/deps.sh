#!/usr/bin/env bash
# Install the Debian packages a make target needs, when any is missing: the first step of
# `make run`, `make test` and the other targets, so that each works as the first command typed
# on a fresh Debian machine.
#
# usage: tools/deps.sh GROUP...
#        tools/deps.sh --list GROUP   (the group's packages, one line; tools/deps_check.py reads it)
#   build   the C build of ./run (gcc, make, libc6-dev's headers, libstb-dev; PCRE2 and utf8proc
#           for byte-level BPE's regexes and NFC; OpenMP comes with gcc)
#   fetch   models/fetch.sh's downloads (curl)
#   run     make run: build and fetch
#   test    the test suite: build and fetch, Criterion, git (tests/test_fresh_machine.sh copies
#           the repository's tracked files), and the Python side of the tests: Jinja (the chat
#           templates' oracle), train's packages (export.py, train.py) and plot's
#           (tools/plot_compare.py)
#   fuzz    make fuzz: build and fetch, clang with libFuzzer's runtime, and tests/gguf_seed.py's
#           Python: NumPy, and SentencePiece and tqdm, which nllm_gguf.py and nllm_format.py import
#           in the functions that need them
#   plot    tools/plot_compare.py and the twin study's pictures (matplotlib)
#   train   export.py, train.py (PyTorch with OpenBLAS, NumPy, SentencePiece, tqdm)
#   twins   make twins: build and fetch, train's and plot's packages
#   bench   make bench and make bench-norm: build and fetch, train's packages (export.py --random,
#           PyTorch's norms), GNU time (peak memory)
#   fresh   make test-fresh: debootstrap, and git to clone HEAD into the new root
#
# Each group lists everything its target needs, so that one target asks for one install line;
# tools/deps_check.py (in make test) checks that every module the Python files import and every
# system header the C files include comes from a package of the group that needs it, and make
# test-fresh runs make run and make test on a debootstrap'd Debian 12 root.
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
    build) echo gcc make libc6-dev libstb-dev libpcre2-dev libutf8proc-dev ;;
    fetch) echo curl ca-certificates ;;
    run) echo "$(packages_of build) $(packages_of fetch)" ;;
    test) echo "$(packages_of run) libcriterion-dev git python3-jinja2 $(packages_of train)" \
        "$(packages_of plot)" ;;
    fuzz) echo "$(packages_of run) clang libclang-rt-14-dev python3 python3-numpy" \
        python3-sentencepiece python3-tqdm ;;
    plot) echo python3 python3-matplotlib ;;
    train) echo python3 python3-numpy python3-torch libopenblas0-pthread python3-sentencepiece \
        python3-tqdm ;;
    twins) echo "$(packages_of run) $(packages_of train) $(packages_of plot)" ;;
    bench) echo "$(packages_of run) $(packages_of train) time" ;;
    fresh) echo debootstrap git ;;
    *) return 1 ;;
    esac
}

groups="build, fetch, run, test, fuzz, plot, train, twins, bench, fresh"
(($# > 0)) || { echo "$prog: error: usage: $prog GROUP... (groups: $groups)" >&2; exit 2; }
list=false
if [[ $1 == --list ]]; then
    (($# == 2)) || { echo "$prog: error: usage: $prog --list GROUP" >&2; exit 2; }
    list=true
    shift
fi
wanted=()
for group in "$@"; do
    names=$(packages_of "$group") ||
        { echo "$prog: error: unknown group '$group' (groups: $groups)" >&2; exit 2; }
    for p in $names; do
        [[ " ${wanted[*]-} " == *" $p "* ]] || wanted+=("$p")
    done
done
if $list; then
    echo "${wanted[*]}"
    exit 0
fi

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
