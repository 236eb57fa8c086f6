"""The columns of the pipeline's rows, in order, with their Spark SQL types: a commitlog row
(location, the message's fields, its dispatch, optionally its body, its checks) and a consume
queue row.  The message columns are messageview.message_fields' stable names (the same as
dump --json), so every engine and every writer names a column alike.
"""

from __future__ import annotations

PROBLEMS_TYPE = "array<struct<kind:string,message:string>>"
LOCATION_COLUMNS = [("broker", "string"), ("store", "string"), ("file", "string"), ("fileOffset", "bigint")]
MESSAGE_COLUMNS = [
    ("topic", "string"), ("queueId", "int"), ("queueOffset", "bigint"), ("commitLogOffset", "bigint"),
    ("physicalOffset", "bigint"), ("storeSize", "int"), ("magicCode", "string"), ("version", "int"),
    ("bodyCRC", "int"), ("bodyCRCRecomputed", "int"), ("flag", "int"), ("sysFlag", "int"),
    ("sysFlagText", "string"), ("bornTimestamp", "bigint"), ("bornHost", "string"),
    ("storeTimestamp", "bigint"), ("storeHost", "string"), ("reconsumeTimes", "int"),
    ("preparedTransactionOffset", "bigint"), ("tags", "string"), ("keys", "string"),
    ("properties", "map<string,string>"), ("propertiesString", "string"), ("bodyLength", "int"),
    ("msgId", "string"), ("uniqKey", "string"),
]
DISPATCH_COLUMNS = [("tagsCode", "bigint"), ("dispatchedToConsumeQueue", "boolean")]
BODY_COLUMN = ("body", "binary")
CHECK_COLUMNS = [("ok", "boolean"), ("problems", PROBLEMS_TYPE)]

CQ_COLUMNS = [
    ("broker", "string"), ("store", "string"), ("file", "string"), ("fileOffset", "bigint"),
    ("topic", "string"), ("queueId", "int"), ("queueOffset", "bigint"), ("commitLogOffset", "bigint"),
    ("size", "int"), ("tagsCode", "bigint"), ("ok", "boolean"), ("cqType", "string"), ("batchSize", "int"),
]


def columns(with_body: bool = False) -> list[tuple[str, str]]:
    """The commitlog row columns; `body` (the stored bytes) only when asked for."""
    return (LOCATION_COLUMNS + MESSAGE_COLUMNS + DISPATCH_COLUMNS + ([BODY_COLUMN] if with_body else [])
            + CHECK_COLUMNS)


def ddl(cols) -> str:
    """A Spark DDL schema string for columns."""
    return ", ".join(f"`{name}` {kind}" for name, kind in cols)
