#!/usr/bin/env bash
# Kept for the messages and docs that name it: everything the tests need is installed by
# `npm run setup` (scripts/setup.mjs) now.
exec node "$(dirname "$0")/setup.mjs" "$@"
