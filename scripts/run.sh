#!/usr/bin/env bash
# Runs Groundwork on its embedded defaults on a fresh Debian machine: installs the database
# servers the local provider starts (PostgreSQL, MariaDB, Redis) when they are missing, builds
# the web console and the binary and serves on :5087 with SQLite and secrets under ./groundwork-data. Extra
# arguments go to `groundwork serve`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export PATH="$PATH:/usr/local/go/bin:$HOME/go/bin"
bash scripts/setup.d/20-datastores.sh
# Without Node.js the API still serves; the console's address then says how to build it.
GROUNDWORK_CONSOLE_NO_BROWSER=1 bash scripts/setup.d/60-console.sh ||
	echo "run.sh: the web console was not built (see docs/console.md); serving the API without it" >&2
mkdir -p bin
go build -o bin/groundwork ./cmd/groundwork
exec ./bin/groundwork serve "$@"
