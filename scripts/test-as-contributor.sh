#!/usr/bin/env bash
# Usage (as root): scripts/test-as-contributor.sh [USER]
#
# Runs the README's test command as a new contributor would: `npm ci && npm test` on a fresh clone
# of this checkout's HEAD, as an ordinary local user (USER, default `shmcontrib`, created if there
# is none) and outside CI. The checks that need root, a second user or a toolchain this machine
# lacks then SKIP, each naming what is missing, and everything else must pass, the coverage gate
# included: every line of lib/ must be reached by a test that runs for any user. CI runs it after
# the suite itself (.ci/run), where every SKIP is a failure.
set -euo pipefail
if [ "$(id -u)" != 0 ]; then
  echo "$0: run it as root: it makes a user (or takes USER) and runs the tests as that user" >&2
  exit 2
fi
user=${1:-shmcontrib}
top=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
if [ -n "$(git -C "$top" status --porcelain)" ]; then
  echo "note: this tests the last commit ($(git -C "$top" rev-parse --short HEAD)), not the uncommitted changes"
fi
if ! id "$user" >/dev/null 2>&1; then
  useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
fi
if [ "$(id -u "$user")" = 0 ]; then
  echo "$0: $user is root: pick an ordinary user" >&2
  exit 2
fi

# A private directory (mktemp: 0700) given to the user: its clone, its home, its npm cache.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git clone --quiet --no-local "$top" "$work/repo"
mkdir "$work/home"
chown -R "$user": "$work"

# The user's environment is a new one: this machine's PATH (the Node to test with), and the
# headers node-gyp builds against when npm is set to take them from a local directory (nodedir)
# rather than download them.
environment=(HOME="$work/home" PATH="$PATH" npm_config_cache="$work/home/.npm")
nodedir=$(npm config get nodedir 2>/dev/null || true)
if [ -n "$nodedir" ] && [ "$nodedir" != undefined ] && [ "$nodedir" != null ]; then
  environment+=(npm_config_nodedir="$nodedir")
fi
echo "as $user (uid $(id -u "$user")), on a fresh clone of $(git -C "$top" rev-parse --short HEAD): npm ci && npm test"
cd "$work/repo"
runuser -u "$user" -- env -i "${environment[@]}" bash -c 'node --version && npm ci --no-audit --no-fund && npm test'
