"""The broker's config JSON files, as fastjson writes and reads them.

config/topics.json, consumerOffset.json, delayOffset.json and
subscriptionGroup.json are written by fastjson with PrettyFormat.  That is
not quite JSON: map keys that are not strings are written bare (`{0:12,1:3}`),
entries of such maps share one line and only the closing brace gets its own,
and indentation is by tabs.  `loads` reads that (and plain JSON); `dumps`
writes it back byte for byte for the shapes these files use.
"""

from __future__ import annotations

import json
import re

from mqtool.formats.multidispatch import LMQ_QUEUE_ID

CONFIG_FILES = ("topics.json", "consumerOffset.json", "delayOffset.json", "subscriptionGroup.json")

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_WORD = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_WS = " \t\n\r"


class ConfigJsonError(ValueError):
    def __init__(self, message: str, offset: int):
        super().__init__(f"{message} at character {offset}")
        self.reason = message
        self.offset = offset


def _number(text: str):
    """A number _NUMBER matched, as json reads it: an int, or a float with a fraction or exponent
    (int() directly for the offsets and ids that fill these files: json.loads costs 5 times more)."""
    if text.isdigit() and text.isascii():
        return int(text)
    return json.loads(text)


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def error(self, message: str):
        raise ConfigJsonError(message, self.pos)

    def skip(self):
        text, pos = self.text, self.pos
        while pos < len(text) and text[pos] in _WS:
            pos += 1
        self.pos = pos

    def value(self):
        self.skip()
        if self.pos >= len(self.text):
            self.error("unexpected end of input")
        ch = self.text[self.pos]
        if ch == "{":
            return self.obj()
        if ch == "[":
            return self.array()
        if ch == '"':
            return self.string()
        match = _NUMBER.match(self.text, self.pos)
        if match:
            self.pos = match.end()
            return _number(match.group())
        match = _WORD.match(self.text, self.pos)
        if match and match.group() in ("true", "false", "null"):
            self.pos = match.end()
            return {"true": True, "false": False, "null": None}[match.group()]
        self.error(f"unexpected {ch!r}")

    def string(self):
        try:
            value, self.pos = json.decoder.scanstring(self.text, self.pos + 1)
        except json.JSONDecodeError as exc:
            raise ConfigJsonError(exc.msg, exc.pos) from None
        return value

    def key(self):
        self.skip()
        if self.pos < len(self.text) and self.text[self.pos] == '"':
            return self.string()
        match = _NUMBER.match(self.text, self.pos)
        if match:
            self.pos = match.end()
            return _number(match.group())
        match = _WORD.match(self.text, self.pos)
        if match:
            self.pos = match.end()
            return match.group()
        self.error("expected a key")

    def expect(self, ch: str):
        self.skip()
        if self.text[self.pos:self.pos + 1] != ch:
            self.error(f"expected {ch!r}")
        self.pos += 1

    def obj(self):
        self.pos += 1
        result = {}
        self.skip()
        if self.text[self.pos:self.pos + 1] == "}":
            self.pos += 1
            return result
        while True:
            k = self.key()
            self.expect(":")
            result[k] = self.value()
            self.skip()
            ch = self.text[self.pos:self.pos + 1]
            self.pos += 1
            if ch == "}":
                return result
            if ch != ",":
                self.pos -= 1
                self.error("expected ',' or '}'")

    def array(self):
        self.pos += 1
        result = []
        self.skip()
        if self.text[self.pos:self.pos + 1] == "]":
            self.pos += 1
            return result
        while True:
            result.append(self.value())
            self.skip()
            ch = self.text[self.pos:self.pos + 1]
            self.pos += 1
            if ch == "]":
                return result
            if ch != ",":
                self.pos -= 1
                self.error("expected ',' or ']'")


def loads(text: str):
    """Parse fastjson output; bare numeric keys come back as ints."""
    parser = _Parser(text)
    try:
        value = parser.value()
    except RecursionError:
        raise ConfigJsonError("nested too deeply", parser.pos) from None
    parser.skip()
    if parser.pos != len(text):
        parser.error("trailing characters")
    return value


