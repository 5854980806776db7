#!/usr/bin/env bash
# The one command that passes all the tests on a fresh Debian machine: it installs and starts
# what the tests need (scripts/setup.d/*: PostgreSQL, MariaDB and Redis from Debian's packages,
# moto from PyPI, the kube-apiserver build), starts one PostgreSQL for the store tests, and runs
# every test (with -race on the engine and store packages).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export PATH="$PATH:/usr/local/go/bin:$HOME/go/bin"
command -v go >/dev/null || { echo "test.sh: Go is required (https://go.dev/dl)" >&2; exit 1; }

for s in scripts/setup.d/*.sh; do
	echo "== setup: $s"
	bash "$s"
done

# One throwaway PostgreSQL for every package's store tests (each test makes its own database).
if [[ -z "${GROUNDWORK_TEST_POSTGRES_URL:-}" ]]; then
	pgbin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
	pgdir="$(mktemp -d /tmp/gw-test-pg.XXXXXX)"
	chown postgres "$pgdir" 2>/dev/null || true
	asuser=()
	if [[ $EUID -eq 0 ]]; then asuser=(runuser -u postgres --); fi
	"${asuser[@]}" "$pgbin/initdb" -D "$pgdir/data" -U postgres --auth=trust -E UTF8 >/dev/null
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	"${asuser[@]}" "$pgbin/pg_ctl" -D "$pgdir/data" -l "$pgdir/log" -w -o "-p $port -h 127.0.0.1 -k $pgdir -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=400" start >/dev/null
	trap '"${asuser[@]}" "$pgbin/pg_ctl" -D "$pgdir/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$pgdir"' EXIT
	export GROUNDWORK_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
	echo "== PostgreSQL for tests on port $port"
fi

echo "== go vet"
go vet ./...

race_pkgs=$(go list ./internal/engine/... ./internal/store/...)
other_pkgs=$(go list ./... | grep -v -x -F "$race_pkgs")

status=0
echo "== go test -race (engine, store)"
go test -race -short -count=1 -timeout 30m $race_pkgs || status=1
echo "== go test (the 10,000-waiting-jobs test at full size, without the race detector's slowdown)"
go test -count=1 -timeout 20m -run 'TestManyWaitingJobsFewWorkers' ./internal/engine || status=1
echo "== go test (everything else)"
go test -count=1 -timeout 45m -p 2 $other_pkgs || status=1
# Fuzz targets, each for a fixed number of executions (CI, or GROUNDWORK_FUZZ=1 by hand;
# GROUNDWORK_FUZZTIME sets another budget for all). A crasher is written to the package's
# testdata/fuzz/ and fails the run; commit it with the fix. The budgets are counts, about ten
# seconds each on an idle 2-core machine, not durations: Go 1.26's fuzz coordinator can report
# "context deadline exceeded" when a -fuzztime duration ends while a starved worker is mid-call
# (go.dev/issue/75804, fixed in Go 1.27), failing a run that found nothing.
if [[ "${CI:-}" == "true" || -n "${GROUNDWORK_FUZZ:-}" ]]; then
	for target in \
		"./internal/api FuzzRequestDecoders 2000x" \
		"./internal/catalog FuzzValidateJob 200000x" \
		"./internal/protocol FuzzProtocolRequest 100000x" \
		"./cmd/groundwork FuzzReadSpec 2000x"; do
		read -r pkg name budget <<<"$target"
		budget="${GROUNDWORK_FUZZTIME:-$budget}"
		echo "== go test -fuzz $name ($pkg, $budget)"
		go test -run '^$' -fuzz "^$name\$" -fuzztime "$budget" "$pkg" || status=1
	done
fi
for mod in examples/provisioner; do
	if [[ -f "$mod/go.mod" ]]; then
		echo "== go test ($mod)"
		(cd "$mod" && go test -count=1 ./...) || status=1
	fi
done
# The bench (its own module, so River stays out of the server's go.mod) is vetted, built and
# its report's checks unit-tested so that it cannot rot; the bench itself is never run here:
# benches are not timed tests.
echo "== go vet + build + unit tests (tools/bench, the bench not run)"
(cd tools/bench && go vet ./... && go build -o /dev/null . && go test -count=1 ./...) || status=1
exit $status
