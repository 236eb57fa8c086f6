"""IndexService: the store's index files as one ordered list, written on dispatch.

Each dispatched record adds its UNIQ_KEY and each of its KEYS under
`topic#key` (rollback records are skipped; a record below the last file's
endPhyOffset was indexed before).  A full file rolls to a new one named by
the current local time, which starts where the full one ended; the full file
is flushed and its end time becomes the checkpoint's indexMsgTimestamp.
Queries walk the files newest first, as IndexService.queryOffset does.
"""

from __future__ import annotations

from pathlib import Path

from mqtool.formats.filenames import index_name, is_index_name
from mqtool.formats.index import index_key
from mqtool.formats.javastr import index_key_hashes
from mqtool.storage import fsutil
from mqtool.storage.dispatchrequest import DispatchRequest
from mqtool.storage.indexfile import IndexFile, query_offsets


class IndexService:
    def __init__(self, directory: Path, hash_slot_num: int, index_num: int, *, clock, checkpoint=None,
                 on_create=None, max_msgs_num_batch: int = 64):
        self.directory = Path(directory)
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.clock = clock
        self.checkpoint = checkpoint
        self.on_create = on_create
        self.max_msgs_num_batch = max_msgs_num_batch
        self.empty_file = None   # a 0-byte newest index file a crash left (load sets it aside)
        self.files: list[IndexFile] = []

    # -------------------------------------------------------------- loading
    def load(self, last_exit_ok: bool, index_msg_timestamp: int, *, writable: bool = True) -> list[Path]:
        """Map the index files in name order.  After a crash, files whose end time
        is after the checkpoint's indexMsgTimestamp are not trusted: they are
        returned (for the caller to quarantine) instead of loaded."""
        dropped = []
        names = []
        try:
            names = sorted(n for n, is_file, _, _ in fsutil.scandir(self.directory) if is_file)
        except FileNotFoundError:
            pass
        names = [n for n in names if is_index_name(n)]
        paths, self.empty_file = fsutil.empty_last_file([self.directory / n for n in names], is_index_name)
        for name in (p.name for p in paths):
            f = IndexFile(self.directory / name, self.hash_slot_num, self.index_num, writable=writable)
            if not last_exit_ok and f.end_timestamp > index_msg_timestamp:
                f.close()
                dropped.append(self.directory / name)
                continue
            self.files.append(f)
        return dropped

    # -------------------------------------------------------------- writing
    def _last_file(self) -> IndexFile:
        if self.files and not self.files[-1].is_write_full():
            return self.files[-1]
        previous = self.files[-1] if self.files else None
        self.directory.mkdir(parents=True, exist_ok=True)
        now = self.clock.now_ms()
        path = self.directory / index_name(now)
        while path.exists():  # two rolls in one millisecond
            now += 1
            path = self.directory / index_name(now)
        f = IndexFile(path, self.hash_slot_num, self.index_num, create=True)
        if self.on_create is not None:
            self.on_create(path)
        if previous is not None:
            f.start_after(previous.end_phy_offset, previous.end_timestamp)
        self.files.append(f)
        if previous is not None:
            self._flush_full(previous)
        return f

    def _flush_full(self, f: IndexFile) -> None:
        f.flush()
        if f.is_write_full() and self.checkpoint is not None:
            self.checkpoint.index_msg_timestamp = f.end_timestamp
            self.checkpoint.flush()

    def build_index(self, req: DispatchRequest, key_hashes: list[int] | None = None) -> None:
        """IndexService.buildIndex for one dispatched record."""
        f = self._last_file()
        if req.commitlog_offset < f.end_phy_offset or not req.is_indexed:
            return
        keys = req.index_keys()
        for i, key in enumerate(keys):
            full_key = index_key(req.topic, key)
            key_hash = key_hashes[i] if key_hashes is not None else None
            while not f.put_key(full_key, req.commitlog_offset, req.store_timestamp, key_hash):
                f = self._last_file()

    def build_many(self, requests: list[DispatchRequest]) -> None:
        """build_index for a batch: all keys hashed at once, the header written once."""
        jobs = []
        for req in requests:
            if req.is_indexed:
                for key in req.index_keys():
                    jobs.append((index_key(req.topic, key), req))
        if not jobs:
            return
        hashes = index_key_hashes([k for k, _ in jobs])
        f = self._last_file()
        skip_below = f.end_phy_offset
        for (full_key, req), key_hash in zip(jobs, hashes):
            if req.commitlog_offset < skip_below:
                continue
            while not f.put_key(full_key, req.commitlog_offset, req.store_timestamp, key_hash,
                                write_header=False):
                f.write_header()
                f = self._last_file()
        f.write_header()

    def insert_arrays(self, hashes, phy_offsets, store_timestamps) -> None:
        """build_many for numpy columns of hashed keys, with the compiled insert."""
        import numpy as np

        from mqtool.native.appendkernels import insert_keys

        f = self._last_file()
        keep = phy_offsets >= f.end_phy_offset   # records indexed before are skipped
        if not keep.all():
            hashes, phy_offsets, store_timestamps = hashes[keep], phy_offsets[keep], store_timestamps[keep]
        first, n = 0, len(hashes)
        while first < n:
            header = np.array([f.begin_timestamp, f.end_timestamp, f.begin_phy_offset, f.end_phy_offset,
                               f.hash_slot_count, f.index_count], dtype=np.int64)
            first = insert_keys(np.frombuffer(f.buf, dtype=np.uint8), f.hash_slot_num, f.index_num, header,
                                first, n, hashes, phy_offsets, store_timestamps)
            (f.begin_timestamp, f.end_timestamp, f.begin_phy_offset, f.end_phy_offset, f.hash_slot_count,
             f.index_count) = (int(v) for v in header)
            f.write_header()
            f.drop_written_entries()
            if first < n:
                f = self._last_file()

    def flush(self) -> None:
        for f in self.files[-2:]:
            f.flush()

    # -------------------------------------------------------------- reading
    def query(self, topic: str, key: str, max_num: int, begin: int, end: int) -> list[int]:
        """IndexService.queryOffset: commitlog offsets whose index entry matches, newest file first."""
        return query_offsets(self.files, index_key(topic, key), min(max_num, self.max_msgs_num_batch),
                             begin, end)

    def close(self) -> None:
        for f in self.files:
            f.close()
        self.files = []
