"""A message on its way into the store (RocketMQ's MessageExtBrokerInner), and put results."""

from __future__ import annotations

from dataclasses import dataclass, field

from mqtool.engine.javamap import JavaHashMap, properties_to_string
from mqtool.formats.msgid import encode_offset_msgid
from mqtool.formats.properties import DELAY, delay_level

# PutMessageStatus names, as a producer sees them
PUT_OK = "PUT_OK"
FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
CREATE_MAPEDFILE_FAILED = "CREATE_MAPEDFILE_FAILED"
MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
UNKNOWN_ERROR = "UNKNOWN_ERROR"


@dataclass
class MessageInner:
    """What the broker hands to the store.

    properties is the broker's map: a JavaHashMap, or a dict whose insertion order
    stands for the order of the puts (javamap.java_order turns that into Java's
    iteration order).  properties_string is what the broker serialised from it,
    which the store writes unless it has to rewrite the properties itself (delayed
    messages); left out, it is serialised from properties.  store_timestamp None
    means "now" on the store's clock.
    """

    topic: str
    queue_id: int
    body: bytes
    properties: dict | JavaHashMap = field(default_factory=dict)
    properties_string: str | None = None
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: str = "127.0.0.1:0"
    store_host: str | None = None
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    store_timestamp: int | None = None
    verbatim: bool = False   # a stored record copied as it is (salvage): no delay rewrite

    def __post_init__(self):
        if self.properties_string is None:
            self.properties_string = properties_to_string(self.properties)

    @property
    def delay_level(self) -> int:
        return delay_level(self.properties.get(DELAY))


@dataclass(slots=True)
class PutResult:
    """A put's outcome, shaped like a producer's SendResult."""

    status: str
    wrote_offset: int = -1
    wrote_bytes: int = 0
    store_address: bytes = b""
    queue_offset: int = -1
    store_timestamp: int = 0
    topic: str | None = None
    queue_id: int = -1
    remark: str | None = None
    store_port: int = 0

    @property
    def ok(self) -> bool:
        return self.status == PUT_OK

    @property
    def msg_id(self) -> str | None:
        """The offset message id (store host + commitlog offset), made when asked for."""
        if self.wrote_offset < 0 or not self.store_address:
            return None
        return encode_offset_msgid(self.store_address, self.store_port, self.wrote_offset)

    def to_json(self) -> dict:
        out = {"status": self.status, "msgId": self.msg_id, "wroteOffset": self.wrote_offset,
               "wroteBytes": self.wrote_bytes, "queueOffset": self.queue_offset,
               "storeTimestamp": self.store_timestamp, "topic": self.topic, "queueId": self.queue_id}
        if self.remark:
            out["remark"] = self.remark
        return out
