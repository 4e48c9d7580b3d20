/* Integer arguments for the benchmark tools (tools/bandwidth.c, flops.c, gemm.c, tile.c, stream.c,
 * attend.c, bench_norm.c, bench_tokenizer.c, bench_llama_tokenize.c): each read whole and checked
 * against the range its tool states where it reads it, since atoi read "1x" as 1 and "abc" as 0 and
 * let a mistyped count run. A bad one stops the tool with one line on stderr naming the argument
 * and its range, exit 1. */
#ifndef BENCH_ARGS_H
#define BENCH_ARGS_H

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* text as a base-10 integer from lo to hi (a sign allowed, nothing before or after it); else
 * prints `tool: name: "text" is not an integer from lo to hi` and exits 1. */
static inline int int_arg(const char *tool, const char *name, const char *text, int lo, int hi) {
    char *end;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (isspace((unsigned char)*text) || end == text || *end != '\0' || errno == ERANGE ||
        value < lo || value > hi) {
        fprintf(stderr, "%s: %s: \"%s\" is not an integer from %d to %d\n", tool, name, text, lo,
                hi);
        exit(1);
    }
    return (int)value;
}

#endif
