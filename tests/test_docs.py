"""The docs stay true: a page per command whose Options section lists exactly what the command's
--help lists, every page reachable from README.md, and every relative link leading to a file."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from mqtool.cli.main import cli

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def _help_options(command: click.Command) -> set[str]:
    parent = click.Context(cli, info_name="mqtool", **cli.context_settings)     # -h, as the group sets it
    ctx = click.Context(command, info_name=command.name, parent=parent)
    found = set()
    for param in command.get_params(ctx):
        if isinstance(param, click.Option) and not param.hidden:     # a deprecated alias is not shown
            found.update(param.opts + param.secondary_opts)
    return found


def _page_options(page: Path) -> set[str]:
    text = page.read_text(encoding="utf-8")
    section = text[text.index("\n## Options\n"):]
    section = section[: section.find("\n## ", 1)] if "\n## " in section[1:] else section
    return {o for line in section.splitlines() if line.startswith("- ") for o in re.findall(r"`(-[^`\s]+)`", line)}


NAMES = cli.list_commands(click.Context(cli))


@pytest.mark.parametrize("name", NAMES)
def test_every_command_has_a_page_listing_its_options(name):
    page = DOCS / "commands" / f"{name}.md"
    assert page.is_file(), f"docs/commands/{name}.md is missing"
    assert _page_options(page) == _help_options(cli.get_command(None, name)), \
        f"docs/commands/{name}.md's Options differ from `mqtool {name} --help`"


def _page_choices(page: Path) -> dict[str, list[str]]:
    """{option: the values its line lists as (`a`|`b`) after the option's names}."""
    text = page.read_text(encoding="utf-8")
    found = {}
    for m in re.finditer(r"^- ((?:`-[^`\s]+`(?:, )?)+)(?: \(((?:`[^`]+`\|?)+)\))?", text, re.M):
        values = re.findall(r"`([^`]+)`", m.group(2) or "")
        for option in re.findall(r"`(-[^`\s]+)`", m.group(1)):
            found[option] = values
    return found


@pytest.mark.parametrize("name", NAMES)
def test_every_option_of_choices_lists_exactly_its_values(name):
    """An option that takes one of a few values (click.Choice) lists them on its page, as the option
    takes them: `--flush` (`sync`|`async`), not SYNC_FLUSH or ASYNC_FLUSH."""
    page = DOCS / "commands" / f"{name}.md"
    listed = _page_choices(page)
    for param in cli.get_command(None, name).params:
        if isinstance(param, click.Option) and isinstance(param.type, click.Choice):
            assert listed.get(param.opts[0]) == list(param.type.choices), \
                f"docs/commands/{name}.md: {param.opts[0]} takes {'|'.join(param.type.choices)}"


def _links(path: Path) -> list[Path]:
    return [(path.parent / m.group(1)).resolve() for m in LINK.finditer(path.read_text(encoding="utf-8"))
            if not re.match(r"[a-z]+:", m.group(1))]


def test_every_relative_link_leads_to_a_file():
    broken = [f"{p.relative_to(REPO)} -> {target}" for p in [REPO / "README.md", *DOCS.rglob("*.md")]
              for target in _links(p) if not target.exists()]
    assert broken == []


def test_every_page_is_reachable_from_the_readme():
    seen, todo = set(), [REPO / "README.md"]
    while todo:
        page = todo.pop()
        if page in seen or page.suffix != ".md" or not page.is_file():
            continue
        seen.add(page)
        todo += [t / "README.md" if t.is_dir() else t for t in _links(page)]
    unreachable = sorted(str(p.relative_to(REPO)) for p in DOCS.rglob("*.md") if p.resolve() not in seen)
    assert unreachable == []
