#!/usr/bin/env bash
# The kernel tests on each instruction set simd.h has a path for: AVX-512 with VNNI (vpdpwssd),
# AVX-512 without it, AVX2 + FMA + F16C, and the portable build (plain C). For each, the Criterion
# suites of tests/test_simd.c, test_norm.c and test_reference.c that exercise the kernels (simd.h's
# exp and softmax, fp16 widening, the norms, every fast kernel against its plain twin, the fast
# forward pass against reference.c's) are built by `make build/kernels-ISA` and run here. The
# instruction set the native build (-march=native) compiles for is not built again: make test's
# build/tests ran it, or NATIVE_TESTS names that binary to run here. One this CPU cannot execute is
# skipped by name: Debian 12's QEMU
# (7.2, qemu-user) emulates AVX2 but not AVX-512 (SIGILL), and Intel's SDE is not packaged
# (docs/TESTING.md). The builds go two at a time (the machine's two cores). Ends with the line
# "instruction sets: N passed, M failed, K skipped". Environment: CC, MAKE, NATIVE_CFLAGS (the
# native build's flags, to tell which set it takes), NATIVE_TESTS.
set -uo pipefail
cd "$(dirname "$0")/.."
CC=${CC:-cc}
MAKE=${MAKE:-make}
SUITES='@(kernels|vec_exp|softmax|vec_load_f16|norm|forward)/*'
ISAS="avx512-vnni avx512 avx2 portable"

# The /proc/cpuinfo flags each set needs (the portable build: none).
needs() {
    case $1 in
    avx512-vnni) echo avx2 fma f16c avx512f avx512bw avx512vl avx512_vnni ;;
    avx512) echo avx2 fma f16c avx512f avx512bw avx512vl ;;
    avx2) echo avx2 fma f16c ;;
    esac
}

# The set simd.h picks under the given compiler flags, from the macros they define.
isa_of() {
    local macros
    macros=$($CC $1 -dM -E -x c /dev/null) || return 1
    has() { grep -q "^#define $1 1$" <<<"$macros"; }
    if has __AVX512F__ && has __AVX512BW__ && has __AVX512VL__; then
        if has __AVX512VNNI__; then echo avx512-vnni; else echo avx512; fi
    elif has __AVX2__ && has __FMA__ && has __F16C__; then
        echo avx2
    else
        echo portable
    fi
}

cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
native=$(isa_of "${NATIVE_CFLAGS:--O3 -march=native}")
passed=0 failed=0 skipped=0 builds=() runnable=()
for isa in $ISAS; do
    missing=""
    for f in $(needs "$isa"); do
        [[ $cpu_flags == *" $f "* ]] || missing+=" $f"
    done
    if [[ $isa == "$native" && -z ${NATIVE_TESTS:-} ]]; then
        echo "PASS $isa: the native build's instruction set (build/tests ran these suites above)"
        passed=$((passed + 1))
    elif [[ -n $missing ]]; then
        echo "SKIP $isa: this CPU lacks$missing, and Debian 12 has no emulator that runs" \
            "AVX-512 (qemu-user 7.2 stops at its first instruction)"
        skipped=$((skipped + 1))
    elif [[ $isa == "$native" ]]; then
        runnable+=("$isa")
    else
        builds+=("build/kernels-$isa")
        runnable+=("$isa")
    fi
done

if ((${#builds[@]})); then
    # -j2 forced in a sub-make disables a parent's jobserver, with make's one-line warning
    if ! $MAKE -s -j2 --no-print-directory "${builds[@]}"; then
        echo "FAIL building ${builds[*]}"
        failed=$((failed + ${#builds[@]}))
        runnable=()
    fi
fi
for isa in "${runnable[@]}"; do
    # the filtered suites' Criterion summary, and the exit status that says whether they passed
    binary=build/kernels-$isa
    [[ $isa == "$native" ]] && binary=$NATIVE_TESTS
    if out=$(NORMLLAMA_RUN=./run "$binary" --filter "$SUITES" 2>&1); then
        echo "PASS $isa: $(grep -o 'Tested: .*' <<<"$out")"
        passed=$((passed + 1))
    else
        echo "$out" | tail -40
        echo "FAIL $isa"
        failed=$((failed + 1))
    fi
done
echo "instruction sets: $passed passed, $failed failed, $skipped skipped"
((failed == 0))
