#!/usr/bin/env bash
# Remakes the README's pictures from the README's own commands (those that write docs/img/...): runs every
# README command as ctest Readme.EveryCommandRuns does and copies the pictures they make over docs/img.
# Look at each picture afterwards. The test fails when a README picture no longer matches its command.
#   usage: bash tools/readme_pictures.sh [ATTNMAP_BINARY]   (default build/attnmap)
set -euo pipefail
cd "$(dirname "$0")/.."
README_PICTURES=update bash tests/readme_commands.sh . "${1:-build/attnmap}"
