# quadnn: `make paper` builds the companion report, `make test` runs pytest and nbval.
# Every target sets up what it needs: the venv (.venv), the packages, and TeX (Debian packages,
# installed when missing and we are allowed to: root, or passwordless sudo).

PYTHON   ?= python3
PROFILE  ?= cpu
VENV     := .venv
BIN      := $(VENV)/bin
INSTALLED := $(VENV)/.installed
TORCH    := torch==2.14.1 torchvision==0.29.1
TEX_PACKAGES := texlive-latex-base texlive-latex-recommended texlive-latex-extra texlive-publishers \
                texlive-science texlive-fonts-recommended latexmk poppler-utils

# Where training runs execute: inline (this process), local (a queue over this machine's GPUs or
# CPUs), slurm (submitit; SLURM_PARTITION, SLURM_ACCOUNT, SLURM_TIME (minutes), SLURM_CONSTRAINT,
# SLURM_SBATCH="--opt=value ..."). GPUS=n gives every run n GPUs (0: CPU jobs) instead of what its
# protocol asks (ImageNet 8, others 1). WAIT=1 waits for submitted SLURM jobs, then collects;
# without it a notebook submits what is missing and shows it as pending. TINY=1 (full only) runs
# the full protocols on tiny generated data in the real on-disk formats. The cpu profile's default
# is local (one worker process per CPU, each running its runs one after another: 12 ResNet20 runs
# in 59 s against 107 s inline on 2 cores); smoke and full default to inline.
RUNNER   ?= $(if $(filter cpu,$(PROFILE)),local,inline)
TINY     ?=
WAIT     ?=
PROFILES := smoke cpu full
RUNNERS  := inline local slurm
ifneq ($(words $(PROFILE)) $(filter $(PROFILE),$(PROFILES)),1 $(strip $(PROFILE)))
$(error PROFILE='$(PROFILE)' is not one of: $(PROFILES) (one word))
endif
ifneq ($(words $(RUNNER)) $(filter $(RUNNER),$(RUNNERS)),1 $(strip $(RUNNER)))
$(error RUNNER='$(RUNNER)' is not one of: $(RUNNERS) (one word))
endif
# TINY and WAIT are booleans, read strictly by one reader (as quadnn_paper.common.words.boolean reads
# the environment): 1/true/yes on, 0/false/no or empty off, anything else an error naming the value
# (a bare non-empty test would take TINY=0 or WAIT=no for on). $(call boolean,NAME): on's word or empty.
TRUE_WORDS  := 1 true yes True Yes TRUE YES
FALSE_WORDS := 0 false no False No FALSE NO
boolean = $(strip \
  $(if $(filter-out 0 1,$(words $($1))),$(error $1='$($1)' is not one boolean: use 1/true/yes, 0/false/no, or leave it empty)) \
  $(if $(filter-out $(TRUE_WORDS) $(FALSE_WORDS),$($1)),$(error $1=$($1) is not a boolean: use 1/true/yes, 0/false/no, or leave it empty)) \
  $(filter $(TRUE_WORDS),$($1)))
TINY_ON  := $(call boolean,TINY)
WAIT_ON  := $(call boolean,WAIT)
ifneq ($(TINY_ON),)
ifneq ($(PROFILE),full)
$(error TINY=$(TINY) caps the full profile; use it with PROFILE=full, not PROFILE=$(PROFILE))
endif
endif
RUN_TAG  := $(PROFILE)$(if $(TINY_ON),-tiny)
export QUADNN_WAIT := $(if $(WAIT_ON),1,$(if $(strip $(WAIT)),0))
export QUADNN_SLURM_PARTITION ?= $(SLURM_PARTITION)
export QUADNN_SLURM_ACCOUNT ?= $(SLURM_ACCOUNT)
export QUADNN_SLURM_TIME ?= $(SLURM_TIME)
export QUADNN_SLURM_CONSTRAINT ?= $(SLURM_CONSTRAINT)
export QUADNN_SLURM_SBATCH ?= $(SLURM_SBATCH)
export QUADNN_GPUS_PER_RUN ?= $(GPUS)

