#!/usr/bin/env bash
# Installs schemathesis (a property-based tester for OpenAPI documents) into a virtualenv under
# .cache/, for the contract test that runs it against a live server (internal/api/contracttest).
# A no-op when that version is already there.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="$root/.cache/schemathesis-venv"
want="4.32.5"

# As for moto: a venv that moved keeps st but not the interpreter its first line names.
if [[ -f "$venv/.schemathesis-$want" ]] && "$venv/bin/st" --version >/dev/null 2>&1; then
	exit 0
fi

python="$(command -v python3 || true)"
if [[ -z "$python" ]] || ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
	if command -v apt-get >/dev/null; then
		apt-get update -qq && apt-get install -y -qq python3 python3-venv >/dev/null
		python="$(command -v python3)"
	else
		echo "50-schemathesis: python3 with venv is missing" >&2
		exit 1
	fi
fi

mkdir -p "$root/.cache"
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$want"
touch "$venv/.schemathesis-$want"
