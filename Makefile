# normllama: make run | make test | make test-portable | make sanitize | make bench | make models
#            | make export-deps
CC ?= gcc
PYTHON ?= /usr/bin/python3
OPT ?= -O3 -march=native
# -std=c11 (not gnu11) keeps gcc from contracting a*b+c into FMA, so sums round as llama2.c's do
BASE_CFLAGS = -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -fopenmp -I/usr/include/stb
CFLAGS = $(BASE_CFLAGS) $(OPT)
# the portable build: no -march, so the kernels compile for baseline x86-64 (SSE2) or any CPU
PORTABLE_CFLAGS = $(BASE_CFLAGS) -O2
LDLIBS = -lm
SANITIZE = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

LIB_SRC = model.c norm.c tokenizer.c
HEADERS = model.h norm.h tokenizer.h
TEST_SRC = $(wildcard tests/test_*.c) tests/helpers.c

MODEL ?= models/stories260K.bin
PROMPT ?= Once upon a time
MODELS ?= stories260K.bin tok512.bin
TEST_MODELS = stories260K.bin tok512.bin tokenizer.bin stories260K.pt tok512.model \
              stories260K_ak42_v1.bin stories260K_ak42_v2_q8.bin

EXPORT_DEPS = python3-numpy python3-torch python3-sentencepiece python3-tqdm

.PHONY: all test test-portable sanitize models clean format bench export-deps

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
	NORMLLAMA_RUN=./run $(PYTHON) tests/test_export.py

run-portable: run.c $(LIB_SRC) $(HEADERS)
	$(CC) $(PORTABLE_CFLAGS) -o $@ run.c $(LIB_SRC) $(LDLIBS)

build/tests-portable: $(TEST_SRC) $(LIB_SRC) $(HEADERS) tests/helpers.h
	@mkdir -p build
	$(CC) $(PORTABLE_CFLAGS) -I. -o $@ $(TEST_SRC) $(LIB_SRC) -lcriterion $(LDLIBS)

# The whole suite against the portable build: the SIMD paths of `make test` and the portable
# ones must both pass it.
test-portable: run run-portable build/tests-portable
	models/fetch.sh $(TEST_MODELS)
	NORMLLAMA_RUN=./run-portable build/tests-portable
	NORMLLAMA_RUN=./run-portable NORMLLAMA_RUN_SIMD=./run $(PYTHON) tests/test_export.py

run-sanitize: run.c $(LIB_SRC) $(HEADERS)
	$(CC) $(CFLAGS) -O1 -g $(SANITIZE) -o $@ run.c $(LIB_SRC) $(LDLIBS)

build/tests-sanitize: $(TEST_SRC) $(LIB_SRC) $(HEADERS) tests/helpers.h
	@mkdir -p build
	$(CC) $(CFLAGS) -O1 -g $(SANITIZE) -I. -o $@ $(TEST_SRC) $(LIB_SRC) -lcriterion $(LDLIBS)

sanitize: run-sanitize build/tests-sanitize
	models/fetch.sh $(TEST_MODELS)
	NORMLLAMA_RUN=./run-sanitize build/tests-sanitize
	NORMLLAMA_RUN=./run-sanitize $(PYTHON) tests/test_export.py

# Debian packages export.py and tests/test_export.py need (run as root).
export-deps:
	apt-get install -y $(EXPORT_DEPS)

build/bandwidth: tools/bandwidth.c
	@mkdir -p build
	$(CC) $(CFLAGS) -o $@ $< $(LDLIBS)

# Speed is measured here, never asserted by tests. BENCH_QUICK=1 for a short run.
bench: run build/bandwidth
	models/fetch.sh tokenizer.bin
	PYTHON=$(PYTHON) tools/bench.sh

format:
	clang-format -i *.c *.h tests/*.c tests/*.h

clean:
	rm -rf run run-portable run-sanitize build
