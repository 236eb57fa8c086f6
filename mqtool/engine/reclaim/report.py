"""What a reclaim run decided, file by file (Decision), what it did to queues and consumers
(QueueChange, Loss), and the Report that `clean` prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mqtool.engine.reclaim.policy import DiskState, Levels

# decision actions
DELETE, STAGE, KEEP, REMOVE_STAGED, RESTORE, NOT_RESTORED = (
    "delete", "stage", "keep", "remove-staged", "restore", "not-restored")
ACTIONS_THAT_CHANGE = {DELETE, STAGE, REMOVE_STAGED, RESTORE}


# ---------------------------------------------------------------------- decisions and reports

@dataclass
class Decision:
    kind: str            # commitlog, consumequeue, index or trash
    file: str            # path relative to the store
    action: str          # delete, stage, keep, remove-staged, restore, not-restored
    reason: str          # a stable code (expired, outside-window, active, ...)
    why: str             # the same for people
    size: int = 0
    details: dict = field(default_factory=dict)
    target: object = field(default=None, repr=False)   # the MappedFile / IndexFile / Staged it is about
    hold_ms: int = 0     # stage: kept in the trash at least this long, whatever --delete-delay says

    def to_json(self) -> dict:
        return {"type": "decision", "kind": self.kind, "file": self.file, "action": self.action,
                "reason": self.reason, "why": self.why, "size": self.size, **self.details}


@dataclass
class QueueChange:
    topic: str
    queue_id: int
    min_before: int
    min_after: int
    files_removed: int = 0

    def to_json(self) -> dict:
        return {"type": "queue", "topic": self.topic, "queueId": self.queue_id,
                "minOffsetBefore": self.min_before, "minOffsetAfter": self.min_after,
                "messagesRemoved": max(0, self.min_after - self.min_before), "filesRemoved": self.files_removed}


@dataclass
class Loss:
    """Messages a consumer group had not read when they were removed."""

    group: str
    topic: str
    queue_id: int
    consumer_offset: int
    unread: int

    def to_json(self) -> dict:
        return {"type": "loss", "group": self.group, "topic": self.topic, "queueId": self.queue_id,
                "consumerOffset": self.consumer_offset, "unreadRemoved": self.unread}


@dataclass
class Report:
    """What a run did (or, dry, would do), and why."""

    operation: str                      # clean or undo
    dry_run: bool
    now_ms: int
    disk: DiskState
    levels: Levels
    delete_when: str
    window_open: bool
    min_offset_before: int
    min_offset_after: int = 0
    decisions: list[Decision] = field(default_factory=list)
    queues: list[QueueChange] = field(default_factory=list)
    losses: list[Loss] = field(default_factory=list)
    offsets_known: bool = False         # consumerOffset.json was there to tell consumed from not
    offsets_file: str = "config/consumerOffset.json"   # or lmqConsumerOffset.json (enableLmq)
    warnings: list[str] = field(default_factory=list)
    incomplete: bool = False            # undo: staged files that could not go back
    failed: int = 0                     # files that could not be deleted or staged (kept, reported)
    offsets_unreadable: bool = False    # consumerOffset.json is there but cannot be read
    timer: object = None                # timerview.Dangling: pending timer units whose records go
    timer_pending: dict | None = None   # timerview.summary: what the timer store will deliver

    def count(self, kind: str | None = None, actions=ACTIONS_THAT_CHANGE) -> int:
        return sum(1 for d in self.decisions if d.action in actions and (kind is None or d.kind == kind))

    @property
    def changed(self) -> bool:
        return self.count() > 0 or any(q.min_after != q.min_before for q in self.queues)

    @property
    def messages_removed(self) -> int:
        return sum(max(0, q.min_after - q.min_before) for q in self.queues)

    @property
    def unread_removed(self) -> int | None:
        return sum(l.unread for l in self.losses) if self.offsets_known else None

    def to_json(self) -> dict:
        return {"type": "summary", "operation": self.operation, "dryRun": self.dry_run, "now": self.now_ms,
                "disk": self.disk.to_json(),
                "levels": {"diskMaxUsedSpaceRatio": self.levels.max_used,
                           "diskSpaceWarningLevelRatio": self.levels.warning,
                           "diskSpaceCleanForciblyRatio": self.levels.force},
                "deleteWhen": self.delete_when, "inDeleteWhenHours": self.window_open,
                "commitlogMinOffset": {"before": self.min_offset_before, "after": self.min_offset_after},
                "deleted": self.count(actions={DELETE}), "staged": self.count(actions={STAGE}),
                "removedStaged": self.count(actions={REMOVE_STAGED}), "restored": self.count(actions={RESTORE}),
                "notRestored": self.count(actions={NOT_RESTORED}),
                "messagesRemoved": self.messages_removed, "unreadMessagesRemoved": self.unread_removed,
                "changed": self.changed, "warnings": self.warnings, "notes": self.levels.notes,
                "timerDangling": self.timer.to_json() if self.timer else None, "timer": self.timer_pending}
