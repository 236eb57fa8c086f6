"""Benchmark `mqtool track` and `mqtool transactions` on the 256 MiB bench store.

    python benchmarks/bench_track.py [--size 256M] [--journeys 2000] [--runs 5]

The store is storegen's (benchmarks/storegen.py: ~1 KiB messages on one topic), copied and opened
once by mqtool's engine (its recovery builds the consume queues and the index), then given
--journeys messages that travel as a broker moves them: a consumer's send-back through
SCHEDULE_TOPIC_XXXX into %RETRY%group and on to %DLQ%group, and as many transactions (half, a check's
copy of some, an op, the committed copy of most), with a consumerOffset.json; cached under
benchmarks/.work.  Measured, as medians of --runs interleaved child processes from a warm page
cache: `mqtool --version` (start-up), `track MSGID --json` for a message with four hops (sent, retry-scheduled, retry, dead-letter), `track
--topic --key` and `transactions --json`; each command's time beyond start-up is its time less
--version's.  Target: under 0.3 s beyond start-up for each (issue 30).  In process, the library
calls alone (journey.track, transactions.list_transactions).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import storegen  # noqa: E402

TARGET_S = 0.3
TOPIC = "Orders"


def build(root: Path, size: int, journeys: int) -> None:
    from mqtool.engine.message import MessageInner
    from mqtool.engine.store import MessageStore
    from mqtool.formats import sysflag
    from mqtool.storage.config import StoreConfig

    source, _ = storegen.ensure_store(size)
    shutil.rmtree(root, ignore_errors=True)
    subprocess.run(["cp", "-r", "--sparse=always", str(source), str(root)], check=True)
    config = StoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=storegen.DEFAULT_FILE_SIZE)
    host = "10.0.0.9:9000"
    with MessageStore(config) as store:
        for start in range(0, journeys, 500):
            batch = range(start, min(journeys, start + 500))
            sent = store.put_many([MessageInner(TOPIC, i % 4, b"order %d" % i, born_host=host,
                                                properties={"UNIQ_KEY": f"A{i:031X}", "KEYS": f"order-{i}"})
                                   for i in batch])
            moves = []
            for i, put in zip(batch, sent):
                common = {"UNIQ_KEY": f"A{i:031X}", "KEYS": f"order-{i}", "ORIGIN_MESSAGE_ID": put.msg_id,
                          "RETRY_TOPIC": TOPIC, "REAL_TOPIC": "%RETRY%billing", "REAL_QID": "0"}
                moves.append(MessageInner("SCHEDULE_TOPIC_XXXX", 2, b"order %d" % i, born_host=host,
                                          properties={**common, "DELAY": "3"}, reconsume_times=1, verbatim=True))
                moves.append(MessageInner("%RETRY%billing", 0, b"order %d" % i, born_host=host,
                                          properties={**common, "DELAY": "3"}, reconsume_times=1, verbatim=True))
                moves.append(MessageInner("%DLQ%billing", 0, b"order %d" % i, born_host=host,
                                          properties=dict(common), reconsume_times=2, verbatim=True))
            store.put_many(moves)
            halves = store.put_many([MessageInner("RMQ_SYS_TRANS_HALF_TOPIC", 0, b"pay %d" % i, born_host=host,
                                                  properties={"UNIQ_KEY": f"B{i:031X}", "KEYS": f"pay-{i}",
                                                              "TRAN_MSG": "true", "PGROUP": "txProducer",
                                                              "REAL_TOPIC": "Payments", "REAL_QID": str(i % 2)})
                                     for i in batch])
            ends, ops = [], []
            for i, half in zip(batch, halves):
                if i % 10 == 9:
                    continue                     # pending: neither a commit nor an op
                if i % 10 != 8:                  # committed (8: rolled back, an op alone)
                    ends.append(MessageInner("Payments", i % 2, b"pay %d" % i, born_host=host,
                                             sys_flag=sysflag.TRANSACTION_COMMIT,
                                             prepared_transaction_offset=half.wrote_offset,
                                             properties={"UNIQ_KEY": f"B{i:031X}", "KEYS": f"pay-{i}",
                                                         "TRAN_MSG": "true", "PGROUP": "txProducer"}))
                ops.append(half.queue_offset)
            store.put_many(ends)
            # ops batched as 5.x's TransactionalOpBatchService writes them: several offsets a body
            for k in range(0, len(ops), 8):
                body = "".join(f"{o}," for o in ops[k:k + 8]).encode()
                store.put(MessageInner("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0, body, born_host=host,
                                       properties={"TAGS": "d", "WAIT": "true"}))
    offsets = {"offsetTable": {f"{TOPIC}@billing": {str(q): 10 for q in range(4)},
                               "%RETRY%billing@billing": {"0": 5},
                               "RMQ_SYS_TRANS_HALF_TOPIC@CID_RMQ_SYS_TRANS": {"0": 0},
                               "RMQ_SYS_TRANS_OP_HALF_TOPIC@CID_RMQ_SYS_TRANS": {"0": 0}}}
    (root / "config").mkdir(exist_ok=True)
    (root / "config" / "consumerOffset.json").write_text(json.dumps(offsets))
    root.with_name(root.name + ".complete").write_text(str(journeys))


def wall(argv: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    took = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.decode()[-400:]}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=storegen.parse_size, default=storegen.parse_size("256M"))
    parser.add_argument("--journeys", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    args, _ = parser.parse_known_args()
    root = HERE / ".work" / f"track-{storegen.format_size(args.size)}-{args.journeys}"
    if not root.with_name(root.name + ".complete").exists():
        print(f"building {root} ...", flush=True)
        started = time.perf_counter()
        build(root, args.size, args.journeys)
        print(f"  built in {time.perf_counter() - started:.1f} s", flush=True)
    mqtool = str(Path(sys.executable).with_name("mqtool"))
    middle = args.journeys // 2
    uniq = f"A{middle:031X}"
    commands = {
        "--version": [mqtool, "--version"],
        "track MSGID": [mqtool, "track", str(root), uniq, "--json", "--no-progress"],
        "track --topic --key": [mqtool, "track", str(root), "--topic", TOPIC, "--key", f"order-{middle}", "--json",
                                "--no-progress"],
        "transactions": [mqtool, "transactions", str(root), "--json"],
    }
    for argv in commands.values():      # warm: page cache, numba's cache
        wall(argv)
    times = {name: [] for name in commands}
    for _ in range(args.runs):          # interleaved, so load moves every command alike
        for name, argv in commands.items():
            times[name].append(wall(argv))
    median = {name: statistics.median(t) for name, t in times.items()}
    print(f"store {root.name}: {args.size >> 20} MiB of storegen records + {args.journeys} retry journeys and "
          f"{args.journeys} transactions; medians of {args.runs} interleaved runs, load {_load()}")
    base = median["--version"]
    print(f"  {'--version (start-up)':<24} {base:6.3f} s")
    verdict = 0
    for name in ("track MSGID", "track --topic --key", "transactions"):
        beyond = median[name] - base
        ok = beyond < TARGET_S
        verdict |= not ok
        print(f"  {name:<24} {median[name]:6.3f} s   beyond start-up {beyond:6.3f} s   target < {TARGET_S} s  "
              f"{'PASS' if ok else 'FAIL'}")
    in_process(root, uniq)
    return 0


def in_process(root: Path, uniq: str) -> None:
    from mqtool.forensics.journey import track
    from mqtool.forensics.lookup import StoreReader
    from mqtool.forensics.transactions import list_transactions
    from mqtool.storage.settings import open_layout

    layout = open_layout(str(root), None, ())
    now = int(time.time() * 1000)
    with StoreReader(layout) as reader:
        started = time.perf_counter()
        result = track(reader, layout, now, msgid=uniq)
        took_track = time.perf_counter() - started
        started = time.perf_counter()
        report = list_transactions(reader, layout, now)
        took_tx = time.perf_counter() - started
    hops = sum(len(j.hops) for j in result.journeys)
    print(f"  in process: journey.track {took_track * 1e3:7.1f} ms ({hops} hops, {result.source}); "
          f"list_transactions {took_tx * 1e3:7.1f} ms ({len(report.transactions)} transactions, {report.ops} ops)")


def _load() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
