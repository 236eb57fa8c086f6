"""The transaction op message: what says a half message is done (TransactionalMessageBridge
and TransactionalMessageServiceImpl.fillOpRemoveMap).

An op is a record of RMQ_SYS_TRANS_OP_HALF_TOPIC, in the queue with the half queue's id, tagged
"d" (REMOVE_TAG), whose body names half queue offsets: each followed by "," in 5.x, which
batches several halves in one op (TransactionalOpBatchService); 4.x wrote one offset and no
comma.  The broker reads the body as UTF-8, splits it at "," (Java's split: trailing empty
parts dropped) and takes each part through getLong, -1 when it is no number."""

from __future__ import annotations

from mqtool.formats.javastr import parse_java_integer

REMOVE_TAG = "d"
OFFSET_SEPARATOR = ","


def half_offsets(body: bytes) -> list[int]:
    """The half queue offsets an op's body names, in order (-1 for a part that is no number)."""
    parts = body.decode("utf-8", "replace").split(OFFSET_SEPARATOR)
    while parts and parts[-1] == "":
        parts.pop()
    values = (parse_java_integer(part) for part in parts)    # getLong: Long.parseLong, else -1
    return [-1 if value is None else value for value in values]
