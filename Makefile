# The two commands of the README. Both set up what they need first (scripts/bootstrap.sh).
SHELL := /bin/bash
export PATH := $(CURDIR)/.venv/bin:$(PATH)

.PHONY: repro test setup lint clean-leftovers

## make repro: every study at its default profile on this machine, figures at the end
repro: setup
	dvc repro
	@python -m pglab.summary

## make test: unit, integration (real servers, real sshd), nbval on the notebooks
test: setup
	pytest -q --nbval-lax --nbval-sanitize-with notebooks/nbval_sanitize.cfg notebooks tests
	ruff check lib tests bench

setup:
	@scripts/bootstrap.sh

lint: setup
	ruff check lib tests bench
	nbstripout --verify notebooks/*.ipynb

clean-leftovers: setup
	pglab cleanup
