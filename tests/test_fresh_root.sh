#!/usr/bin/env bash
# make test-fresh: the README's two commands on a genuinely fresh Debian 12 machine, a root made
# here by debootstrap (minbase, plus gcc and make: "a fresh machine has only gcc and make") from
# the mirror this machine's apt sources name. Into it go a clone of HEAD (committed work only)
# and a copy of ../shared beside it, so that the clone's ../shared resolves as here; then, in a
# chroot with /proc, /sys and /dev mounted:
#
#   as a user:  make run and make test each print the one `sudo apt-get install -y ...` line on
#               stderr and exit non-zero, installing nothing and building nothing (the root is
#               still the pristine one: this runs first)
#   as root:    make run installs its packages and tells a story; make test installs the rest and
#               passes (every summary inside it green)
#
# The debootstrap'd base (nothing of the project's packages in it: installing them is what is
# tested) is kept as build/fresh/base.tar and made again when the mirror or suite changes; the
# root itself is unpacked anew each run and removed at the end. Logs: build/fresh/*.log.
# Needs root (debootstrap, chroot, mount) and the network (the mirror). Takes 10-20 minutes.
# Environment: FRESH_SUITE (bookworm).
# Prints one line per case, the times, and "fresh root: N passed, M failed"; exit 1 if any failed.
set -euo pipefail

prog=tests/test_fresh_root.sh
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
suite=${FRESH_SUITE:-bookworm}
work=$repo/build/fresh
r=$work/root
die() { echo "$prog: error: $*" >&2; exit 1; }

[[ $(id -u) == 0 ]] || die "needs root (debootstrap, chroot and mount): run make test-fresh as root"
shared=$(dirname "$repo")/shared
[[ -d $shared/models ]] || die "no $shared/models beside the repository to copy into the root"

# mirror: the first deb source of $suite that apt reads here, one-line or deb822 format
mirror_of_apt_sources() {
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [[ -r $f ]] || continue
        awk -v suite="$suite" '$1 == "deb" {
            i = 2
            if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ } # [options]
            if ($(i + 1) == suite) { print $i; exit }
        }' "$f"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [[ -r $f ]] || continue
        awk -v suite="$suite" 'BEGIN { RS = "" } { # one stanza a record
            types = uris = suites = enabled = ""
            n = split($0, lines, "\n")
            for (j = 1; j <= n; j++) {
                if (lines[j] ~ /^#/) continue
                key = tolower(lines[j]); sub(/:.*/, "", key)
                value = lines[j]; sub(/^[^:]*:[ \t]*/, "", value)
                if (key == "types") types = value; else if (key == "uris") uris = value
                else if (key == "suites") suites = value; else if (key == "enabled") enabled = value
            }
            if ((" " types " ") ~ / deb / && (" " suites " ") ~ (" " suite " ") && enabled != "no") {
                split(uris, u, " "); print u[1]; exit
            }
        }' "$f"
    done
}
mirror=$(mirror_of_apt_sources | head -n 1)
[[ -n $mirror ]] || die "no deb line for $suite in /etc/apt/sources.list or /etc/apt/sources.list.d/"

mounted_under() { grep -q " $1/" /proc/mounts; }
cleanup() {
    local m
    for m in dev sys proc; do
        mountpoint -q "$r/$m" 2>/dev/null && { umount -R "$r/$m" || umount -lR "$r/$m"; }
    done
    # never remove a root with something still mounted inside it (/dev is the host's)
    if [[ -d $r ]] && ! mounted_under "$r"; then rm -rf --one-file-system -- "$r"; fi
}
trap cleanup EXIT
cleanup # a run stopped before its trap left its root behind

seconds() { date +%s; }
start=$(seconds)
mkdir -p "$work"
base_id="$suite minbase gcc,make $mirror"
if [[ -s $work/base.tar && $(cat "$work/base.id" 2>/dev/null) == "$base_id" ]]; then
    echo "base: build/fresh/base.tar ($base_id)"
