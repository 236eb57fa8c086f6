"""Keeping what a repair cuts: bytes and whole files go to STORE/quarantine/<time>/ first.

The quarantine lies outside commitlog/, consumequeue/ and index/, so a broker
never sees it.  A manifest.json lists every saved range and moved file with
where it came from, so an operator can put things back by hand.  Directory
entries are fsynced after every move.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from mqtool.errors import RefusedError
from mqtool.storage import fsutil
from mqtool.storage.layout import QUARANTINE_DIR, kept_place


class Quarantine:
    def __init__(self, store_root, *, base_dir=None, enabled: bool = True, clock=None):
        self.store_root = Path(store_root)
        self.base_dir = Path(base_dir) if base_dir else self.store_root / QUARANTINE_DIR
        self.enabled = enabled
        self.clock = clock
        self.dir: Path | None = None
        self.entries: list[dict] = []

    def _target_dir(self) -> Path:
        if self.dir is None:
            millis = self.clock.now_ms() if self.clock else int(time.time() * 1000)
            stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(millis / 1000)) + f"{millis % 1000:03d}Z"
            self.dir = self.base_dir / stamp
            n = 1
            while self.dir.exists():
                self.dir = self.base_dir / f"{stamp}-{n}"
                n += 1
            self.dir.mkdir(parents=True)
        return self.dir

    def _relative(self, path: Path) -> Path:
        return Path(kept_place(self.store_root, path))    # external/... for a commitlog outside the store

    def _ensure_room(self, nbytes: int) -> None:
        target = self.base_dir if self.base_dir.exists() else self.base_dir.parent
        while not target.exists():
            target = target.parent
        free = shutil.disk_usage(target).free
        if free < nbytes + (16 << 20):
            raise RefusedError(f"no room to keep {nbytes} cut bytes in the quarantine "
                               f"({free} bytes free); free space, use --quarantine-dir on another disk, "
                               "or --no-quarantine", path=self.base_dir)

    def save_range(self, path, buf, start: int, end: int, reason: str) -> None:
        """Copy buf[start:end] (bytes of file `path`) before they are zeroed."""
        if not self.enabled or end <= start:
            return
        self._ensure_room(end - start)
        rel = self._relative(path)
        target = self._target_dir() / f"{rel}.{start}-{end}.bin"
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "wb") as fh:
            for pos in range(start, end, 1 << 24):
                fh.write(buf[pos:min(end, pos + (1 << 24))])
            fh.flush()
            os.fsync(fh.fileno())
        fsutil.fsync_dir(target.parent)
        self.entries.append({"kind": "range", "source": str(path), "start": start, "end": end,
                             "saved": str(target.relative_to(self.dir)), "reason": reason})
        self._write_manifest()

    def move_file(self, path, reason: str) -> None:
        """Move a whole file out of the store's data folders (or delete it when disabled)."""
        path = Path(path)
        if not self.enabled:
            path.unlink(missing_ok=True)
            fsutil.fsync_dir(path.parent)
            return
        rel = self._relative(path)
        target = self._target_dir() / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        fsutil.move_file(path, target, before_copy=self._ensure_room)
        self.entries.append({"kind": "file", "source": str(path), "saved": str(target.relative_to(self.dir)),
                             "reason": reason})
        self._write_manifest()

    def save_rows(self, name: str, rows, reason: str) -> None:
        """Write rows (dicts, streamed) as JSON lines to `name` in the quarantine: what a repair
        leaves pointing at the bytes it keeps here."""
        if not self.enabled:
            return
        target = self._target_dir() / name
        count = 0
        with open(target, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row) + "\n")
                count += 1
            fh.flush()
            os.fsync(fh.fileno())
        self.entries.append({"kind": "rows", "saved": name, "count": count, "reason": reason})
        self._write_manifest()

    def _write_manifest(self) -> None:
        manifest = self.dir / "manifest.json"
        tmp = manifest.with_suffix(".tmp")
        tmp.write_text(json.dumps({"store": str(self.store_root), "entries": self.entries}, indent=2))
        os.replace(tmp, manifest)
        fsutil.fsync_dir(self.dir)
