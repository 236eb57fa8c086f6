#!/bin/sh
# mqtool-clean.sh: run `mqtool clean` from cron.
#
#   mqtool-clean.sh STORE [more `mqtool clean` options, e.g. --config /opt/rocketmq/conf/broker.conf]
#
# - Finds mqtool: $MQTOOL if set, else the .venv of the mqtool checkout this script sits in,
#   else /opt/mqtool/.venv/bin/mqtool, else mqtool on PATH.
# - One run per store at a time (flock); a run that finds another still going exits 0.
# - Logs every run, with mqtool's output, to $MQTOOL_CLEAN_LOG (default
#   /var/log/mqtool-clean.log when writable, else ~/mqtool-clean.log).
# - Prints only when mqtool printed something (a clean happened, or a warning), so cron mails
#   only on news. Exit 3 (a broker holds the store's lock; it cleans the store by itself) is
#   logged, not mailed, unless MQTOOL_CLEAN_MAIL_LOCKED=1.
# - Exits with mqtool's exit code: 0 ok, 1 --undo incomplete, 2 usage, 3 a broker holds the
#   lock, 4 not a store; 127 when mqtool cannot be found.
set -u
umask 022
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin${PATH:+:$PATH}
export PATH

if [ $# -lt 1 ]; then
    echo "usage: $0 STORE [mqtool clean options]" >&2
    exit 2
fi
STORE=$1
shift

here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${MQTOOL:-}" ]; then
    for candidate in "$here/../.venv/bin/mqtool" /opt/mqtool/.venv/bin/mqtool; do
        if [ -x "$candidate" ]; then
            MQTOOL=$candidate
            break
        fi
    done
fi
if [ -z "${MQTOOL:-}" ]; then
    MQTOOL=$(command -v mqtool 2>/dev/null || true)
fi
if [ -z "$MQTOOL" ] || [ ! -x "$MQTOOL" ]; then
    echo "mqtool-clean: cannot find mqtool; set MQTOOL=/path/to/.venv/bin/mqtool" >&2
    exit 127
fi

LOG=${MQTOOL_CLEAN_LOG:-/var/log/mqtool-clean.log}
if ! { [ -w "$LOG" ] || { [ ! -e "$LOG" ] && [ -w "$(dirname "$LOG")" ]; }; }; then
    LOG=${HOME:-/tmp}/mqtool-clean.log
fi
log() {
    printf '%s %s\n' "$(date '+%Y-%m-%dT%H:%M:%S%z')" "$*" >>"$LOG"
}

# one run per store at a time (mqtool's own lock on STORE/lock keeps brokers out either way)
if command -v flock >/dev/null 2>&1; then
    key=$(printf '%s' "$STORE" | cksum | cut -d' ' -f1)
    exec 9>>"${TMPDIR:-/tmp}/mqtool-clean.$key.lock"
    if ! flock -n 9; then
        log "mqtool clean $STORE: skipped, the previous run is still going"
        exit 0
    fi
fi

out=$(mktemp "${TMPDIR:-/tmp}/mqtool-clean.XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT

"$MQTOOL" clean "$STORE" "$@" >"$out" 2>&1
rc=$?

log "mqtool clean $STORE $*: exit $rc"
sed 's/^/    /' "$out" >>"$LOG"

if [ -s "$out" ] && { [ "$rc" -ne 3 ] || [ "${MQTOOL_CLEAN_MAIL_LOCKED:-0}" = 1 ]; }; then
    cat "$out"
fi
exit "$rc"
