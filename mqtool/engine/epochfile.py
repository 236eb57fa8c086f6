"""Keeping the controller's epoch file consistent with the commitlog, as a broker in controller
mode does (enableControllerMode; facts from rocketmq-all-5.3.3):

- after commitlog files are deleted, entries that end at or before the new minimum offset - 1
  go (DefaultMessageStore's clean service -> AutoSwitchHAService.truncateEpochFilePrefix);
- after the commitlog is cut at an offset, entries that start at or after it go
  (truncateEpochFileSuffix).

Each write keeps the previous content in epochFileCheckpoint.bak (MixAll.string2File), so what
a trim removes stays recoverable.  Like the broker, nothing is written when no entry would be
left (CheckpointFile.write ignores an empty list).
"""

from __future__ import annotations

from pathlib import Path

from mqtool.errors import NotAStoreError
from mqtool.formats import epochfile
from mqtool.storage import fsutil

NAME = "epochFileCheckpoint"


def path_of(layout) -> Path:
    custom = layout.config.storePathEpochFile
    return Path(custom) if custom else layout.root / NAME


def read(path: Path) -> list[epochfile.EpochEntry] | None:
    """The entries, from the file or, as a broker does, its .bak; None without an epoch file."""
    for candidate in (path, path.with_name(path.name + ".bak")):
        try:
            text = fsutil.read_whole(candidate, 16 << 20).decode("utf-8")
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError) as exc:
            raise NotAStoreError(f"cannot read the epoch file: {exc}", path=candidate) from None
        try:
            entries = epochfile.parse(text)
        except epochfile.EpochFileError:
            continue
        if entries:
            return entries
    return None if not path.exists() else []


def _write(path: Path, entries) -> None:
    previous = fsutil.read_whole(path, 16 << 20) if path.exists() else None
    if previous is not None:
        path.with_name(path.name + ".bak").write_bytes(previous)
    path.write_text(epochfile.render(entries), encoding="utf-8")


def _trim(layout, keep, what: str, dry_run: bool) -> str | None:
    path = path_of(layout)
    entries = read(path)
    if not entries:
        return None
    kept = [e for i, e in enumerate(entries) if keep(e, entries[i + 1].start_offset if i + 1 < len(entries) else None)]
    removed = len(entries) - len(kept)
    if not removed:
        return None
    if not kept:
        return (f"{path.name}: every entry would go ({what}); left as it is, as a broker leaves it "
                "(it never writes an empty epoch file)")
    if not dry_run:
        _write(path, kept)
    verb = "would remove" if dry_run else "removed"
    return f"{path.name}: {verb} {removed} epoch entr{'y' if removed == 1 else 'ies'} ({what}); the previous " \
           f"file is kept as {path.name}.bak"


def after_deletion(layout, min_offset: int, dry_run: bool = False) -> str | None:
    """truncatePrefixByOffset(minPhyOffset - 1): entries whose end is <= min_offset - 1 go."""
    limit = min_offset - 1
    return _trim(layout, lambda e, end: end is None or end > limit,
                 f"they end before the commitlog's new minimum offset {min_offset}", dry_run)


def after_cut(layout, cut: int, dry_run: bool = False) -> str | None:
    """truncateSuffixByOffset(cut): entries that start at or after the cut go."""
    return _trim(layout, lambda e, end: e.start_offset < cut, f"they start at or after the cut at {cut}", dry_run)
