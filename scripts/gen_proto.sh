#!/usr/bin/env bash
# Regenerate the *_pb2.py modules from their .proto files with the pinned protoc that
# grpcio-tools bundles (dev extra). The generated modules are committed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
for proto in fluidity/proto/framework.proto fluidity/datafeed/data_feed.proto \
             fluidity/proto/trainer_desc.proto \
             fluidity/proto/profiler/profiler.proto; do
    "$PY" -m grpc_tools.protoc -I. --python_out=. "$proto"
    echo "regenerated ${proto%.proto}_pb2.py"
done
