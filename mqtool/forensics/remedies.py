"""What a recovery leaves and what mends it: `recover` promises a store that verifies clean, or
exit 1 naming what is left and the command to run next (salvage, rebuild-cq, the timer units)."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from mqtool.errors import DataError
from mqtool.storage import batchqueue, census


def left_after_recovery(layout) -> list:
    """What verify-crc still finds once recovery is done.  A broker's recovery only cuts the
    commitlog's tail and the queues past it: damage before the cut, and queue or index entries
    that are wrong but not past the end, stay.  recover's promise is a store that verifies
    clean, or exit 1 naming what is left and what to run next."""
    from mqtool.forensics import verify  # (loads the compiled kernels: only when asked)

    found = []
    verify.verify(layout, scopes=verify.all_scopes(layout), on_finding=found.append)
    return found


def scope_of(layout, path) -> str:
    """The verify-crc scope a store file belongs to: "cq", "index" or "commitlog"."""
    path = Path(path)
    queues = (layout.consumequeue_dir, layout.consumequeue_ext_dir, batchqueue.directory(layout))
    if any(path.is_relative_to(d) for d in queues):
        return "cq"
    return "index" if path.is_relative_to(layout.index_dir) else "commitlog"


def next_steps(left, store, layout) -> list[str]:
    """What mends what is left: findings, or the names of their scopes.  salvage is named as it
    runs on this store: with --drop-features, and what it leaves behind, when the store uses
    features a salvaged store does not hold (batch queues, say)."""
    scopes = {getattr(finding, "scope", finding) for finding in left}
    steps = []
    if "commitlog" in scopes:
        dropped = census.take(layout).not_kept("salvage")
        if dropped:
            steps.append(f"`mqtool salvage --drop-features {store} NEW_STORE` (copies every valid record into a "
                         f"new store, without {', '.join(dropped)})")
        else:
            steps.append(f"`mqtool salvage {store} NEW_STORE` (copies every valid record into a new store)")
    if scopes & {"cq", "index"}:
        steps.append(f"`mqtool rebuild-cq{' --index' if 'index' in scopes else ''} {store}`")
    if "timer" in scopes:
        steps.append("put back the messages of the timer units the cut left dangling (the quarantine's "
                     "timer-units.jsonl lists them, its saved bytes hold the records), or accept their loss, "
                     "before a broker starts (`mqtool verify-crc --scope timer` shows them)")
    if not steps:
        steps.append(f"`mqtool verify-crc {store}` shows them")
    return steps


@contextmanager
def cannot_load(layout, store):
    """A file a broker refuses to load (a consume queue file of the wrong size, say) stops the
    recovery before it changes anything, as it stops a broker's start: say what mends it."""
    try:
        yield
    except DataError as exc:
        if exc.path is None:
            raise
        raise DataError(f"{exc.message}; recovery cannot load it and changed nothing; next: "
                        f"{'; then '.join(next_steps([scope_of(layout, exc.path)], store, layout))}",
                        path=exc.path) from None
