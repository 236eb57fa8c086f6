#!/usr/bin/env bash
# A CI step: check a RocketMQ store with mqtool and fail the job when anything is wrong.
#
#   examples/verify-ci.sh STORE [REPORT]
#
# The JSON-lines report (every problem, then a summary) is written to REPORT
# (default: verify-report.jsonl) so the CI system can keep it as an artifact,
# e.g. GitLab `artifacts: {paths: [verify-report.jsonl], when: always}` or
# GitHub `actions/upload-artifact` with `if: always()`.
# Exit status: mqtool's own (0 clean, 1 problems found, 2 usage, 3 locked, 4 not a store).
set -uo pipefail

store=${1:?usage: verify-ci.sh STORE [REPORT]}
report=${2:-verify-report.jsonl}
mqtool=${MQTOOL:-mqtool}
command -v "$mqtool" >/dev/null 2>&1 || mqtool="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/mqtool"

# PROMETHEUS=FILE also writes the metrics (node_exporter textfile format) for the CI to keep
"$mqtool" verify-crc "$store" --scope all --jobs "${JOBS:-2}" --json ${PROMETHEUS:+--prometheus "$PROMETHEUS"} > "$report"
status=$?
summary=$(tail -n 1 "$report")
case $status in
    0) echo "verify-crc: store is clean: $summary" ;;
    1) echo "verify-crc: PROBLEMS FOUND, see $report:" >&2
       grep '"type":"problem"' "$report" | head -n 20 >&2 ;;
    *) echo "verify-crc: could not check the store (exit $status)" >&2 ;;
esac
exit $status
