#!/usr/bin/env bash
# The README's fresh-machine claim, checked by running it: `make run` in a copy of the repository
# (its tracked files, as a clone has them) where libstb-dev's header is not found. Stub
# dpkg-query, apt-get and id commands come first on PATH: dpkg-query reports libstb-dev missing
# until the apt-get stub has "installed" it, which it does by copying the real stb_ds.h into the
# directory the copy's build is pointed at (STB_INCLUDE); id -u says root or not.
#
#   as root:     make run installs libstb-dev (apt-get install ... libstb-dev), builds and tells a
#                story; a second make run installs nothing
#   as a user:   make run prints the one `sudo apt-get install -y libstb-dev` line, calls no
#                apt-get, builds nothing and exits non-zero
#   negative:    with the install step told the package is there, the build fails on the missing
#                header (so the first case's story needs the install step)
#
# Run by `make test` after it has fetched the models: the copies take stories260K.bin and
# tok512.bin from this repository's models/ (MODELS_MIRROR), so no network is needed.
# Environment: CC (default cc), STB_INCLUDE (where the real stb_ds.h is; /usr/include/stb),
# TMPDIR (where the copies go; /tmp).
# Prints one line per case and "fresh machine: N passed, M failed"; exit 1 if any failed.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
real_stb=${STB_INCLUDE:-/usr/include/stb}/stb_ds.h
cc=${CC:-cc}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/normllama-fresh-XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT

# --- the stubs, which read $FRESH (the case's directory) and $FAKE_UID ---
mkdir "$tmp/bin"
cat >"$tmp/bin/dpkg-query" <<'EOF'
#!/bin/sh
# stub: every package is installed but libstb-dev, until $FRESH/installed exists
for arg; do package=$arg; done
if [ "$package" = libstb-dev ] && [ ! -e "$FRESH/installed" ]; then
    echo "dpkg-query: no packages found matching libstb-dev" >&2
    exit 1
fi
printf 'install ok installed'
EOF
cat >"$tmp/bin/apt-get" <<'EOF'
#!/bin/sh
# stub: records its arguments; install puts stb_ds.h where the build is pointed
echo "$*" >>"$FRESH/apt-get.log"
case " $* " in
*" install "*) mkdir -p "$FRESH/stb" && cp "$REAL_STB" "$FRESH/stb/" && touch "$FRESH/installed" ;;
esac
EOF
cat >"$tmp/bin/id" <<'EOF'
#!/bin/sh
# stub: id -u is $FAKE_UID
if [ "$1" = -u ]; then echo "$FAKE_UID"; else exec /usr/bin/id "$@"; fi
EOF
chmod +x "$tmp/bin/"*

passed=0 failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }

# new_case NAME UID: a fresh copy in $tmp/NAME/repo, its stub state beside it
new_case() {
    export FRESH=$tmp/$1 FAKE_UID=$2 REAL_STB=$real_stb
    mkdir -p "$FRESH/repo"
    git -C "$root" ls-files -z | tar -C "$root" --null -T - -cf - | tar -C "$FRESH/repo" -xf -
}

# make_run: make run in the case's copy, stdout and stderr in $FRESH/out and $FRESH/err; the
# outer make's flags are not passed on, so that the copy's make is the one a user types. It
# builds at -O0: the optimization level is not what this checks, and -O3 takes 9 s of the
# 2-core machine where -O0 takes 2.
make_run() {
    (cd "$FRESH/repo" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL PATH="$tmp/bin:$PATH" \
        make run CC="$cc" OPT=-O0 STB_INCLUDE="$FRESH/stb" MODELS_MIRROR="$root/models" \
        >"$FRESH/out" 2>"$FRESH/err")
}

# the lines of $FRESH/err that are not make's own "make: *** ..." lines
own_err() { grep -v '^make: \*\*\* ' "$FRESH/err"; }

case_installs_as_root() {
    local name=installs_as_root_then_builds_and_tells_a_story
    new_case root 0
    make_run || { fail $name "exit $?: $(tail -n 3 "$FRESH/err")"; return; }
    [[ $(cat "$FRESH/apt-get.log") == $'update -qq\ninstall -y -qq --no-install-recommends libstb-dev' ]] ||
        { fail $name "apt-get was called as: $(cat "$FRESH/apt-get.log")"; return; }
    grep -qx 'tools/deps.sh: installing libstb-dev' "$FRESH/out" ||
        { fail $name "no 'installing libstb-dev' line"; return; }
    [[ -x $FRESH/repo/run ]] || { fail $name "no ./run built"; return; }
    # the story: the prompt and more words after it, then the summary on stderr
    grep -Eq '^Once upon a time[ ,.]+[[:alpha:]]+ [[:alpha:]]+' "$FRESH/out" ||
        { fail $name "no story in: $(tail -n 2 "$FRESH/out")"; return; }
    grep -q '^prompt tokens 5, generated tokens' "$FRESH/err" ||
        { fail $name "no summary in: $(tail -n 2 "$FRESH/err")"; return; }
    pass $name

    name=second_make_run_installs_nothing
    make_run || { fail $name "exit $?: $(tail -n 3 "$FRESH/err")"; return; }
    [[ $(wc -l <"$FRESH/apt-get.log") == 2 ]] || { fail $name "apt-get called again"; return; }
    ! grep -q 'tools/deps.sh' "$FRESH/out" "$FRESH/err" ||
        { fail $name "deps.sh spoke: $(grep -h 'tools/deps.sh' "$FRESH/out" "$FRESH/err")"; return; }
    pass $name
}

case_sudo_line_as_user() {
    local name=as_user_prints_the_one_sudo_line_and_stops
    new_case user 1000
    if make_run; then fail $name "exit 0"; return; fi
    [[ $(own_err) == 'tools/deps.sh: error: missing Debian packages; run: sudo apt-get install -y libstb-dev' ]] ||
        { fail $name "stderr: $(cat "$FRESH/err")"; return; }
    [[ ! -s $FRESH/out ]] || { fail $name "stdout: $(cat "$FRESH/out")"; return; }
    [[ ! -e $FRESH/apt-get.log ]] || { fail $name "apt-get was called"; return; }
    [[ ! -e $FRESH/repo/run ]] || { fail $name "./run was built"; return; }
    compgen -G "$FRESH/repo/models/*.bin" >/dev/null && { fail $name "models were fetched"; return; }
    pass $name
}

case_build_fails_without_the_header() {
    local name=without_the_install_step_the_build_fails_on_the_header
    new_case negative 0
    touch "$FRESH/installed" # dpkg-query now says libstb-dev is there; stb_ds.h is not
    if make_run; then fail $name "exit 0: the header was found elsewhere"; return; fi
    grep -q 'stb_ds\.h' "$FRESH/err" || { fail $name "stderr: $(tail -n 3 "$FRESH/err")"; return; }
    [[ ! -e $FRESH/apt-get.log && ! -e $FRESH/repo/run ]] ||
        { fail $name "apt-get called or ./run built"; return; }
    pass $name
}

case_installs_as_root
case_sudo_line_as_user
case_build_fails_without_the_header
echo "fresh machine: $passed passed, $failed failed"
((failed == 0))
