#!/usr/bin/env bash
# Builds the web console: web/ (Preact + TypeScript, pinned in web/package-lock.json) with Vite
# into internal/console/dist/app, which the Go binary embeds. The API types are generated from
# the server's own OpenAPI document first, so a change in the API's shape fails this build.
# Also installs Debian's chromium for the browser tests in test/console, unless
# GROUNDWORK_CONSOLE_NO_BROWSER is set (scripts/run.sh: serving needs no browser).
# Needs Node.js 20.19 or newer with npm; nothing is downloaded at run time.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"

if [[ -z "${GROUNDWORK_CONSOLE_NO_BROWSER:-}" ]] && ! command -v chromium >/dev/null; then
	if ! command -v apt-get >/dev/null; then
		echo "60-console: chromium is missing and there is no apt-get to install it" >&2
		exit 1
	fi
	sudo=()
	if [[ $EUID -ne 0 ]]; then
		sudo=(sudo)
	fi
	"${sudo[@]}" apt-get update -qq
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi

if ! command -v npm >/dev/null; then
	echo "60-console: Node.js (20.19 or newer) and npm are needed to build the web console" >&2
	exit 1
fi

cd web
# npm ci only when the lockfile changed since the last install.
lock_sum="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [[ ! -f node_modules/.groundwork-lock || "$(cat node_modules/.groundwork-lock)" != "$lock_sum" ]]; then
	npm ci --no-audit --no-fund --prefer-offline
	echo "$lock_sum" >node_modules/.groundwork-lock
fi
go run ../cmd/groundwork openapi >openapi.json.tmp
mv openapi.json.tmp openapi.json
npm run build
