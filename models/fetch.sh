#!/usr/bin/env bash
# Fetch model files listed in models/manifest.tsv into models/, verifying sha256;
# with --data, the data sets listed in data/manifest.tsv into data/cache/.
#
# usage: models/fetch.sh [--mirror-only-optional] [NAME...]   (default: stories260K.bin tok512.bin)
#        models/fetch.sh --data NAME...   (e.g. tinystories_train.txt tinystories_valid.txt)
#
# For each NAME: keep models/NAME if its sha256 already matches; otherwise copy
# it from the local mirror ($MODELS_MIRROR/NAME) if present, else download it
# from the URL in the manifest (curl, or wget if curl is missing). Every copy
# goes through a temporary file in models/ that is moved into place only after
# its sha256 matches the manifest.
#
# --mirror-only-optional: a file without a public address (url -) that neither
# models/ nor the mirror has is not an error; one line names every such file
# (make test's suite then skips the checks that read them).
#
# Environment:
#   MODELS_MIRROR     mirror directory; default: <repo>/../shared/models if it exists
#   DATA_MIRROR       mirror of --data; default: <repo>/../shared/data/tinystories
#
# Exit status: 0 ok, 1 fetch or verification failure, 2 usage error / unknown name.
set -euo pipefail

prog=models/fetch.sh
models_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
repo_root=$(dirname "$models_dir")
manifest=$models_dir/manifest.tsv
# --data: the same steps for data sets, kept in data/cache/ (gitignored)
mirror_var=MODELS_MIRROR mirror_default=../shared/models shown_dir=models kind=model
if [[ ${1:-} == --data ]]; then
    shift
    (($# > 0)) || { echo "$prog: error: --data needs the names of the data files" >&2; exit 2; }
    manifest=$repo_root/data/manifest.tsv
    models_dir=$repo_root/data/cache
    mkdir -p "$models_dir"
    mirror_var=DATA_MIRROR mirror_default=../shared/data/tinystories shown_dir=data/cache kind="data file"
    MODELS_MIRROR=${DATA_MIRROR:-}
fi

die() { # die STATUS MESSAGE
    printf '%s: error: %s\n' "$prog" "$2" >&2
    exit "$1"
}

# --- sha256 of a file (sha256sum, or shasum on macOS) ---
if command -v sha256sum >/dev/null 2>&1; then
    sha256_of() { sha256sum -- "$1" | cut -d' ' -f1; }
elif command -v shasum >/dev/null 2>&1; then
    sha256_of() { shasum -a 256 -- "$1" | cut -d' ' -f1; }
else
    die 1 "neither sha256sum nor shasum is installed; cannot verify model files"
fi

# --- read the manifest: name <TAB> url <TAB> sha256 <TAB> description ---
[[ -r $manifest ]] || die 1 "cannot read manifest $manifest"
m_names=() m_urls=() m_sums=()
while IFS=$'\t' read -r name url sum _desc || [[ -n ${name:-} ]]; do
    [[ -z $name || $name == \#* ]] && continue
    [[ -n ${url:-} && -n ${sum:-} ]] || die 1 "malformed manifest line for '$name' in $manifest"
    m_names+=("$name") m_urls+=("$url") m_sums+=("$sum")
done <"$manifest"

lookup() { # lookup NAME -> sets idx, or returns 1
    local i
    for i in "${!m_names[@]}"; do
        if [[ ${m_names[$i]} == "$1" ]]; then idx=$i; return 0; fi
    done
    return 1
}

# --- mirror directory ---
mirror=${MODELS_MIRROR:-}
mirror_shown=$mirror
if [[ -z $mirror && -d $repo_root/$mirror_default ]]; then
    mirror=$repo_root/$mirror_default
    mirror_shown=$mirror_default
fi

# --- arguments: validate every name before fetching anything ---
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
    sed -n '2,19s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
    exit 0
fi
mirror_only_optional=0
if [[ ${1:-} == --mirror-only-optional ]]; then
    mirror_only_optional=1
    shift
fi
(($# > 0)) || set -- stories260K.bin tok512.bin
for name in "$@"; do
    lookup "$name" || die 2 "unknown $kind '$name'; known: ${m_names[*]}"
done

# --- temp file handling: never leave a partial file behind ---
tmp=
cleanup() { if [[ -n $tmp ]]; then rm -f -- "$tmp"; fi; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mirror_state() { # mirror_state SUBJECT: why the mirror did not provide them ("it is", "they are")
    if [[ -z $mirror ]]; then
        echo "there is no mirror ($mirror_var unset, $mirror_default missing)"
    elif [[ ! -d $mirror ]]; then
        echo "mirror $mirror_shown does not exist"
    else
        echo "$1 not in mirror $mirror_shown"
    fi
}

download() { # download URL DEST
    if command -v curl >/dev/null 2>&1; then
        curl -fL --retry 2 --connect-timeout 30 -sS -o "$2" -- "$1"
    elif command -v wget >/dev/null 2>&1; then
        wget -nv --tries=3 --timeout=30 -O "$2" -- "$1"
    else
        echo "neither curl nor wget is installed" >&2
        return 1
    fi
}

not_had=() # mirror-only files passed over under --mirror-only-optional
for name in "$@"; do
    lookup "$name"
    url=${m_urls[$idx]} want=${m_sums[$idx]}
    dest=$models_dir/$name
    shown=$shown_dir/$name

    note= have=
    if [[ -f $dest ]]; then
        have=$(sha256_of "$dest")
        if [[ $have == "$want" ]]; then
            echo "$shown: present, sha256 ok"
            continue
        fi
        note=" (replaced a copy with wrong sha256 $have)"
    fi

    in_mirror=0
    [[ -n $mirror && -f $mirror/$name ]] && in_mirror=1
    if ((!in_mirror && mirror_only_optional)) && [[ $url == - && ! -e $dest ]]; then
        not_had+=("$name")
        continue
    fi
    tmp=$(mktemp "$models_dir/.tmp.$name.XXXXXX")
    if ((in_mirror)); then
        cp -- "$mirror/$name" "$tmp" || die 1 "$shown: copy from $mirror/$name failed"
        how="copied from $mirror_shown"
    elif [[ $url == - ]]; then
        wrong=${have:+; the copy in $shown_dir/ has the wrong sha256 $have}
        die 1 "$shown: has no public URL (mirror only) and $(mirror_state "it is")$wrong; set $mirror_var to a directory holding it"
    else
        if ! err=$(download "$url" "$tmp" 2>&1); then
            rc=$?
            err=${err%$'\n'}
            [[ -n $err ]] || err="exit status $rc"
            die 1 "$shown: $(mirror_state "it is") and download of $url failed: ${err##*$'\n'}"
        fi
        how="downloaded from $url"
    fi

    have=$(sha256_of "$tmp")
    [[ $have == "$want" ]] ||
        die 1 "$shown: sha256 mismatch ($how): expected $want, got $have"
    chmod 0644 "$tmp"
    mv -f -- "$tmp" "$dest"
    tmp=
    echo "$shown: $how, sha256 ok$note"
done
if ((${#not_had[@]} > 0)); then
    echo "$prog: not fetched, so the tests that read them are skipped: ${not_had[*]} (no public address, and $(mirror_state "they are"))" >&2
fi