def _scalar(value) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value)


def _dump(value, depth: int, out: list[str]) -> None:
    if isinstance(value, dict):
        out.append("{")
        if not value:
            out.append("}")
            return
        indent = "\t" * (depth + 1)
        for i, (k, v) in enumerate(value.items()):
            if i:
                out.append(",")
            if isinstance(k, str):
                out.append("\n" + indent + json.dumps(k, ensure_ascii=False) + ":")
            else:  # fastjson's MapSerializer writes non-string keys bare, with no line break
                out.append(_scalar(k) + ":")
            _dump(v, depth + 1, out)
        out.append("\n" + "\t" * depth + "}")
    elif isinstance(value, list):
        out.append("[")
        if not value:
            out.append("]")
            return
        indent = "\t" * (depth + 1)
        for i, v in enumerate(value):
            if i:
                out.append(",")
            out.append("\n" + indent)
            _dump(v, depth + 1, out)
        out.append("\n" + "\t" * depth + "]")
    else:
        out.append(_scalar(value))


def dumps(value) -> str:
    """Write value the way fastjson's JSON.toJSONString(obj, true) does."""
    out: list[str] = []
    _dump(value, 0, out)
    return "".join(out)


def consumer_offsets(doc) -> dict[tuple[str, str], dict[int, int]]:
    """consumerOffset.json's offsetTable as {(topic, group): {queueId: offset}}; with
    lmqConsumerOffset.json's lmqOffsetTable ({"topic@group": offset}: an LMQ group reads queue 0
    of an LMQ queue) too.  A file of another shape raises ValueError saying what it should hold."""
    result = {}
    for key, queues in offset_table(doc, "offsetTable", '{"topic@group": {queueId: offset}}').items():
        topic, _, group = str(key).rpartition("@")
        result[(topic, group)] = whole_numbers(queues, f'offsetTable["{key}"]', "{queueId: offset}")
    lmq = offset_table(doc, "lmqOffsetTable", '{"topic@group": offset}')
    for key, offset in lmq.items():
        topic, _, group = str(key).rpartition("@")
        value = _whole(offset)
        if value is None:
            raise ValueError(f'lmqOffsetTable["{key}"] is {_shape(offset)}; it should be an offset (a whole number)')
        result[(topic, group)] = {LMQ_QUEUE_ID: value}   # the one queue an LMQ has
    return result


def offset_table(doc, name: str, should: str) -> dict:
    """doc[name] (absent or null: empty) of a config file that should be an object holding it."""
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ValueError(f"the file holds {_shape(doc)}; it should be an object with an {name}: {should}")
    table = doc.get(name)
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise ValueError(f"{name} is {_shape(table)}; it should be an object: {should}")
    return table


def whole_numbers(mapping, where: str, should: str) -> dict[int, int]:
    """{whole number: whole number} from a map of a config file (fastjson reads "12" and 12 alike);
    ValueError saying what it should hold otherwise."""
    if mapping is None:
        return {}
    if not isinstance(mapping, dict):
        raise ValueError(f"{where} is {_shape(mapping)}; it should be an object: {should}")
    out = {}
    for key, value in mapping.items():
        k, v = _whole(key), _whole(value)
        if k is None or v is None:
            raise ValueError(f"{where} holds {_scalar(key)}: {_shape(value)}; it should be {should}, whole numbers")
        out[k] = v
    return out


def _whole(value) -> int | None:
    """A whole number a broker's long holds (fastjson: an int, an integral float or digits), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif isinstance(value, str) and re.fullmatch(r"-?\d{1,19}", value.strip()):
        value = int(value)
    if isinstance(value, int) and -(1 << 63) <= value < (1 << 63):
        return value
    return None


def _shape(value) -> str:
    """What a JSON value is, in a sentence: `a list`, `the string "abc"`, ..."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the string {_scalar(value[:40])}"
    return _scalar(value)
