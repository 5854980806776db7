#!/usr/bin/env bash
# Installs the database servers the local provider runs (PostgreSQL, MariaDB for the mysql
# engine, Redis) from Debian's packages, so that its tests run against real servers. A fast
# no-op when the binaries are already there. The packages' own system services are not needed:
# Groundwork starts one server process per datastore job under its data dir.
set -euo pipefail

have_postgres() { compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; }
have_mariadb() { [[ -x /usr/sbin/mariadbd || -n "$(command -v mariadbd || true)" ]] && command -v mariadb-install-db >/dev/null; }
have_redis() { command -v redis-server >/dev/null || [[ -x /usr/bin/redis-server ]]; }

pkgs=()
have_postgres || pkgs+=(postgresql)
have_mariadb || pkgs+=(mariadb-server)
have_redis || pkgs+=(redis-server)
if ((${#pkgs[@]} == 0)); then
	exit 0
fi

if ! command -v apt-get >/dev/null; then
	echo "20-datastores: missing ${pkgs[*]} and no apt-get to install them" >&2
	exit 1
fi
sudo=()
if [[ $EUID -ne 0 ]]; then
	sudo=(sudo)
fi
# policy-rc.d 101 keeps the packages from starting their system-wide services during install
# (containers have no init, and tests must not depend on them).
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
	printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee /usr/sbin/policy-rc.d >/dev/null
	"${sudo[@]}" chmod +x /usr/sbin/policy-rc.d
	trap '"${sudo[@]}" rm -f /usr/sbin/policy-rc.d' EXIT
fi
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
