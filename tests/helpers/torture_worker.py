"""Subprocess for the crash tests: appends with SYNC_FLUSH and prints every acknowledged put.

Usage: python torture_worker.py STORE START COUNT [dispatch-delay]
Each acknowledged message is printed as `ok <index> <offset> <queueOffset>` and flushed
at once, so the parent knows exactly which puts returned PUT_OK before it killed us.
"""

import sys

from mqtool.engine.javamap import JavaHashMap
from mqtool.engine.message import MessageInner
from mqtool.engine.store import MessageStore
from mqtool.storage.config import StoreConfig


def main() -> None:
    root, start, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    config = StoreConfig(storePathRootDir=root, mappedFileSizeCommitLog=64 * 1024,
                         mappedFileSizeConsumeQueue=20 * 50, maxHashSlotNum=64, maxIndexNum=256,
                         flushDiskType="SYNC_FLUSH")
    store = MessageStore(config).open()
    print("open", flush=True)
    for i in range(start, start + count):
        props = JavaHashMap()
        props.put("KEYS", f"key-{i}")
        props.put("TAGS", "T")
        msg = MessageInner(topic="Torture", queue_id=i % 3, body=(f"message {i} " * (1 + i % 40)).encode(),
                           properties=props, born_host="10.0.0.1:1234", born_timestamp=i)
        result = store.put(msg)
        if result.ok:
            print(f"ok {i} {result.wrote_offset} {result.queue_offset}", flush=True)
    store.close()
    print("done", flush=True)


if __name__ == "__main__":
    main()
