# normllama: make run | make test | make sanitize | make models | make bench-norm
CC ?= gcc
PYTHON ?= /usr/bin/python3
OPT ?= -O3 -march=native
# -std=c11 (not gnu11) keeps gcc from contracting a*b+c into FMA, so sums round as llama2.c's do
CFLAGS = -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -fopenmp -I/usr/include/stb $(OPT)
LDLIBS = -lm
SANITIZE = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

LIB_SRC = model.c norm.c tokenizer.c eval.c profile.c
HEADERS = model.h norm.h tokenizer.h eval.h profile.h
TEST_SRC = $(wildcard tests/test_*.c) tests/helpers.c

BENCH_REPEATS ?= 11
MODEL ?= models/stories260K.bin
PROMPT ?= Once upon a time
MODELS ?= stories260K.bin tok512.bin
TEST_MODELS = stories260K.bin tok512.bin tokenizer.bin

.PHONY: all test sanitize models clean format bench-norm

all: run

run:: run.c $(LIB_SRC) $(HEADERS)
	$(CC) $(CFLAGS) -o $@ run.c $(LIB_SRC) $(LDLIBS)

# Asked for by name, `make run` also fetches the default model and tells a story. A second
# double-colon rule without prerequisites always runs; other targets only need the binary.
ifneq ($(filter run,$(MAKECMDGOALS)),)
run::
	models/fetch.sh $(MODELS)
	./run $(MODEL) "$(PROMPT)"
endif

models:
	models/fetch.sh $(MODELS)

build/tests: $(TEST_SRC) $(LIB_SRC) $(HEADERS) tests/helpers.h
	@mkdir -p build
	$(CC) $(CFLAGS) -I. -o $@ $(TEST_SRC) $(LIB_SRC) -lcriterion $(LDLIBS)

test: run build/tests
	models/fetch.sh $(TEST_MODELS)
	NORMLLAMA_RUN=./run build/tests

run-sanitize: run.c $(LIB_SRC) $(HEADERS)
	$(CC) $(CFLAGS) -O1 -g $(SANITIZE) -o $@ run.c $(LIB_SRC) $(LDLIBS)

build/tests-sanitize: $(TEST_SRC) $(LIB_SRC) $(HEADERS) tests/helpers.h
	@mkdir -p build
	$(CC) $(CFLAGS) -O1 -g $(SANITIZE) -I. -o $@ $(TEST_SRC) $(LIB_SRC) -lcriterion $(LDLIBS)

sanitize: run-sanitize build/tests-sanitize
	models/fetch.sh $(TEST_MODELS)
	NORMLLAMA_RUN=./run-sanitize build/tests-sanitize

build/bench_norm: tools/bench_norm.c norm.c norm.h
	@mkdir -p build
	$(CC) $(CFLAGS) -I. -o $@ tools/bench_norm.c norm.c $(LDLIBS)

# The norm microbenchmark and PyTorch in one table (needs python3-torch); BENCH_REPEATS runs each,
# OMP_NUM_THREADS sets the thread count of both.
bench-norm: build/bench_norm
	$(PYTHON) tools/bench_norm.py build/bench_norm $(BENCH_REPEATS)

format:
	clang-format -i *.c *.h tests/*.c tests/*.h

clean:
	rm -rf run run-sanitize build
