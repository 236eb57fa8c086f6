"""mqtool's row server: the Python half of format("rocketmq") in the JVM (spark/jvm/).

    python -m mqtool.pipeline.spark.rowserver SOCKET [WORKERS]

Spark's JVM starts one per driver or executor and asks it, over a Unix socket, for a schema,
which filters its reader takes, a plan (the partitions of a read) and a partition's rows.  Every
answer comes from the Python data source's own classes (sources.RocketMQDataSource and its
readers, through answers), so the two sources give the same rows; the JVM side only adds what
PySpark's Python data sources cannot have: column pruning and Spark's columnar batches.  The server loads mqtool
and its compiled kernels once, then forks WORKERS workers (the executor's cores; the CPUs it may
use by default) that answer connections one after another, as PySpark's own daemon reuses its
workers; when all are busy and a connection waits, it forks one more (a task may hold one
connection while it opens another).  It leaves, with its workers, when its stdin closes (the
JVM is gone) or on SIGTERM, and removes its socket.

A request is a 4-byte big-endian length and a JSON object; the answer is one byte, then:
'J' a length-prefixed JSON object, 'E' a length-prefixed error message (mqtool's own, as the
command line would print it), or 'A': an Arrow IPC stream, then 'K' (every row sent) or 'E' and
the message of the error that stopped the read.  Requests and JSON answers carry the protocol's
version, "v" (PROTOCOL): a request of another version is refused with one line that says so
(a driver and its executors that run different mqtool builds).  A plan's reader and parts are
plain JSON texts the JVM hands back unread with each read: the reader is the query (source,
options, columns, filters), a part the fields of a pipeline part (describe_part).
"""

from __future__ import annotations

import ctypes
import dataclasses
import gc
import json
import mmap
import os
import select
import signal
import socket
import struct
import sys
import threading
import time

from mqtool.errors import REFUSED, MqError
from mqtool.pipeline.local import default_jobs
from mqtool.pipeline.plan import CommitLogPart, QueuePart

_LENGTH = struct.Struct(">I")
_PR_SET_PDEATHSIG = 1


PROTOCOL = 2    # 1 was pickled parts, without a version; RowServer.java's PROTOCOL is the same number


class ProtocolError(MqError):
    """A peer of another protocol version, or a description this version cannot read."""

    exit_code = REFUSED


def _check_version(message: dict, what: str) -> None:
    if message.get("v") != PROTOCOL:
        raise ProtocolError(f"mqtool's row server speaks protocol {PROTOCOL}, and got {what} of protocol "
                            f"{message.get('v', 1)}: run the same mqtool on the driver and the executors")


def describe_part(part) -> str:
    """A pipeline part (plan.CommitLogPart or QueuePart) as JSON text: which of the two ("part")
    and its fields (a QueuePart has a field named kind: SimpleCQ or BatchCQ)."""
    kinds = {CommitLogPart: "commitlog", QueuePart: "queue"}
    return json.dumps({"v": PROTOCOL, "part": kinds[type(part)], **dataclasses.asdict(part)},
                      separators=(",", ":"))


def read_part(text: str):
    """describe_part's text as the part again (JSON lists back to the tuples they were)."""
    fields = json.loads(text)
    _check_version(fields, "a part")
    cls = {"commitlog": CommitLogPart, "queue": QueuePart}.get(fields.pop("part", None))
    del fields["v"]
    if cls is None:
        raise ProtocolError("mqtool's row server got a part of no kind it knows")
    return cls(**{k: tuple(tuple(x) if isinstance(x, list) else x for x in v) if isinstance(v, list) else v
                  for k, v in fields.items()})


def schema_of(request) -> dict:
    from mqtool.pipeline.spark import answers

    return {"ddl": answers.jvm_schema(request["source"], request["options"])}


def push(request) -> dict:
    """Which of the JVM's filters the reader takes (their indexes): Spark applies only the rest."""
    from mqtool.pipeline.spark import answers

    return {"taken": answers.jvm_push(request["source"], request["filters"])}


_QUERY = ("source", "options", "schema", "columns", "filters")


def plan(request) -> dict:
    """The reader of a query and its partitions, as JSON texts: the JVM hands them back, unread,
    with each partition's read."""
    from mqtool.pipeline.spark import answers

    _, parts = answers.jvm_plan(*(request[k] for k in _QUERY))
    reader = json.dumps({"v": PROTOCOL, **{k: request[k] for k in _QUERY}}, separators=(",", ":"))
    return {"reader": reader, "parts": [describe_part(p) for p in parts]}


def open_read(request):
    """(the partition's Arrow batches, their schema): what stream() sends.  The reader is made
    again from the query its description holds (as the plan made it, without its partitions)."""
    from mqtool.pipeline.spark import answers

    query = json.loads(request["reader"])
    _check_version(query, "a reader")
    reader = answers.jvm_reader(*(query[k] for k in _QUERY))
    return answers.jvm_read(reader, read_part(request["part"]))