else
    echo "base: debootstrap --variant=minbase --include=gcc,make $suite from $mirror"
    rm -rf --one-file-system -- "$work/base" "$work/base.tar" "$work/base.id"
    debootstrap --variant=minbase --include=gcc,make "$suite" "$work/base" "$mirror" \
        >"$work/debootstrap.log" 2>&1 ||
        { tail -n 5 "$work/debootstrap.log" >&2; die "debootstrap failed (build/fresh/debootstrap.log)"; }
    tar --numeric-owner -C "$work/base" -cf "$work/base.tar.tmp" . && mv "$work/base.tar.tmp" "$work/base.tar"
    rm -rf --one-file-system -- "$work/base"
    echo "$base_id" >"$work/base.id"
fi
mkdir "$r"
tar --numeric-owner -C "$r" -xpf "$work/base.tar"
cp /etc/resolv.conf "$r/etc/resolv.conf" # apt-get inside reaches the mirror as this machine does
mount -t proc proc "$r/proc"
mount -t sysfs sysfs "$r/sys"
mount --rbind /dev "$r/dev"
mount --make-rslave "$r/dev"
base_time=$(($(seconds) - start))

user=newcomer uid=1500
chroot "$r" useradd --create-home --uid $uid --shell /bin/bash $user
head=$(git -C "$repo" rev-parse --short HEAD)
[[ -z $(git -C "$repo" status --porcelain --untracked-files=no) ]] ||
    echo "note: uncommitted changes are not tested (the root gets a clone of HEAD, $head)"
for home in /root /home/$user; do
    git clone -q "$repo" "$r$home/normllama"
    cp -a "$shared" "$r$home/shared"
done
chown -R $uid:$uid "$r/home/$user"

# as UID in ~/normllama of the root: a login's environment, nothing of this one's
in_root() { # in_root UID HOME LOG COMMAND...: exit status of COMMAND; stdout LOG.out, stderr LOG.err
    local id=$1 home=$2 log=$work/$3
    shift 3
    env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME="$home" \
        chroot --userspec=$id:$id "$r" /bin/sh -c 'cd ~/normllama && exec "$@"' sh "$@" \
        </dev/null >"$log.out" 2>"$log.err"
}
packages() { chroot "$r" dpkg-query -W -f='${Package} ${Status}\n'; }

passed=0 failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }

# as the user: one install line, a non-zero exit, nothing installed or built
before=$(packages)
for target in run test; do
    name="as_user_make_${target}_prints_the_one_sudo_line_and_stops"
    if in_root $uid /home/$user user-$target make $target; then fail $name "exit 0"; continue; fi
    own=$(grep -v '^make: \*\*\* ' "$work/user-$target.err" || true)
    if [[ $(wc -l <<<"$own") != 1 || $own != "tools/deps.sh: error: missing Debian packages; run: sudo apt-get install -y "* ]]; then
        fail $name "stderr: $(head -c 600 "$work/user-$target.err")"
    elif [[ $(packages) != "$before" ]]; then
        fail $name "the root's packages changed"
    elif [[ -e $r/home/$user/normllama/run ]]; then
        fail $name "./run was built"
    else
        pass "$name ($own)"
    fi
done

# as root: the README's two commands, each timed
declare -A took
for target in run test; do
    name="as_root_make_${target}_passes"
    t0=$(seconds)
    if in_root 0 /root root-$target make $target; then status=0; else status=$?; fi
    took[$target]=$(($(seconds) - t0))
    if ((status != 0)); then
        fail $name "exit $status after ${took[$target]} s: $(tail -n 5 "$work/root-$target.err")"
        grep -E '^(FAIL|.*: [0-9]+ passed, [0-9]+ failed)' "$work/root-$target.out" | head -n 20
    else
        pass "$name (${took[$target]} s)"
    fi
done
# make run's story, and make test's summaries (each suite's closing line)
grep -E '^Once upon a time' "$work/root-run.out" | head -n 1 | cut -c 1-100 | sed 's/^/story: /' || true
grep -hE '(^|: )[0-9]+ passed, [0-9]+ failed|^\[====\] Synthesis' "$work/root-test.out" "$work/root-test.err" |
    sed 's/^/test summary: /' || true

echo "times: base ${base_time} s, make run ${took[run]} s, make test ${took[test]} s, total $(($(seconds) - start)) s (HEAD $head)"
echo "fresh root: $passed passed, $failed failed"
((failed == 0))
