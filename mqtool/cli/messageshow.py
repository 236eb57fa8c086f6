"""How the lookup commands (get, lookup-by-key, lookup-by-id) print what they found (and the exit
status their problems give).

JSON: one `{"type":"message",...}` line per message (messageview.message_fields plus the
lookup's stable extra fields, `file`, `fileOffset`, `ok` and `problems`), a
`{"type":"problem",...}` line per problem (the shape dump uses), and a final
`{"type":"summary",...}`.  Tables: one row per message (the topic is in the title), or
one field/value table per message with `detail`; problems as marked lines; notes on stderr.
"""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from mqtool.cli import output
from mqtool.errors import ProblemsFound
from mqtool.forensics.lookup import Found
from mqtool.forensics.messageview import message_fields

BODY_CUT = 32


class MessageOutput:
    def __init__(self, title: str, as_json: bool, body_format: str | None, no_body: bool, *,
                 detail: bool = False):
        self.as_json = as_json
        self.body = None if no_body else (body_format or ("base64" if as_json else "text"))
        self.detail = detail
        self.table = None
        if not as_json and not detail:
            self.table = output.TableStream(title, [
                ("offset", {"justify": "right"}), ("queue", {"justify": "right"}),
                ("q-offset", {"justify": "right"}), ("store time (UTC)", {"no_wrap": True}),
                ("tags", {}), ("keys", {}),
                ("msgId", {"no_wrap": True, "min_width": 32}), ("uniqKey", {"no_wrap": True, "min_width": 32}),
                ("body", {"overflow": "ellipsis", "no_wrap": True, "max_width": BODY_CUT}), ("check", {})])

    def message(self, found: Found) -> None:
        fields = message_fields(found.record, body=self.body)
        if self.as_json:
            line = {"type": "message", **fields, **found.extra, "ok": found.ok}
            if found.problems:
                line["problems"] = [{"kind": k, "message": m} for k, m in found.problems]
            output.emit_json(line)
        elif self.detail:
            self._detail(fields, found)
        else:
            body = fields.get("bodyDecompressed", fields.get("body")) or ""
            if len(body) > BODY_CUT:
                body = body[:BODY_CUT - 1] + "…"
            check = "ok" if found.ok else ", ".join(k for k, _ in found.problems)
            self.table.add(fields["commitLogOffset"], fields["queueId"], fields["queueOffset"],
                           output.utc_time(fields["storeTimestamp"]), fields["tags"] or "", fields["keys"] or "",
                           fields["msgId"], fields["uniqKey"] or "", body.replace("\n", "⏎"), check)

    def _detail(self, fields: dict, found: Found) -> None:
        table = Table(title=f"message at commitlog offset {fields['commitLogOffset']}", show_header=False)
        table.add_column("field", style="bold")
        table.add_column("value", overflow="fold")
        for name, value in fields.items():
            if name in ("properties", "propertiesString"):
                continue
            if name.endswith("Timestamp") and value:
                value = f"{value} ({output.utc_time(value)})"
            table.add_row(name, Text("" if value is None else output.printable(str(value))))
        for name, value in found.extra.items():
            table.add_row(name, Text(output.printable(str(value))))
        for name, value in fields["properties"].items():
            table.add_row(Text(output.printable(f"property {name}")), Text(output.printable(value)))
        table.add_row("check", Text("ok" if found.ok else "; ".join(f"{k}: {m}" for k, m in found.problems)))
        output.stdout().print(table)

    def problem(self, problem) -> None:
        if self.as_json:
            output.emit_json(problem.to_json())
            return
        self.flush()
        where = problem.path if problem.offset is None else f"{problem.path} (offset {problem.offset})"
        output.stdout().print(f"[red]problem[/red] {escape(problem.kind)}: {escape(where)}: "
                              f"{escape(problem.message)}", highlight=False)

    def flush(self) -> None:
        if self.table is not None:
            self.table.flush()

    def finish(self, summary: dict, notes: list[str]) -> None:
        """The summary line (JSON), then the notes on stderr (in both modes: they explain
        an empty or partial answer, and stderr never mixes with the data)."""
        if self.as_json:
            output.emit_json(summary)
        self.flush()
        for note in notes:
            output.note(note)


def fail_on_problems(problems: list, bad_messages: list) -> None:
    """Exit 1 when anything failed a check, naming the first problem (as dump does)."""
    count = len(problems) + len(bad_messages)
    if not count:
        return
    if problems:
        first = problems[0]
        raise ProblemsFound(f"{first.kind}: {first.message} ({plural(count, 'problem')} found)",
                            path=first.path)
    kind, message = bad_messages[0].problems[0]
    raise ProblemsFound(f"message at offset {bad_messages[0].record.offset}: {kind}: {message} "
                        f"({plural(count, 'problem')} found)")


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
