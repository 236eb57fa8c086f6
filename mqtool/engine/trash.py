"""Staged deletion: files wait in STORE/trash/ before they are removed (Kafka's `.deleted`).

Kafka renames a segment to `.deleted` and removes it file.delete.delay.ms later.  A
RocketMQ broker refuses to load a data folder holding a file whose name or length is not
its own, so a staged file is moved out of commitlog/, consumequeue/ and index/ instead:
to STORE/trash/, its path relative to the store kept.  trash/staged.json lists every
staged file with when it was staged and when it is due; a later run removes what is due,
and `clean --undo` puts back what is still there.

The manifest is written before a file moves in and after it is removed or restored, so a
crash in between leaves at worst an entry whose file is gone (dropped when the manifest
is next read), never a staged file nobody knows about.  Directory entries are fsynced.
"""

from __future__ import annotations

import errno
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mqtool.storage import fsutil
from mqtool.storage.layout import TRASH_DIR, kept_place, store_relative

MANIFEST = "staged.json"


@dataclass
class Staged:
    """One file waiting in the trash."""

    path: str            # where it came from: relative to the store root (absolute when outside it)
    trash: str           # where it is now, relative to the trash directory
    kind: str            # commitlog, consumequeue, batchconsumequeue or index
    size: int
    staged_at: int       # epoch ms
    due_at: int          # epoch ms: a run at or after this time removes it
    run: int             # the run that staged it (its start time): undo restores run by run
    reason: str
    start_offset: int | None = None    # commitlog and consume queue files: the offset their name encodes
    topic: str | None = None
    queue_id: int | None = None
    extra: dict = field(default_factory=dict)

    @property
    def shown(self) -> str:
        """Where it is now, relative to the store (trash/...)."""
        return f"{TRASH_DIR}/{self.trash}"


def _unreadable(path, why: str):
    """A manifest mqtool cannot read is never overwritten: the files it lists would be lost."""
    from mqtool.errors import DataError

    return DataError(f"the trash manifest cannot be read ({why}); the staged files are kept: repair it or "
                     "move it away (with the trash's files) before cleaning again", path=path)


class Trash:
    def __init__(self, store_root, *, adopt=None):
        self.root = Path(store_root)
        self.dir = self.root / TRASH_DIR
        self.adopt = adopt
        self.entries: list[Staged] = self._load()

    # ------------------------------------------------------------------ reading
    def _load(self) -> list[Staged]:
        path = self.dir / MANIFEST
        try:
            doc = json.loads(fsutil.read_whole(path, 256 << 20).decode("utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise _unreadable(path, str(exc)) from None
        items = doc.get("staged") if isinstance(doc, dict) else None
        if not isinstance(items, list):
            raise _unreadable(path, 'not an object with a "staged" list')
        entries = []
        for number, item in enumerate(items):
            try:
                entry = Staged(**item)
            except TypeError:
                raise _unreadable(path, f"entry {number} is not a staged file") from None
            if not (isinstance(entry.path, str) and isinstance(entry.trash, str)
                    and all(isinstance(v, int) for v in (entry.size, entry.staged_at, entry.due_at, entry.run))):
                raise _unreadable(path, f"entry {number} is not a staged file")
            if (self.dir / entry.trash).exists():
                entries.append(entry)
        return entries

    def source(self, entry: Staged) -> Path:
        path = Path(entry.path)
        return path if path.is_absolute() else self.root / path

    def pending_bytes(self) -> int:
        """Bytes staged files still take on disk."""
        return sum(e.size for e in self.entries)

    def due(self, now_ms: int) -> list[Staged]:
        return [e for e in self.entries if e.due_at <= now_ms]

    def relative(self, path) -> str:
        """A file's path relative to the store (absolute when it lies outside, as a
        commitlog in storePathCommitLog may): storage/layout.store_relative."""
        return store_relative(self.root, path)

    # ------------------------------------------------------------------ writing
    def stage(self, path, *, kind: str, size: int, now_ms: int, delay_ms: int, run: int, reason: str,
              start_offset: int | None = None, topic: str | None = None,
              queue_id: int | None = None) -> Staged:
        """Move path into the trash; it is due delay_ms from now."""
        path = Path(path)
        rel = self.relative(path)
        inside = kept_place(self.root, path)
        target = self.dir / inside
        n = 1
        while target.exists() or any(e.trash == str(target.relative_to(self.dir)) for e in self.entries):
            target = self.dir / f"{inside}.{n}"
            n += 1
        entry = Staged(path=rel, trash=str(target.relative_to(self.dir)), kind=kind, size=size,
                       staged_at=now_ms, due_at=now_ms + delay_ms, run=run, reason=reason,
                       start_offset=start_offset, topic=topic, queue_id=queue_id)
        self._make_dirs(target.parent)
        self.entries.append(entry)
        self._write()
        try:
            fsutil.move_file(path, target, before_copy=self._room_for)
        except BaseException:
            self.entries.remove(entry)   # the file stays where it was
            self._write()
            raise
        return entry

    def _room_for(self, nbytes: int) -> None:
        """A file from another file system is copied into the trash: never when that would
        fill the trash's disk (the consume queues' and the index's disk)."""
        import shutil

        free = shutil.disk_usage(self.dir).free
        if free < nbytes + (64 << 20):
            raise OSError(errno.ENOSPC, f"no room to copy {nbytes} bytes into the trash ({free} bytes free); "
                                        "use --delete-delay 0 to delete at once", str(self.dir))

    def remove(self, entry: Staged) -> None:
        """Remove a staged file for good."""
        target = self.dir / entry.trash
        target.unlink(missing_ok=True)
        fsutil.fsync_dir(target.parent)
        self._prune(target.parent)
        self.entries.remove(entry)
        self._write()

    def restore(self, entry: Staged) -> Path:
        """Put a staged file back where it came from."""
        source = self.dir / entry.trash
        original = self.source(entry)
        if original.exists():
            raise FileExistsError(errno.EEXIST, "a file of that name is back in its place", str(original))
        original.parent.mkdir(parents=True, exist_ok=True)
        fsutil.move_file(source, original)
        self._prune(source.parent)
        self.entries.remove(entry)
        self._write()
        return original

    def _make_dirs(self, directory: Path) -> None:
        missing = []
        d = directory
        while not d.exists():
            missing.append(d)
            d = d.parent
        directory.mkdir(parents=True, exist_ok=True)
        if self.adopt is not None:
            for d in reversed(missing):
                self.adopt(d)

    def _write(self) -> None:
        manifest = self.dir / MANIFEST
        if not self.entries:   # nothing staged any more: no trash directory left behind
            manifest.unlink(missing_ok=True)
            try:
                self.dir.rmdir()
                fsutil.fsync_dir(self.root)
            except OSError:
                pass
            return
        self._make_dirs(self.dir)
        tmp = manifest.with_name(MANIFEST + ".tmp")
        doc = {"store": str(self.root.resolve()), "staged": [asdict(e) for e in self.entries]}
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, manifest)
        if self.adopt is not None:
            self.adopt(manifest)
        fsutil.fsync_dir(self.dir)

    def _prune(self, directory: Path) -> None:
        """Remove directories the last staged file left empty (never the trash itself)."""
        d = directory
        while d != self.dir and self.dir in d.parents:
            try:
                d.rmdir()
            except OSError:
                return
            d = d.parent
