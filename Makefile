# Two commands do everything: `make run` (the main job) and `make test` (the whole suite).
# Both create .venv when it is missing and install what they need once; later calls start at once.
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.multihop-installed
TORCH  := torch==2.13.0
DOCS_VENV := .venv-docs
MODELS := mpnet minilm smollm2

# The real data: MULTIHOP_DATA when set, else ../shared/data when that folder exists.
MULTIHOP_DATA ?= $(if $(wildcard ../shared/data),$(abspath ../shared/data),)
export MULTIHOP_DATA
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: run test test-fast lint setup clean bench-retrieval student bench-distillation train-gpu browser docs

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || python3 -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(TORCH)
	$(BIN)/python -m pip install --quiet -e '.[dev,train,report,ray,docs,mlflow]'
	@echo "building llama-cpp-python from source (several minutes, once per virtualenv; pip caches the wheel)"
	$(BIN)/python -m pip install --progress-bar on -e '.[llamacpp]' || \
		echo "llama-cpp-python did not build: local LMs run on the transformers engine (slower decoding, no served mode)"
	$(BIN)/multihop models install $(MODELS)
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/multihop demo

test: $(STAMP)
	$(BIN)/python -m pytest

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow"

# Retrieval benchmark on the MuSiQue dev questions (CoopRAG §4.2); FINETUNED=DIR adds a fine-tuned encoder.
BENCH_LIMIT ?= 100
bench-retrieval: $(STAMP)
	$(BIN)/python benchmarks/retrieval.py --data $(MULTIHOP_DATA)/musique/dev/musique_qa_100.json \
		--limit $(BENCH_LIMIT) --sample 256 $(if $(FINETUNED),--finetuned $(FINETUNED),)

# The gold-trained student of SingleStepRAG, CoopRAG and ComposeRAG (docs: concepts/students): gold rows from
# the first questions of the train files, then one multi-task LoRA adapter (~45 min on 2 CPU cores; resumes).
STUDENT ?= runs/student
GOLD    := $(BIN)/multihop trajectories --gold
student: $(STAMP)
	$(GOLD) --program CoopRAG --data musique --limit 40 --out $(STUDENT)-rows/cooprag_musique
	$(GOLD) --program CoopRAG --data 2wiki --limit 30 --out $(STUDENT)-rows/cooprag_2wiki
	$(GOLD) --program ComposeRAG --data musique --limit 12 --out $(STUDENT)-rows/composerag_musique
	$(GOLD) --program SingleStepRAG --data hotpotqa --limit 50 --out $(STUDENT)-rows/reader_hotpotqa
	$(GOLD) --program SingleStepRAG --data 2wiki --limit 30 --out $(STUDENT)-rows/reader_2wiki
	export LC_ALL=C; rows=$(STUDENT)-rows; $(BIN)/multihop distill $$rows/cooprag_musique/*.jsonl $$rows/cooprag_2wiki/*.jsonl \
		$$rows/composerag_musique/*.jsonl $$rows/reader_hotpotqa/*.jsonl $$rows/reader_2wiki/*.jsonl --out $(STUDENT)

# The papers' scale on a CUDA GPU (docs: concepts/students): the CoopRAG encoder with the authors' released recipe
# (fp16, learnt temperature, 400 warm-up steps; 6 epochs, their HotpotQA/2Wiki scripts') on the HotpotQA and 2Wiki
# train files, then a LoRA student (bf16, gradient checkpointing, padding-free packing) on gold reader rows, then the
# time an epoch should take. BASE: a local 7-8B instruct folder for the papers' students (default: SmolLM2 from the
# registry); QLORA=1 loads it in 4 bits; UNROLLED=FILE trains the encoder on unrolled queries (`multihop cooprag
# unroll` with a strong LM); MICRO: the encoder's texts a forward pass (memory only).
GPU_OUT ?= runs/gpu
BASE    ?= smollm2
MICRO   ?= 64
train-gpu: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[gpu]'
	$(BIN)/multihop cooprag train hotpotqa 2wiki --recipe released --epochs 6 --micro-batch $(MICRO) \
		--markers CoopRAG --out $(GPU_OUT)/encoder $(if $(UNROLLED),--unrolled $(UNROLLED),)
	$(GOLD) --program SingleStepRAG --data hotpotqa --limit 100 --out $(GPU_OUT)/rows/reader_hotpotqa
	$(GOLD) --program SingleStepRAG --data 2wiki --limit 500 --out $(GPU_OUT)/rows/reader_2wiki
	$(BIN)/multihop distill $(GPU_OUT)/rows/*/*.jsonl --base $(BASE) --out $(GPU_OUT)/student --gradient-checkpointing \
		--packing $(if $(QLORA),--load-in-4bit,)
	$(BIN)/multihop estimate $(GPU_OUT)/encoder $(GPU_OUT)/student --params 8e9 --layers 32 --width 4096

# Base LM vs a student (default: the shipped one), per stage and end to end, on the dev files (~40 min).
BENCH_STUDENT ?= multihop/student_adapters/gold-smollm2
bench-distillation: $(STAMP)
	$(BIN)/python benchmarks/distillation.py --student $(BENCH_STUDENT)

# Headless Chromium for the slow test of `multihop compare`'s report (it skips without one): Debian's package,
# installed system-wide only when asked for (root and apt-get); CI does it in .ci/run.
browser:
	command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
		apt-get update -qq && apt-get install -y -qq chromium; } || \
		echo "Chromium not installed (needs root and apt-get): the report's rendering test will be skipped"

# The documentation site into build/site (program pages, papers and CLI reference written from the code), built in
# a virtualenv of its own holding the package and its `docs` extra alone (no llama.cpp build, no models, no extras);
# `mkdocs serve` serves it while you edit.
docs:
	test -x $(DOCS_VENV)/bin/python || python3 -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install --quiet $(TORCH)
	$(DOCS_VENV)/bin/python -m pip install --quiet '.[docs]'
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) $(DOCS_VENV) .pytest_cache
