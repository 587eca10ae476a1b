#!/bin/sh
# Install scorio-monitor into a fresh virtual environment.
#
# Usage: install.sh VENV [SOURCE]
#   VENV    where the environment goes (created; must not exist yet)
#   SOURCE  the repository checkout to install from (default: .)
#
# deploy/Dockerfile runs exactly this; tests/deploy/test_deploy.py runs it
# in a temporary folder, so CI checks the image's install steps without
# Docker. PYTHON picks the interpreter (default python3, 3.11 or newer).
set -eu

venv=${1:?usage: install.sh VENV [SOURCE]}
source=${2:-.}
python=${PYTHON:-python3}

"$python" -m venv "$venv"
# A regular (not editable) install: the image keeps the installed package,
# not the source tree. [service]: the HTTP API, Redis, MQTT and webhooks that
# `serve` may be configured with.
"$venv/bin/python" -m pip install "$source[service]"
# Fail the build, not the first start, if the entry point is broken.
"$venv/bin/scorio-monitor" --help > /dev/null
