# The two commands of the README. Both set up what they need first (scripts/bootstrap.sh).
SHELL := /bin/bash
export PATH := $(CURDIR)/.venv/bin:$(PATH)
# pytest-xdist workers: most server tests wait on the clock (pgbench -T), so 4 fit on 2 cores (6 measured slower: 25 min, every test CPU-starved)
TEST_WORKERS ?= 4

.PHONY: repro reference test test-quick bench setup lock lint lab clean-leftovers docs majors

## make repro: every study at its default profile on this machine, into yours/ (ignored by git and DVC), each
## report beside the shipped reference run (which `dvc pull` checks out of data/dvc-remote, offline); no tracked
## file changes. `pglab repro --estimate` says first what it costs.
repro: setup
	@scripts/pull.sh
	@python -m pglab.app.cli repro

## make reference (maintainers): re-measure the shipped reference itself: the DVC pipeline into data/, dvc.lock,
## data/metrics/, the reference ledger and the docs' generated blocks (then `dvc push` and commit)
reference: setup
	dvc repro --force
	@python -m pglab.app.cli ledger import-dvc --reanalyse --ledger data/ledger/reference.sqlite.gz
	@python -m pglab.app.cli ledger add --ledger data/ledger/reference.sqlite.gz
	dvc repro history
	@python -m pglab.views.summary
	@python -m pglab.views.docs_verdicts

## make majors [STUDY=fdw_overhead] [PROFILE=quick]: one study on PostgreSQL 13 to 18 (the registry's builds, fetched
## once), each major archived in yours/majors/pg<major>/, then yours/reports/majors_<study>.html (claims x majors)
STUDY ?= fdw_overhead
majors: setup
	@python -m pglab.app.cli majors $(STUDY) $(if $(PROFILE),--profile $(PROFILE))

## make docs: each study's docs page gets the verdicts of the run in data/ (after `dvc pull` or `make repro`)
docs: setup
	python -m pglab.views.docs_verdicts

## make test: unit, integration (real servers, real sshd), nbval on the notebooks
test: setup
	pytest -q -n $(TEST_WORKERS) --dist loadgroup --durations=25 --nbval-lax --nbval-sanitize-with notebooks/nbval_sanitize.cfg notebooks tests
	ruff check lib tests bench

## make test-quick: the edit loop: every test that starts no server and no sshd and takes under 30 s, then ruff
## (make test before a commit: it runs them all)
test-quick: setup
	pytest -q -n $(TEST_WORKERS) --dist loadgroup -m "not slow and not servers and not ssh" tests
	ruff check lib tests bench

## make bench: every script in bench/ at its real size, each printing its figures against its goal
## (the suite runs each at --tiny, so none breaks unseen; see the Benchmarks section of docs/testing.md)
bench: setup
	@failed=; for s in bench/parse_speed.py bench/parse_command.py bench/analyze_speed.py bench/tsbs_loader.py \
	  bench/harness_overhead.py bench/wait_sampler_cost.py bench/lag_sampler_overhead.py bench/noise_levers.py bench/ledger_add.py bench/raw_size.py bench/allocation.py \
	  bench/flush_emulation.py; do echo "== $$s"; python $$s || failed="$$failed $$s"; \
	  done; if [ -n "$$failed" ]; then echo "goal not met or script failed:$$failed"; exit 1; fi

## make setup: Debian packages, .venv from requirements.lock, DVC, the nbstripout git filter
setup:
	@scripts/bootstrap.sh

## make lock: re-pin requirements.lock (every package, exact versions) from pyproject.toml's dependencies
## and its dev extra, keeping the pins that still fit; `make lock UPGRADE=1` moves to the newest versions.
## Run with the Python of .venv (the lock's header names it); then .venv is rebuilt from the new lock.
## scripts/lock_prune.py then leaves out what nothing here uses (rfc3987-syntax: 3 s at every Jupyter start).
lock:
	@[ -x .venv/bin/pip-compile ] || scripts/bootstrap.sh
	CUSTOM_COMPILE_COMMAND="make lock" pip-compile --quiet --extra dev --strip-extras --allow-unsafe \
	  --no-emit-index-url --no-emit-find-links --newline lf $(if $(UPGRADE),--upgrade) \
	  --output-file requirements.lock pyproject.toml
	python scripts/lock_prune.py requirements.lock  # packages nothing here uses, slow to import
	@scripts/bootstrap.sh

lint: setup
	ruff check lib tests bench
	nbstripout --verify notebooks/*.ipynb

clean-leftovers: setup
	pglab cleanup

## make lab: JupyterLab on copies of the notebooks in lab/ (ignored by git and DVC), so exploring never
## dirties notebooks/ (a DVC dependency); existing copies are kept
## It listens on 127.0.0.1 only (LAB_PORT, default 8888) and prints its URL with the token; as root (this
## machine's user) it passes --allow-root, which JupyterLab otherwise refuses to start without.
LAB_PORT ?= 8888
lab: setup
	mkdir -p lab && cp -n notebooks/*.ipynb lab/
	jupyter lab --ip 127.0.0.1 --port $(LAB_PORT) --port-retries 0 --no-browser \
	  $(if $(filter 0,$(shell id -u)),--allow-root) --notebook-dir lab
