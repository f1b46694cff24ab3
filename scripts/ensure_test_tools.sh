#!/usr/bin/env bash
# The tools `make test` needs beyond Python and the PostgreSQL server binaries, brought the way
# CI brings them: Debian's headless Chromium and its chromedriver at /usr/bin (the admin's
# browser test, tests/browser) and PgBouncer on PATH or at /usr/sbin (tests/deployment).
#
# Each missing one is installed with apt-get when this can: as root, or through passwordless
# sudo. Otherwise it stops at once with one line naming what to install and exits 1, before
# any test runs. Nothing is printed when everything is present.
#
# ENSURE_TEST_TOOLS_ROOT (tests only) is put before the fixed paths /usr/bin/chromium,
# /usr/bin/chromedriver and /usr/sbin/pgbouncer, so a test can make a tool look missing or
# present; apt-get, sudo and pgbouncer are still looked up on PATH.
set -euo pipefail

root=${ENSURE_TEST_TOOLS_ROOT:-}

missing=()   # tool names, for the message
packages=()  # the Debian packages that bring them

find_missing() {
    missing=()
    packages=()
    if [[ ! -x $root/usr/bin/chromium ]]; then
        missing+=(chromium)
        packages+=(chromium)
    fi
    if [[ ! -x $root/usr/bin/chromedriver ]]; then
        missing+=(chromedriver)
        packages+=(chromium-driver)
    fi
    if ! command -v pgbouncer >/dev/null && [[ ! -x $root/usr/sbin/pgbouncer ]]; then
        missing+=(pgbouncer)
        packages+=(pgbouncer)
    fi
}

# "a, b, c"
joined() {
    local text=$1
    shift
    for name in "$@"; do
        text+=", $name"
    done
    echo "$text"
}

find_missing
if ((${#missing[@]} == 0)); then
    exit 0
fi

# How apt-get runs as root: directly, through passwordless sudo, or not at all (empty).
as_root=()
apt=$(command -v apt-get || true)
if [[ -n $apt ]]; then
    export DEBIAN_FRONTEND=noninteractive
    if ((EUID == 0)); then
        as_root=(command)
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        as_root=(sudo -n env DEBIAN_FRONTEND=noninteractive)
    fi
fi

if ((${#as_root[@]} == 0)); then
    advice="install them (Debian: apt-get install ${packages[*]})"
    if [[ -n $apt ]]; then
        advice+=" or run as root so make test installs them"
    fi
    echo "make test: missing $(joined "${missing[@]}"); $advice" >&2
    exit 1
fi

echo "make test: installing ${packages[*]} with apt-get" >&2
"${as_root[@]}" "$apt" update
"${as_root[@]}" "$apt" install -y --no-install-recommends "${packages[@]}"

find_missing
if ((${#missing[@]})); then
    echo "make test: still missing $(joined "${missing[@]}") after apt-get install ${packages[*]}" >&2
    exit 1
fi
