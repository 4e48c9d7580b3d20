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
#               passes (every summary inside it green); make fuzz, CI's other command, installs
#               clang and fuzzes for 5 s
#
# The debootstrap'd base (nothing of the project's packages in it: installing them is what is
# tested) is kept as build/fresh/base.tar and made again when the mirror or suite changes; the
# root itself is unpacked anew each run into a tmpfs (about 3 GB of memory once PyTorch is in)
# mounted on a directory of $TMPDIR (/var/tmp): unmounting it removes the root at once (removing
# its files from the disk took 3.5 minutes here), and nothing under the repository holds the
# host's /dev, which is mounted inside, for a make clean or grep -r to reach. Debian's installer,
# not debootstrap, writes /etc/hosts: the root gets the installer's, so that localhost and the
# host name resolve as on an installed machine (without them torchrun's rendezvous in
# tests/test_train.py waits for ever).
# Logs: build/fresh/*.out and *.err.
# Needs root (debootstrap, chroot, mount) and the network (the mirror). Takes 10-20 minutes.
# Environment: FRESH_SUITE (bookworm).
# Prints one line per case, the times, and "fresh root: N passed, M failed"; exit 1 if any failed.
set -euo pipefail

prog=tests/test_fresh_root.sh
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
suite=${FRESH_SUITE:-bookworm}
work=$repo/build/fresh
die() { echo "$prog: error: $*" >&2; exit 1; }

[[ $(id -u) == 0 ]] || die "needs root (debootstrap, chroot and mount): run make test-fresh as root"
# the shared directory itself, where ../shared is a symbolic link (a link would dangle in the root)
shared=$(realpath -e "$(dirname "$repo")/shared") || die "no shared directory beside the repository"
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
            if ((" " types " ") ~ / deb / && (" " suites " ") ~ (" " suite " ") &&
                enabled != "no") {
                split(uris, u, " "); print u[1]; exit
            }
        }' "$f"
    done
}
mirror=$(mirror_of_apt_sources | head -n 1)
[[ -n $mirror ]] ||
    die "no deb line for $suite in /etc/apt/sources.list or /etc/apt/sources.list.d/"

r=$(mktemp -d "${TMPDIR:-/var/tmp}/normllama-fresh-root-XXXXXX")
cleanup() { # the tmpfs and the mounts inside it; never an rm -r of a tree holding the host's /dev
    if mountpoint -q "$r"; then umount -R "$r" || umount -lR "$r"; fi
    rmdir "$r"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mount -t tmpfs -o size=8g,mode=755 normllama-fresh "$r"

seconds() { date +%s; }
start=$(seconds)
mkdir -p "$work"
base_id="$suite minbase gcc,make $mirror"
if [[ -s $work/base.tar && $(cat "$work/base.id" 2>/dev/null) == "$base_id" ]]; then
    echo "base: build/fresh/base.tar ($base_id)"
    tar --numeric-owner -C "$r" -xpf "$work/base.tar"
else
    echo "base: debootstrap --variant=minbase --include=gcc,make $suite from $mirror"
    rm -f "$work/base.tar" "$work/base.id"
    debootstrap --variant=minbase --include=gcc,make "$suite" "$r" "$mirror" \
        >"$work/debootstrap.log" 2>&1 ||
        { tail -n 5 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
    tar --numeric-owner -C "$r" -cf "$work/base.tar.tmp" .
    mv "$work/base.tar.tmp" "$work/base.tar"
    echo "$base_id" >"$work/base.id"
fi
cp /etc/resolv.conf "$r/etc/resolv.conf" # apt-get inside reaches the mirror as this machine does
printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' \
    "$(cat "$r/etc/hostname")" >"$r/etc/hosts"
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

# in_root UID HOME LOG COMMAND...: COMMAND as UID in ~/normllama of the root, with a login's
# environment, nothing of this one's; its stdout in LOG.out, stderr in LOG.err; its exit status
in_root() {
    local id=$1 home=$2 log=$work/$3
    shift 3
    env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME="$home" \
        chroot --userspec="$id:$id" "$r" /bin/sh -c 'cd ~/normllama && exec "$@"' sh "$@" \
        </dev/null >"$log.out" 2>"$log.err"
}
# shellcheck disable=SC2016 # dpkg-query's own ${fields}
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
    sudo_line="tools/deps.sh: error: missing Debian packages; run: sudo apt-get install -y "
    if [[ $(wc -l <<<"$own") != 1 || $own != "$sudo_line"* ]]; then
        fail $name "stderr: $(head -c 600 "$work/user-$target.err")"
    elif [[ $(packages) != "$before" ]]; then
        fail $name "the root's packages changed"
    elif [[ -e $r/home/$user/normllama/run ]]; then
        fail $name "./run was built"
    else
        pass "$name ($own)"
    fi
done

# as root: the README's two commands, then CI's other one (.ci/run's make fuzz, 5 s of it), timed
declare -A took
for command in "make run" "make test" "make fuzz FUZZ_SECONDS=5"; do
    target=${command#make } target=${target%% *}
    name="as_root_make_${target}_passes"
    t0=$(seconds)
    # shellcheck disable=SC2086 # the command's words
    if in_root 0 /root root-$target $command; then status=0; else status=$?; fi
    took[$target]=$(($(seconds) - t0))
    if ((status != 0)); then
        fail "$name" "exit $status after ${took[$target]} s: $(tail -n 5 "$work/root-$target.err")"
        grep -E '^(FAIL|.*: [0-9]+ passed, [0-9]+ failed)' "$work/root-$target.out" | head -n 20 ||
            true
    else
        pass "$name (${took[$target]} s)"
    fi
done
# make run's story, and make test's summaries (each suite's closing line)
grep -E '^Once upon a time' "$work/root-run.out" | head -n 1 | cut -c 1-100 | sed 's/^/story: /' ||
    true
grep -hE '(^|[:;] )[0-9]+ passed, [0-9]+ failed|^\[====\] Synthesis' "$work/root-test.out" \
    "$work/root-test.err" | sed 's/^/test summary: /' || true

echo "times: base ${base_time} s, make run ${took[run]} s, make test ${took[test]} s, make fuzz" \
    "${took[fuzz]} s, total $(($(seconds) - start)) s (HEAD $head)"
echo "fresh root: $passed passed, $failed failed"
((failed == 0))
