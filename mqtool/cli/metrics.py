"""`--prometheus FILE`: a command's results as metrics in node_exporter's textfile collector format.

The file is written whole to a temporary file beside it (its name does not end in .prom, so the
collector never reads it) and renamed over FILE, so a scrape never reads half a file.  Every file
says which command wrote it, for which store and when (`mqtool_last_run_timestamp_seconds`):
"seconds since the last verify" is `time() - mqtool_last_run_timestamp_seconds{command="verify-crc"}`
in PromQL.  One function per command turns its results into metric families.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

from mqtool.errors import UsageError

GAUGE, COUNTER = "gauge", "counter"


class Metrics:
    """Metric families in the order they are added; each sample a (labels, value)."""

    def __init__(self, command: str, store):
        """store: a store's path, or the paths of several (joined with commas); the label is the
        absolute path, so a run from another directory adds to the same series."""
        paths = store if isinstance(store, (list, tuple)) else [store]
        self.command, self.store = command, ",".join(os.path.abspath(os.fspath(p)) for p in paths)
        self.families: dict[str, tuple[str, str, list]] = {}
        self.add("mqtool_last_run_timestamp_seconds", "When mqtool last ran this command on this store "
                 "(Unix time).", {}, round(time.time(), 3))

    def add(self, name: str, help_text: str, labels: dict, value, kind: str = GAUGE) -> None:
        if value is None:
            return
        family = self.families.setdefault(name, (help_text, kind, []))
        family[2].append(({"store": self.store, "command": self.command, **labels}, value))

    def text(self) -> str:
        out = []
        for name, (help_text, kind, samples) in self.families.items():
            out.append(f"# HELP {name} {_escape_help(help_text)}")
            out.append(f"# TYPE {name} {kind}")
            for labels, value in samples:
                body = ",".join(f'{k}="{_escape_label(str(v))}"' for k, v in labels.items())
                out.append(f"{name}{{{body}}} {_number(value)}")
        return "\n".join(out) + "\n"


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
    return repr(value) if isinstance(value, float) else str(int(value))


def write(path, metrics: Metrics) -> None:
    """FILE written through a temporary file in its directory and renamed over it."""
    replace_file(path, metrics.text().encode("utf-8"), "--prometheus")


def replace_file(path, data: bytes, option: str) -> None:
    """An output file (--prometheus, report's --output) written whole or not at all: a temporary
    file in its directory, synced, then renamed over it; a reader never sees half of it."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise UsageError(f"{option} {path}: {directory} is not a directory")
    tmp = directory / f".{path.name}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise UsageError(f"{option} {path}: cannot write it: {exc.strerror or exc}") from None


# ---------------------------------------------------------------------- per command

def _problems(m: Metrics, by_kind: dict) -> None:
    """Problems by kind (a series per kind: sum() adds them up) and, under a name of its own,
    their total, there even when it is 0."""
    m.add("mqtool_problems_found", "Problems found in the store, all kinds together.", {}, sum(by_kind.values()))
    for kind, count in sorted(by_kind.items()):
        m.add("mqtool_problems", "Problems found in the store, by kind.", {"kind": kind}, count)


def info_metrics(store, info: dict) -> Metrics:
    m = Metrics("info", store)
    for kind in ("commitlog", "consumequeue", "index"):
        m.add("mqtool_store_bytes", "Bytes of the store's files, by kind.", {"kind": kind}, info[kind]["bytes"])
        m.add("mqtool_store_files", "The store's files, by kind.", {"kind": kind}, info[kind]["files"])
    timer = [entry for entry in info["census"] if entry["feature"] == "timer"]    # timerwheel, timerlog/, ...
    if timer:
        m.add("mqtool_store_bytes", "Bytes of the store's files, by kind.", {"kind": "timer"},
              sum(entry["bytes"] for entry in timer))
        m.add("mqtool_store_files", "The store's files, by kind.", {"kind": "timer"},
              sum(entry["files"] for entry in timer))
    if info.get("timer"):
        m.add("mqtool_timer_pending_messages", "Timer messages the 5.x timer store will deliver (recalled ones "
              "left out).", {}, info["timer"]["pending"])
    cl = info["commitlog"]
    m.add("mqtool_commitlog_min_offset_bytes", "The commitlog's minimum offset (bytes).", {}, cl.get("minOffset"))
    m.add("mqtool_commitlog_max_offset_bytes", "The commitlog's maximum offset: the end of the written data "
          "(bytes).", {}, cl.get("maxOffset"))
    if cl.get("lastStoreTimestamp"):
        m.add("mqtool_last_message_timestamp_seconds", "Store time of the newest message (Unix time).", {},
              cl["lastStoreTimestamp"] / 1000)
    per_topic: dict[str, int] = {}
    for q in info["queues"]:
        per_topic[q["topic"]] = per_topic.get(q["topic"], 0) + max(0, q["maxOffset"] - q["minOffset"])
    for topic, messages in sorted(per_topic.items()):
        m.add("mqtool_queue_messages", "Messages a topic's queues index (their max - min offsets; an inner "
              "batch counts its messages).", {"topic": topic}, messages)
    m.add("mqtool_clean_shutdown", "1 when the last shutdown was clean (no abort file).", {}, info["cleanShutdown"])
    m.add("mqtool_lock_held", "1 when a live process holds the store's lock.", {}, info["lock"]["held"])
    _problems(m, {"info": len(info["problems"])} if info["problems"] else {})
    return m


def stats_metrics(stores, lines: list[dict]) -> Metrics:
    m = Metrics("stats", list(stores))
    for line in lines:
        if line["type"] == "topic":
            labels = {"broker": line.get("broker", ""), "topic": line["topic"]}
            m.add("mqtool_topic_messages", "Valid messages per topic in the commitlog, as the broker counts them "
                  "(an inner batch: its INNER_NUM messages).", labels, line["messages"])
            m.add("mqtool_topic_records", "Valid commitlog records per topic (an inner batch is one).", labels,
                  line["records"])
            m.add("mqtool_topic_bytes", "Bytes (storeSize) of the valid messages per topic.", labels, line["bytes"])
            if line.get("lastStoreTimestamp"):
                m.add("mqtool_topic_last_message_timestamp_seconds", "Store time of a topic's newest message.",
                      labels, line["lastStoreTimestamp"] / 1000)
        elif line["type"] == "store":
            labels = {"broker": line.get("broker", "")}
            m.add("mqtool_store_records", "Commitlog records read, damaged ones included.", labels, line["records"])
            m.add("mqtool_store_damaged_records", "Commitlog records that failed a check.", labels,
                  line["damagedRecords"])
    total = lines[-1]
    m.add("mqtool_messages", "Valid messages in all stores.", {}, total["messages"])
    m.add("mqtool_bytes", "Bytes of the valid messages in all stores.", {}, total["bytes"])
    by_kind: dict = {}
    for line in lines:
        if line["type"] == "store":
            for kind, count in line["problemKinds"].items():
                by_kind[kind] = by_kind.get(kind, 0) + count
    _problems(m, by_kind)
    return m


def verify_metrics(store, summary: dict) -> Metrics:
    m = Metrics("verify-crc", store)
    m.add("mqtool_verify_ok", "1 when the last verify-crc found nothing wrong.", {}, summary["problems"] == 0)
    m.add("mqtool_verify_bytes", "Bytes the last verify-crc checked.", {}, summary["bytes"])
    m.add("mqtool_verify_records", "Commitlog records the last verify-crc checked.", {}, summary["records"])
    m.add("mqtool_verify_duration_seconds", "How long the last verify-crc's checks took.", {}, summary["seconds"])
    by_kind = dict(summary["problemsByKind"])
    extra = summary["problems"] - sum(by_kind.values())
    if extra > 0:
        by_kind["store"] = by_kind.get("store", 0) + extra
    _problems(m, by_kind)
    return m


def clean_metrics(store, report) -> Metrics:
    m = Metrics("clean", store)
    freed = sum(d.size for d in report.decisions if d.action in ("delete", "remove-staged"))
    staged = sum(d.size for d in report.decisions if d.action == "stage")
    m.add("mqtool_clean_dry_run", "1 when the run was a dry run (nothing changed).", {}, report.dry_run)
    m.add("mqtool_clean_freed_bytes", "Bytes the run deleted (files removed, staged files removed).", {}, freed)
    m.add("mqtool_clean_staged_bytes", "Bytes the run moved to the trash (freed when their delay passes).", {},
          staged)
    for kind in ("commitlog", "consumequeue", "batchconsumequeue", "index"):
        m.add("mqtool_clean_files_removed", "Files the run deleted or staged, by kind.", {"kind": kind},
              report.count(kind))
    m.add("mqtool_clean_messages_removed", "Messages the run removed from the queues.", {}, report.messages_removed)
    # per group only: a message two groups had not read is two groups' loss, so no sum over groups
    m.add("mqtool_clean_consumer_offsets_known", "1 when the consumer offsets were read, so the unread "
          "messages removed per group are known (0: none are given).", {}, report.unread_removed is not None)
    per_group: dict[str, int] = {}
    for loss in report.losses:
        per_group[loss.group] = per_group.get(loss.group, 0) + loss.unread
    for group, unread in sorted(per_group.items()):
        m.add("mqtool_clean_unread_messages_removed", "Messages removed that a consumer group had not read, per "
              "group.", {"group": group}, unread)
    if report.disk.known:
        m.add("mqtool_disk_used_ratio", "The fuller of the commitlog's and the consume queues' disks (0..1).",
              {}, report.disk.ratio)
    for name, value in (("diskMaxUsedSpaceRatio", report.levels.max_used),
                        ("diskSpaceCleanForciblyRatio", report.levels.force),
                        ("diskSpaceWarningLevelRatio", report.levels.warning)):
        m.add("mqtool_disk_level_ratio", "The broker's disk levels (0..1).", {"level": name}, value)
    m.add("mqtool_clean_failed_files", "Files that could not be deleted or staged.", {}, report.failed)
    return m


def lag_metrics(store, report) -> Metrics:
    m = Metrics("lag", store)
    for g in report.groups():
        labels = {"group": g.group}
        m.add("mqtool_consumer_lag_messages", "Messages a consumer group has not consumed yet.", labels,
              g.lag_messages)
        m.add("mqtool_consumer_lag_bytes", "Bytes of the messages a consumer group has not consumed yet.", labels,
              g.lag_bytes)
        if g.oldest_unconsumed is not None:
            m.add("mqtool_consumer_oldest_unconsumed_timestamp_seconds",
                  "Store time of the oldest message a group has not consumed (Unix time).", labels,
                  g.oldest_unconsumed / 1000)
        m.add("mqtool_consumer_offsets_out_of_range", "A group's offsets below its queue's min or above its max.",
              labels, g.out_of_range)
        m.add("mqtool_consumer_skipped_messages", "Messages deleted before the group read them.", labels, g.skipped)
        m.add("mqtool_consumer_queues_never_committed", "Queues of a group's topics it holds no offset of.",
              labels, g.never_committed)
    for d in report.delays:
        m.add("mqtool_delay_lag_messages", "Delayed messages the delay scheduler has not delivered, per level.",
              {"level": str(d.level)}, d.lag_messages)
    _problems(m, {"lag": len(report.problems)} if report.problems else {})
    return m
