#!/usr/bin/env bash
# Installs what is missing, builds h3serve and the h3 tool (scripts/build.sh),
# and starts the server in the foreground on the embedded default model
# (h3-kjv), or on --model M.h3. Arguments go to h3serve (try --help).
#
#   scripts/serve.sh
#   scripts/serve.sh --model h3-125m.h3 --port 50052 --http-port 8081 --metrics-port 9000
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/build.sh
build_dir=$(scripts/build.sh --dir)
echo "Ask it from another terminal: $build_dir/clients/h3 generate \"And God said\""
echo "  or over HTTP: curl localhost:8080/v1/completions -d '{\"prompt\": \"And God said\"}'"
exec "$build_dir/server/h3serve" "$@"