NOTEBOOKS := $(wildcard notebooks/*.ipynb)
EXECUTED  := $(patsubst notebooks/%.ipynb,build/$(RUN_TAG)/%.ipynb,$(NOTEBOOKS))
# SECTIONS=runge,efficiency (commas or spaces): run only those notebooks, again, then the PDF; the
# other sections keep their outputs, and the check before LaTeX still refuses a paper/ whose
# sections are not all of PROFILE.
comma := ,
SECTION_LIST := $(strip $(subst $(comma), ,$(SECTIONS)))
NOTEBOOK_NAMES := $(patsubst notebooks/%.ipynb,%,$(NOTEBOOKS))
ifneq ($(filter-out $(NOTEBOOK_NAMES),$(SECTION_LIST)),)
$(error SECTIONS='$(SECTIONS)': $(filter-out $(NOTEBOOK_NAMES),$(SECTION_LIST)) is not a section; choose from: $(NOTEBOOK_NAMES))
endif
WANTED    := $(if $(SECTION_LIST),$(patsubst %,build/$(RUN_TAG)/%.ipynb,$(SECTION_LIST)),$(EXECUTED))
SOURCES   := $(shell find core -name '*.py' -not -path '*/__pycache__/*')
PAPER_SRC := paper/main.tex $(wildcard paper/sections/*.tex)

# Two `make paper` in one checkout at once would share build/ and paper/: the second waits for the
# first (flock on build/.paper.lock), then finds what the first built. Everything below runs locked.
PAPER_GOALS := $(filter paper paper/main.pdf,$(MAKECMDGOALS))
# make -n (--just-print, --dry-run, --recon) changes nothing: no lock, no prune while it reads this file
DRY_RUN := $(findstring n,$(patsubst -%,%,$(filter-out --% %=%,$(firstword $(MAKEFLAGS)))))
ifneq ($(and $(PAPER_GOALS),$(if $(QUADNN_PAPER_LOCKED)$(DRY_RUN),,1)),)
.PHONY: $(MAKECMDGOALS)
$(firstword $(MAKECMDGOALS)):
	@mkdir -p build; export QUADNN_PAPER_LOCKED=1; if ! command -v flock >/dev/null; then $(MAKE) $(MAKECMDGOALS); \
	elif ! flock -n build/.paper.lock true; then echo "another 'make paper' runs in this checkout: waiting for it"; \
	  flock build/.paper.lock $(MAKE) $(MAKECMDGOALS); else flock build/.paper.lock $(MAKE) $(MAKECMDGOALS); fi
$(wordlist 2,$(words $(MAKECMDGOALS)),$(MAKECMDGOALS)): $(firstword $(MAKECMDGOALS)) ; @:
else
# paper/ holds the outputs of one profile at a time, stamped per section: each notebook stages its
# outputs and moves them into paper/ together at its end (quadnn_paper.report.Report.commit), with
# paper/.stamps/<section>.json naming the profile, the notebook and a hash of every file. Before
# anything runs, the executed copy of every notebook whose outputs in paper/ are not a finished run
# of this profile is forgotten, so make runs that notebook again (results are cached by
# configuration under build/cache, so this is cheap); tools/paper_check.py check refuses to run
# LaTeX over a paper/ that still mixes profiles.
ifneq ($(and $(filter paper paper/main.pdf,$(MAKECMDGOALS)),$(if $(DRY_RUN),,1)),)
ifneq ($(wildcard $(BIN)/python),)
$(shell $(BIN)/python tools/paper_check.py prune --profile $(PROFILE) --build build/$(RUN_TAG) 1>&2)
endif
ifneq ($(SECTION_LIST),)
$(shell rm -f $(WANTED))
endif
endif

.PHONY: help setup data why test test-fast test-e2e test-faults test-fullsize lint paper tex clean status slurm-up slurm-down gpu-check
help:
	@echo "make paper [PROFILE=smoke|cpu|full]  run the notebooks and build paper/main.pdf (default PROFILE=cpu)"
	@echo "           [RUNNER=inline|local|slurm] [WAIT=1] [TINY=1]   where runs execute (cpu: local, else inline)"
	@echo "           [SECTIONS=runge,efficiency]  only those sections' notebooks, again, then the PDF"
	@echo "make why NAME=runge_rmse             where a table, figure or macro comes from (no NAME: list them)"
	@echo "make status [PROFILE=full] [TINY=1]  runs per section: done/running/pending/failed, GPU-hours left"
	@echo "make test-fast                       library and engine unit tests (no SLURM, notebooks or PDF; ~3 min)"
	@echo "make test                            everything: lint, layer contract, pytest + nbval (smoke), SLURM, the smoke PDF"
	@echo "make test-e2e                        make paper PROFILE=full TINY=1 RUNNER=slurm WAIT=1 in a fresh clone, empty cache"
	@echo "make test-faults                     kill a small training at every write/fsync/rename of the store (part of test-e2e)"
	@echo "make test-fullsize                   one engine epoch over a full-size CIFAR-10 on the CPU (part of test-e2e)"
	@echo "make gpu-check [PYTHON=python3]      on one GPU node: a few minutes of checks, build/gpu-check/report.md"
	@echo "make setup                           create .venv and install quadnn with its extras"
	@echo "make data                            fetch Fashion-MNIST (the cpu profile's CIFAR stand-in) into build/data/"
	@echo "make clean                           remove build products (keeps .venv and data/)"

setup: $(INSTALLED)

$(INSTALLED): pyproject.toml core/pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(TORCH)
	$(BIN)/python -m pip install -q -e ./core -e '.[paper,test]' $(TORCH)
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	@touch $@

# TeX: install when missing and permitted; otherwise say what to install. QUADNN_TEX=skip opts out.
build/.tex-ok:
	@mkdir -p build
	@if command -v latexmk >/dev/null && kpsewhich IEEEtran.cls >/dev/null 2>&1; then :; \
	elif [ "$(QUADNN_TEX)" = skip ]; then echo "TeX missing; QUADNN_TEX=skip set, not installing"; exit 1; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "Installing TeX from Debian packages (about a minute)..."; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(TEX_PACKAGES) >/dev/null; \
	elif sudo -n true 2>/dev/null && command -v apt-get >/dev/null; then \
	  sudo -n apt-get update -qq && sudo -n DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(TEX_PACKAGES) >/dev/null; \
	else echo "TeX is missing and I may not install it. Please run:"; \
	  echo "  sudo apt-get install --no-install-recommends $(TEX_PACKAGES)"; exit 1; fi
	@touch $@

tex: build/.tex-ok

# Fashion-MNIST, the cpu profile's CIFAR stand-in (quadnn_paper.data.fashion_mnist): the installed
# copy of Debian's dataset-fashion-mnist where it is there, else that package downloaded and
# unpacked under build/data/ (no root needed), else the command to run. The loader checks every
# file's SHA-256, so what is fetched here is verified at its first read.
FASHION_DIR := build/data/fashion-mnist
FASHION_FILES := train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz
build/.fashion-mnist-ok:
	@mkdir -p build
	@if [ -d /usr/share/datasets/fashion-mnist ] && \
	  ( cd /usr/share/datasets/fashion-mnist && ls $(FASHION_FILES) >/dev/null 2>&1 ); then \
	  echo "Fashion-MNIST: the installed copy (/usr/share/datasets/fashion-mnist)"; \
	elif ( cd $(FASHION_DIR) 2>/dev/null && ls $(FASHION_FILES) >/dev/null 2>&1 ); then :; \
	elif command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null; then \
	  echo "Fetching Fashion-MNIST (Debian's dataset-fashion-mnist, 31 MB) into $(FASHION_DIR)/"; \
	  tmp=$$(mktemp -d build/.fashion-mnist.XXXXXX) && \
	  ( cd $$tmp && apt-get download -q dataset-fashion-mnist >/dev/null 2>&1 ) && \
	  dpkg-deb -x $$tmp/dataset-fashion-mnist_*.deb $$tmp/x && mkdir -p $(FASHION_DIR) && \
	  for f in $(FASHION_FILES); do cp $$tmp/x/usr/share/datasets/fashion-mnist/$$f $(FASHION_DIR)/$$f.part && \
	    mv $(FASHION_DIR)/$$f.part $(FASHION_DIR)/$$f || exit 1; done; rc=$$?; rm -rf $$tmp; \
	  if [ $$rc != 0 ]; then echo "Could not fetch Fashion-MNIST. Please run: apt-get download dataset-fashion-mnist && dpkg-deb -x dataset-fashion-mnist_*.deb x && mkdir -p $(FASHION_DIR) && cp x/usr/share/datasets/fashion-mnist/*.gz $(FASHION_DIR)/"; exit 1; fi; \
	else echo "Fashion-MNIST is missing and apt-get is not here. Please put $(FASHION_FILES) (from https://github.com/zalandoresearch/fashion-mnist) into $(FASHION_DIR)/"; exit 1; fi
	@touch $@

data: build/.fashion-mnist-ok

# One executed copy per notebook and profile; the notebook writes figures, tables and
# variables into paper/.
# A notebook whose runs are not all finished (submitted to SLURM, WAIT unset) keeps no executed
# copy, so the next `make paper` runs it again and collects what has finished meanwhile.
# torch.compile's kernels are kept under build/ too, so `make clean` starts as cold as a new machine.
build/$(RUN_TAG)/%.ipynb: notebooks/%.ipynb $(SOURCES) $(INSTALLED) $(if $(filter cpu,$(PROFILE)),build/.fashion-mnist-ok)
	@mkdir -p $(@D)
	@rm -f $(basename $@).pending
	QUADNN_NOTEBOOK=$* QUADNN_PENDING="$(CURDIR)/$(basename $@).pending" QUADNN_PROGRESS=launch \
	  TORCHINDUCTOR_CACHE_DIR="$${TORCHINDUCTOR_CACHE_DIR:-$(CURDIR)/build/inductor}" \
	  $(BIN)/papermill --cwd notebooks --progress-bar $< $(basename $@).part.ipynb \
	  -p profile $(PROFILE) -p paper_dir "$(CURDIR)/paper" -p cache_dir "$(CURDIR)/build/cache" \
	  -p runner $(RUNNER) $(if $(TINY_ON),-p tiny True)
	@if [ -s $(basename $@).pending ]; then \
	  echo "$*: $$(cat $(basename $@).pending); run the same 'make paper' again to collect them"; \
	else mv $(basename $@).part.ipynb $@; fi

# First contact with a GPU node: build/gpu-check/report.{json,md} (quadnn_paper.execution.gpu_check).
# PYTHON=... given (command line or environment): that interpreter and its own torch, with
# PYTHONPATH=core and nothing installed (no venv); otherwise the venv. GPU_CHECK_ARGS passes options.
ifeq ($(origin PYTHON),file)
GPU_CHECK_PYTHON := $(BIN)/python
GPU_CHECK_DEPS   := $(INSTALLED)
else
GPU_CHECK_PYTHON := $(PYTHON)
GPU_CHECK_DEPS   :=
endif
gpu-check: $(GPU_CHECK_DEPS)
	PYTHONPATH="$(CURDIR)/core$${PYTHONPATH:+:$$PYTHONPATH}" $(GPU_CHECK_PYTHON) -m quadnn_paper.execution.gpu_check \
	  --out build/gpu-check $(GPU_CHECK_ARGS)

# Where a table, figure or macro of the built paper comes from (what the build recorded).
why: $(INSTALLED)
	@$(BIN)/python -m quadnn_paper.why $(if $(NAME),'$(NAME)',--list)

# The plan: runs per section and their states, with the GPU-hours still to spend.
status: $(INSTALLED)
	@$(BIN)/python -m quadnn_paper.execution.status --profile $(PROFILE) $(if $(TINY_ON),--tiny) --cache build/cache/runs \
	  --runner $(if $(filter inline,$(RUNNER)),slurm,$(RUNNER))

# A single-node SLURM on this machine (root, Debian): what the tests and RUNNER=slurm use here.
slurm-up:
	@bash tools/slurm/up.sh
slurm-down:
	@bash tools/slurm/down.sh

# The paper's own numbers (quadnn_paper/common/published.py) as LaTeX macros.
paper/variables/published.tex: core/quadnn_paper/common/published.py $(INSTALLED)
	$(BIN)/python -m quadnn_paper.common.published $@

paper/main.pdf: $(PAPER_SRC) $(WANTED) $(wildcard paper/.stamps/*.json) paper/variables/published.tex build/.tex-ok
	$(BIN)/python tools/paper_check.py check --profile $(PROFILE)
	@# every claim of the paper answered (a verdict, or the reason there is none), else no PDF
	$(BIN)/python -m quadnn_paper.common.ledger --paper paper
	@# every number in the prose a macro from data (or an allowed form), else no PDF
	$(BIN)/python tools/paper_check.py numbers
	@# the build's identity (commit, profile, date) for the PDF's metadata
	$(BIN)/python -m quadnn_paper.execution.identity paper/variables/build.tex --profile $(PROFILE) $(if $(TINY_ON),--tiny) --build build/$(RUN_TAG)
	cd paper && latexmk -g -pdf -interaction=nonstopmode -halt-on-error -quiet main.tex
	@# A PDF with a box off the page or unreadable figure fonts is set aside, not delivered.
	$(BIN)/python tools/paper_check.py layout --build build/$(RUN_TAG) || { mv -f paper/main.pdf paper/main.layout-failed.pdf; exit 1; }
	@echo "paper/main.pdf built from the $(PROFILE)$(if $(TINY_ON), (TINY=1)) profile"

paper: paper/main.pdf

# Three tiers. test-fast: the library and engine unit tests. test: everything of the smoke tier
# (lint and format, the layer contract, unit tests, SLURM, nbval over every notebook at its smoke
# defaults, the smoke PDF build; skipped with a message when TeX cannot be had). test-e2e: the whole
# full profile at TINY=1 through the real SLURM, from an empty cache in a fresh clone of HEAD.
PYTEST := $(BIN)/python -m pytest -p no:cacheprovider
# make test's pytest-xdist workers (tests/conftest.py keeps the SLURM tests on one, the notebooks
# and the PDF on one): the SLURM tests mostly wait on the daemons while the other core computes.
TEST_WORKERS ?= 2
lint: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test-fast: $(INSTALLED)
	$(PYTEST) tests -m "not slow and not slurm and not notebook and not pdf and not e2e" -q

test: $(INSTALLED) lint
	@$(MAKE) --no-print-directory build/.tex-ok || echo "(TeX unavailable: the PDF test will be skipped)"
	@$(MAKE) --no-print-directory build/.fashion-mnist-ok || echo "(Fashion-MNIST unavailable: its real-file tests will be skipped)"
	@# nbval first: the smoke PDF test then builds from the outputs nbval wrote in this session.
	QUADNN_PDF_FROM_NBVAL=1 $(PYTEST) -n $(TEST_WORKERS) $(wildcard notebooks/*.ipynb) tests --nbval-lax -m "not e2e and not faults and not fullsize"

# One engine epoch over a CIFAR-10 of the real size on the CPU (minutes).
test-fullsize: $(INSTALLED)
	$(PYTEST) tests/test_fullsize.py -m fullsize -q -s

# The fault-injection tier at every store operation (make test samples a few of them).
test-faults: $(INSTALLED)
	$(PYTEST) tests/test_truth.py -m faults -q

E2E_DIR := build/e2e
# The disk the tier's build/ may take at its peak, in GiB: sampled every 10 s into
# build/disk-mib.log of the clone, which tests/test_e2e.py holds to this.
E2E_GIB := 8
test-e2e: $(INSTALLED)
	@$(MAKE) --no-print-directory build/.tex-ok
	rm -rf "$(E2E_DIR)"
	@free=$$(df -Pk . | awk 'NR == 2 { print int($$4 / 1048576) }'); \
	if [ "$$free" -lt $(E2E_GIB) ]; then \
	  echo "test-e2e: WARNING: it may write $(E2E_GIB) GiB under $(E2E_DIR) and only $$free GiB is free here: it may fail with 'no space left'" >&2; \
	else echo "test-e2e: $$free GiB free; the tier may take $(E2E_GIB)"; fi
	git clone -q --no-hardlinks "$(CURDIR)" "$(E2E_DIR)"
	ln -s "$(CURDIR)/$(VENV)" "$(E2E_DIR)/$(VENV)" && touch "$(E2E_DIR)/$(INSTALLED)"
	bash tools/slurm/up.sh
	@# First pass: every notebook submits what it misses and returns (the PDF builds with "pending"
	@# cells), so SLURM has the whole profile queued at once; second pass: WAIT=1 collects everything.
	cd "$(E2E_DIR)" && export PYTHONPATH="$(CURDIR)/$(E2E_DIR)/core" QUADNN_GENERATED="$(CURDIR)/$(E2E_DIR)/build/data" && \
	  mkdir -p build && { while sleep 10; do du -sm build | cut -f1; done >build/disk-mib.log 2>/dev/null & } && \
	  trap "kill $$! 2>/dev/null" EXIT && \
	  start=$$(date +%s) && \
	  $(MAKE) --no-print-directory paper PROFILE=full TINY=1 RUNNER=slurm && \
	  $(MAKE) --no-print-directory paper PROFILE=full TINY=1 RUNNER=slurm WAIT=1 && \
	  echo "test-e2e: the full profile at TINY=1 through SLURM in $$(( $$(date +%s) - start )) s"
	@echo "test-e2e: build/ took $$(sort -n "$(E2E_DIR)/build/disk-mib.log" | tail -1) MiB at its peak, $$(du -sm "$(E2E_DIR)/build" | cut -f1) MiB at the end"
	QUADNN_E2E_DIR="$(CURDIR)/$(E2E_DIR)" QUADNN_E2E_GIB=$(E2E_GIB) $(PYTEST) tests/test_e2e.py -q
	@$(MAKE) --no-print-directory test-faults
	@$(MAKE) --no-print-directory test-fullsize

clean:
	rm -rf build paper/figures paper/tables paper/variables paper/main.pdf paper/.profile paper/.stamps paper/.staging
	cd paper && latexmk -C main.tex >/dev/null 2>&1 || true
endif  # the paper lock
