"""The message properties string: name 0x01 value, pairs joined by 0x02.

Decoding follows MessageDecoder.string2messageProperties exactly: a pair
shorter than 3 characters, with an empty name or an empty value is skipped,
and a later duplicate name wins.  Encoding follows messageProperties2String:
4.x drops the final 0x02, 5.x keeps it.
"""

from __future__ import annotations

from mqtool.formats.javastr import parse_java_integer

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

# Property names the store and broker give meaning to (MessageConst).
KEYS = "KEYS"
TAGS = "TAGS"
UNIQ_KEY = "UNIQ_KEY"
DELAY = "DELAY"
WAIT = "WAIT"
CLUSTER = "CLUSTER"
REAL_TOPIC = "REAL_TOPIC"
REAL_QID = "REAL_QID"
TRAN_MSG = "TRAN_MSG"
PGROUP = "PGROUP"
TRANSACTION_ID = "__transactionId__"
TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"  # a half put back by the broker's check: the Nth check
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"   # a consumer's send-back: the msgId of the message first sent
RETRY_TOPIC = "RETRY_TOPIC"               # a consumer's send-back: the topic the message was first sent to
TIMER_OUT_MS = "TIMER_OUT_MS"             # a 5.x timer message: when it falls due
TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"     # a timer message the timer store delivered
TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"   # a recall: REAL_TOPIC + "+" + the UNIQ_KEY it deletes
CRC32 = "__CRC32#"
KEY_SEPARATOR = " "


def decode_properties(text: str) -> dict[str, str]:
    """Parse a properties string the way the broker does."""
    result: dict[str, str] = {}
    length = len(text)
    index = 0
    while index < length:
        end = text.find(PROPERTY_SEPARATOR, index)
        if end < 0:
            end = length
        if end - index >= 3:
            sep = text.find(NAME_VALUE_SEPARATOR, index)
            if index < sep < end - 1:
                result[text[index:sep]] = text[sep + 1:end]
        index = end + 1
    return result


def delay_level(text: str | None) -> int:
    """Message.getDelayTimeLevel for a DELAY value: Integer.parseInt's number, 0 without one.
    Where Integer.parseInt throws (a space, an underscore, out of int's range, no number), the
    broker's put fails and its dispatch of such a record to SCHEDULE_TOPIC_XXXX fails
    (CommitLog.checkMessageAndReturnSize); mqtool reads it as no delay, 0."""
    if text is None:
        return 0
    level = parse_java_integer(text, 32)
    return 0 if level is None else level


def encode_properties(pairs, *, trailing_separator: bool = False) -> str:
    """Serialise (name, value) pairs in the order given; None values are skipped."""
    items = pairs.items() if hasattr(pairs, "items") else pairs
    parts = [f"{name}{NAME_VALUE_SEPARATOR}{value}" for name, value in items if value is not None]
    if not parts:
        return ""
    text = PROPERTY_SEPARATOR.join(parts)
    return text + PROPERTY_SEPARATOR if trailing_separator else text


def split_keys(keys: str | None) -> list[str]:
    """KEYS as the index service splits them: on single spaces, empty pieces dropped."""
    if not keys:
        return []
    return [k for k in keys.split(KEY_SEPARATOR) if k]
