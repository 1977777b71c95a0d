#!/usr/bin/env bash
# Packs @ticketing/protocol and @ticketing/client with `npm pack`, installs the
# tarballs into a fresh project outside the repository (no workspace, no
# registry access needed), and runs smoke tests against a real server started
# from this checkout: ESM with the build's node, and require() with every node
# in NODES (default: Node.js 22 and 24 through `npx -y node@N`; require() of an
# ES module needs 22.12+). Needs a build (`npx tsc -b`).
#
#   NODES="node22 node24"   node binaries (or `npx -y node@N` commands) for the require() path
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
server_pid=""
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

echo "packing into $work"
(cd "$root/packages/protocol" && npm pack --silent --pack-destination "$work" >/dev/null)
(cd "$root/packages/client" && npm pack --silent --pack-destination "$work" >/dev/null)
contents="$(tar -tzf "$work"/ticketing-client-*.tgz)"
grep -qx "package/dist/index.js" <<<"$contents" || { echo "the client tarball has no dist/index.js"; exit 1; }

mkdir "$work/app" && cd "$work/app"
npm init -y >/dev/null
npm install --silent --no-audit --no-fund --offline "$work"/ticketing-protocol-*.tgz "$work"/ticketing-client-*.tgz
cp "$root/scripts/smoke/client-smoke.mjs" "$root/scripts/smoke/client-smoke.cjs" .

port="$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
"$root/bin/ticketing" server --memory --listen "127.0.0.1:$port" --http off >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do grep -q ready "$work/server.log" && break; sleep 0.1; done
export TICKETING_ADDR="127.0.0.1:$port"

node client-smoke.mjs
for n in ${NODES:-"npx -y node@22" "npx -y node@24"}; do
  echo "require() with $n: $($n --version)"
  $n client-smoke.cjs
done
echo "package smoke test (TypeScript client): ok"
