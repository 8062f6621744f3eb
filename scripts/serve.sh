#!/usr/bin/env bash
# Installs what is missing, builds h3serve and the h3 tool (scripts/build.sh),
# and starts the server in the foreground. Arguments go to h3serve (try
# --help).
#
#   scripts/serve.sh
#   scripts/serve.sh --port 50052 --metrics-port 9000
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/build.sh
build_dir=$(scripts/build.sh --dir)
echo "Ask it from another terminal: $build_dir/clients/h3 server-info"
exec "$build_dir/server/h3serve" "$@"
