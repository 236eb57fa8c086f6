"""The compiled append path writes exactly what the reference path writes."""

from __future__ import annotations

import hashlib
import random

import pytest

from mqtool.engine import store as store_module
from mqtool.engine.clock import ManualClock
from mqtool.engine.message import MessageInner
from mqtool.engine.store import MessageStore
from mqtool.formats import sysflag
from mqtool.storage.config import StoreConfig


def random_messages(seed: int, count: int, five: bool) -> list[MessageInner]:
    rng = random.Random(seed)
    topics = ["Orders", "Pay_ments", "%RETRY%group", "A" * (200 if five else 127)]
    hosts = ["10.0.0.1:1000", "192.0.2.7:65535", "[2001:db8::42]:61001", "[::ffff:10.1.2.3]:7"]
    messages = []
    for i in range(count):
        props = {}
        if rng.random() < 0.8:
            props["TAGS"] = rng.choice(["TagA", "TagB", "日本||Ελλάδα"])
        if rng.random() < 0.9:
            props["KEYS"] = " ".join(f"k{rng.randrange(50)}" for _ in range(rng.randrange(1, 4)))
        if rng.random() < 0.5:
            props["UNIQ_KEY"] = f"{rng.getrandbits(128):032X}"
        if rng.random() < 0.2:
            props["user-prop"] = "v" * rng.randrange(0, 40)
        flag = rng.choice([0, 0, 0, sysflag.MULTI_TAGS, sysflag.TRANSACTION_PREPARED,
                           sysflag.TRANSACTION_COMMIT, sysflag.TRANSACTION_ROLLBACK])
        body = rng.randbytes(rng.choice([0, 1, 100, 1000, 5000]))
        messages.append(MessageInner(
            topic=rng.choice(topics), queue_id=rng.randrange(4), body=body, properties=props,
            flag=rng.randrange(-5, 5), sys_flag=flag, born_timestamp=1700000000000 + i,
            born_host=rng.choice(hosts), reconsume_times=rng.randrange(3),
            prepared_transaction_offset=rng.randrange(0, 10000),
            store_timestamp=1795305900000 + i * 7))
    return messages


def write(root, messages, batch: int, five: bool):
    config = StoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=64 * 1024,
                         mappedFileSizeConsumeQueue=20 * 40, maxHashSlotNum=16, maxIndexNum=64,
                         storeFormat="5" if five else "4")
    with MessageStore(config, clock=ManualClock(1795305900000)) as store:
        results = []
        for i in range(0, len(messages), batch):
            results.extend(store.put_many(messages[i:i + batch]))
    return [(r.status, r.wrote_offset, r.wrote_bytes, r.queue_offset, r.msg_id, r.topic, r.queue_id)
            for r in results]


def digest(root):
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_file() and rel.split("/")[0] in ("commitlog", "consumequeue", "index"):
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.mark.parametrize("seed,five", [(1, False), (2, False), (3, True), (4, False)])
def test_compiled_batches_write_the_same_files_as_the_reference(seed, five, tmp_path, monkeypatch):
    count = 700
    fast = write(tmp_path / "fast", random_messages(seed, count, five), batch=256, five=five)
    monkeypatch.setattr(store_module, "FAST_BATCH", 10**9)   # force the reference path
    slow = write(tmp_path / "slow", random_messages(seed, count, five), batch=256, five=five)
    assert fast == slow
    fast_files, slow_files = digest(tmp_path / "fast"), digest(tmp_path / "slow")
    assert len([f for f in fast_files if f.startswith("commitlog/")]) > 3     # files rolled
    assert len([f for f in fast_files if f.startswith("index/")]) > 3
    assert fast_files == slow_files


def test_a_batch_with_a_delayed_message_takes_the_reference_path(tmp_path):
    messages = random_messages(5, 100, False)
    messages[50].properties["DELAY"] = "3"
    messages[50].properties_string = None
    messages[50].__post_init__()
    results = write(tmp_path / "s", messages, batch=100, five=False)
    assert results[50][5] == "SCHEDULE_TOPIC_XXXX" and results[50][6] == 2
