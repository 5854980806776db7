#!/usr/bin/env bash
# Installs moto server (an AWS API emulator) into a virtualenv under .cache/ so that the AWS
# provider's tests run against real AWS wire protocols on 127.0.0.1. A no-op when already there.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="$root/.cache/moto-venv"
want="5.2.5"

# The venv's scripts name its interpreter by absolute path, so a checkout that moved (or a
# copied .cache) leaves moto_server in place but unable to start: run it to be sure.
if [[ -f "$venv/.moto-$want" ]] && "$venv/bin/moto_server" --help >/dev/null 2>&1; then
	exit 0
fi

python="$(command -v python3 || true)"
if [[ -z "$python" ]]; then
	if command -v apt-get >/dev/null; then
		apt-get update -qq && apt-get install -y -qq python3 python3-venv >/dev/null
		python="$(command -v python3)"
	else
		echo "40-moto: python3 is missing" >&2
		exit 1
	fi
fi
if ! "$python" -c 'import venv, ensurepip' 2>/dev/null && command -v apt-get >/dev/null; then
	apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
fi

mkdir -p "$root/.cache"
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "moto[server]==$want"
touch "$venv/.moto-$want"