def stream(batches, schema, out) -> None:
    """'A', the batches as one Arrow IPC stream (its schema first, even with no rows), then 'K',
    or 'E' and the message of what stopped the read: a failed read is never a short partition."""
    import pyarrow as pa

    out.write(b"A")
    failure = None
    with pa.ipc.new_stream(out, schema) as writer:
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                break
            except Exception as exc:  # noqa: BLE001 - reported to the JVM, which fails the task with it
                failure = _message(exc)
                break
            try:
                writer.write_batch(batch)
            except OSError:
                raise                     # the connection's own errors end the answer
            except Exception as exc:  # noqa: BLE001 - a batch that does not fit its schema: said, not lost
                failure = _message(exc)
                break
    out.write(b"K" if failure is None else _text(b"E", failure))


def _message(exc: Exception) -> str:
    return str(exc) if isinstance(exc, MqError) else f"{type(exc).__name__}: {exc}"


def _text(kind: bytes, text: str) -> bytes:
    body = text.encode("utf-8")
    return kind + _LENGTH.pack(len(body)) + body


def serve_one(conn) -> None:
    """Answer one connection."""
    with conn, conn.makefile("rb") as inp, conn.makefile("wb", buffering=1 << 18) as out:
        head = inp.read(_LENGTH.size)
        if len(head) < _LENGTH.size:
            return
        request = json.loads(inp.read(_LENGTH.unpack(head)[0]))
        try:
            _check_version(request, "a request")
            op = request["op"]
            if op == "read":
                batches, schema = open_read(request)
            else:
                answer = {"schema": schema_of, "push": push, "plan": plan}[op](request)
        except Exception as exc:  # noqa: BLE001 - the JVM shows it: an error, not a hung task
            out.write(_text(b"E", _message(exc)))
            return
        if op == "read":
            stream(batches, schema, out)
        else:
            out.write(_text(b"J", json.dumps({"v": PROTOCOL, **answer})))


_SLOTS = 1024                 # the most workers at once
_SPARE_SECONDS = 10.0         # how long a worker beyond the first ones stays idle before it leaves


def _worker(server, busy, slot: int, stays: bool) -> None:
    """A worker: answers connections one after another, marking its slot busy meanwhile.  One of
    the first workers stays for as long as the server runs; one added while all were busy leaves
    once idle for _SPARE_SECONDS (or, when another worker took the connection that woke it, after
    the next one: the listening socket is shared and blocking, so a lost race blocks in accept).
    A connection the JVM dropped halfway (a LIMIT, a cancelled task) costs its answer, not the
    worker."""
    try:
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)   # Linux: leave with the server
    except (AttributeError, OSError):
        pass
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    while True:
        if not stays and not select.select([server], [], [], _SPARE_SECONDS)[0]:
            return
        conn, _ = server.accept()
        busy[slot] = 1
        try:
            serve_one(conn)
        except OSError:
            pass
        finally:
            busy[slot] = 0


def _stop(workers, path: str) -> None:
    """Stop the workers, and remove the socket and the private directory the JVM made for it."""
    for pid in list(workers):          # a copy: the main thread may be adding or removing one
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    try:
        os.unlink(path)
        if os.path.basename(os.path.dirname(path)).startswith("mqtool-rows-"):
            os.rmdir(os.path.dirname(path))
    except OSError:
        pass
    os._exit(0)


def _leave_with_stdin(workers, path: str) -> None:
    """Stop when stdin reaches its end: the JVM that started this server is gone."""
    while sys.stdin.buffer.read(1 << 12):
        pass
    _stop(workers, path)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) not in (1, 2):
        print("usage: python -m mqtool.pipeline.spark.rowserver SOCKET [WORKERS]", file=sys.stderr)
        return 2
    path = argv[0]
    first = max(1, min(int(argv[1]) if len(argv) == 2 else default_jobs(), _SLOTS))
    ready = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)            # past "ready" nobody reads stdout: whatever prints there goes to stderr
    import pyarrow  # noqa: F401 - loaded once, before the forks

    from mqtool.native import columnar, fastscan
    from mqtool.pipeline.spark import answers  # noqa: F401

    fastscan.warm_up()                  # the compiled kernels, loaded here rather than in every worker
    columnar.warm_up()
    gc.freeze()                         # what is loaded now stays out of the workers' collections
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(256)
    busy = mmap.mmap(-1, _SLOTS)        # shared with the workers: busy[slot] while one answers
    workers: dict[int, int] = {}        # pid -> slot

    def start_worker(slot: int) -> None:
        pid = os.fork()
        if pid == 0:
            try:
                _worker(server, busy, slot, slot < first)
            finally:
                os._exit(0)
        workers[pid] = slot

    for slot in range(first):
        start_worker(slot)
    signal.signal(signal.SIGTERM, lambda *_: _stop(workers, path))
    threading.Thread(target=_leave_with_stdin, args=(workers, path), daemon=True).start()
    ready.write("ready\n")
    ready.close()
    while True:
        waiting = select.select([server], [], [], 0.5)[0]
        while workers:                  # a worker that died frees its slot; one of the first is replaced
            pid, _ = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            slot = workers.pop(pid, None)
            if slot is not None:
                busy[slot] = 0
                if slot < first:
                    start_worker(slot)
        if not waiting:
            continue
        if all(busy[slot] for slot in workers.values()) and len(workers) < _SLOTS:
            # every worker is answering and a connection waits (a task may hold one connection
            # while it opens another): one more worker, so that nobody waits on a busy one
            start_worker(min(set(range(_SLOTS)) - set(workers.values())))
        else:
            time.sleep(0.001)           # an idle worker is taking it


if __name__ == "__main__":
    sys.exit(main())
