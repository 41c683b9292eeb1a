"""The reference tables of README.md and docs/, generated from their single sources.

A generated table sits in a page between ``<!-- generated: NAME -->`` and
``<!-- end generated -->``; this module rewrites what is between the two:

- ``node-parameters``: the node's parameters, from their declarations
  (``sequence_ai_ros/parameters/table.py``);
- ``errors``: the error classes, from ``sequence_ai_core/errors.py`` (each class's docstring)
  and ``STATUS_RULES`` in ``sequence_ai_core/gateway/error_map.py``; the last column, what a
  controller does, is written by hand in the page and kept from one run to the next;
- ``cli``: the ``sequence-ai`` command, from its argparse parser
  (``sequence_ai_core/tools/cli.py``), with the commands other packages serve (``sim``) loaded
  by module name as the command loads them;
- ``recording-topics``: what a recorded episode holds, from
  ``sequence_ai_core/recording/topics.py``;
- ``interfaces``: the package's own messages, service and action, from the ``msg/``,
  ``srv/`` and ``action/`` files colcon generates them from.

Run from the repository root::

    python -m docs._generate           # rewrite the pages
    python -m docs._generate --check   # print what disagrees, exit 1 (test/project/test_docs.py)
"""

from __future__ import annotations

import argparse
import difflib
import inspect
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from sequence_ai_core import errors
from sequence_ai_core.gateway import error_map
from sequence_ai_core.tools import cli
from sequence_ai_ros.parameters import PARAMETERS, Parameter

ROOT = Path(__file__).resolve().parents[1]
COMMAND = "python -m docs._generate"
BLOCK = re.compile(
    r"(?P<open><!-- generated: (?P<name>[a-z-]+) -->\n)(?P<body>.*?)"
    r"(?P<close><!-- end generated -->)",
    re.DOTALL,
)
#: What the errors table says where nobody has written what a controller does yet; the test
#: refuses a page that still has it.
ADVICE_MISSING = "*(not written yet: what a controller does)*"


def pages(root: Path = ROOT) -> list[Path]:
    """Every page that may hold a generated table: the README and docs/*.md."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def _cell(text: str) -> str:
    """Text as one markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _code(text: str) -> str:
    return f"`{text}`"


def _rst_to_markdown(text: str) -> str:
    """A docstring as markdown: its ``literals`` as code spans, its lines as one paragraph."""
    return " ".join(text.replace("``", "`").split())


# ---------------------------------------------------------------- node-parameters

_KIND_NAMES = {
    "bool": "bool",
    "integer": "int",
    "double": "double",
    "string": "string",
    "integer_array": "int[]",
    "double_array": "double[]",
    "string_array": "string[]",
}


def _default(spec: Parameter) -> str:
    value = spec.default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return _code("true" if value else "false")
    if isinstance(value, str):
        return _code(value) if value else '`""`'
    return _code(repr(value))


def node_parameters(_old: str) -> str:
    rows = [
        (
            _code(spec.name),
            _KIND_NAMES[spec.kind],
            _default(spec),
            _cell(spec.constraints),
            _cell(spec.meaning),
        )
        for spec in PARAMETERS
    ]
    return _table(("parameter", "type", "default", "constraint", "meaning"), rows)


# ---------------------------------------------------------------- errors


def _error_classes() -> list[type[errors.SequencesError]]:
    """The classes errors.py defines: those a rule maps to, in rule order; the base (what no
    rule maps); then the ones raised without a gateway answer, in the module's order."""
    defined = [
        value
        for value in vars(errors).values()
        if isinstance(value, type)
        and issubclass(value, errors.SequencesError)
        and value.__module__ == errors.__name__
    ]
    mapped: list[type[errors.SequencesError]] = []
    for rule in error_map.STATUS_RULES:
        if rule.error not in mapped:
            mapped.append(rule.error)
    rest = [c for c in defined if c not in mapped and c is not errors.SequencesError]
    return [*mapped, errors.SequencesError, *rest]


def _class_cell(cls: type[errors.SequencesError]) -> str:
    notes = []
    for base in cls.__bases__:
        if base in (errors.SequencesError, Exception):
            continue
        article = "an" if base.__name__[0] in "AEIOU" else "a"
        also = "" if issubclass(base, errors.SequencesError) else "also "
        notes.append(f"{also}{article} {_code(base.__name__)}")
    return _code(cls.__name__) + (f" ({', '.join(notes)})" if notes else "")


def _statuses(cls: type[errors.SequencesError]) -> tuple[str, str]:
    rules = [rule for rule in error_map.STATUS_RULES if rule.error is cls]
    if cls is errors.SequencesError:
        return "any other", "any other"
    if not rules:
        return "—", "—"
    statuses = sorted({status for rule in rules for status in rule.statuses})
    codes = []
    for rule in rules:
        if not rule.codes:
            continue
        names = ", ".join(_code(code) for code in sorted(rule.codes))
        if rule.warming:
            on = ", ".join(str(status) for status in sorted(rule.statuses))
            names += f" (with {on}: `warming=True`)"
        codes.append(names)
    return ", ".join(str(status) for status in statuses), "; ".join(codes) or "—"


def _advice(old: str) -> dict[str, str]:
    """What a controller does, by class name, from the table as the page has it."""
    kept = {}
    for line in old.splitlines():
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        name = re.match(r"`(\w+)`", cells[0]) if cells else None
        if name is not None and len(cells) >= 5:
            kept[name.group(1)] = cells[-1]
    return kept


def error_table(old: str) -> str:
    advice = _advice(old)
    rows = []
    for cls in _error_classes():
        status, code = _statuses(cls)
        when = _rst_to_markdown(inspect.getdoc(cls) or "")
        rows.append(
            (
                _class_cell(cls),
                status,
                code,
                _cell(when),
                advice.get(cls.__name__) or ADVICE_MISSING,
            )
        )
    header = ("class", "HTTP status", "body `code`", "raised when", "what a controller does")
    return _table(header, rows)


# ---------------------------------------------------------------- cli


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, help line, parser) of each command, in the order --help lists them."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            found += [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]
    return found


def _option(action: argparse.Action) -> str:
    flags = ", ".join(action.option_strings)
    if action.nargs == 0:
        return _code(flags)
    if action.choices is not None:
        value = "{" + ",".join(str(choice) for choice in action.choices) + "}"
    else:
        value = str(action.metavar or action.dest.upper())
    return _code(f"{flags} {value}")


def _option_default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS):
        return ""
    return _code(str(action.default))


def _options(parser: argparse.ArgumentParser) -> str:
    rows = [
        (_option(action), _option_default(action), _cell(action.help or ""))
        for action in parser._actions
        if action.option_strings and not isinstance(action, argparse._HelpAction)
    ]
    return _table(("option", "default", "meaning"), rows)


def cli_usage(_old: str) -> str:
    parser = cli.build_parser(loading=tuple(cli.SERVED_ELSEWHERE))
    parts = [
        f"### `{parser.prog}`\n\n{parser.description} Options before the command:\n\n"
        + _options(parser)
    ]
    for name, summary, sub in _subcommands(parser):
        served = cli.SERVED_ELSEWHERE.get(name)
        source = f" Served by `{served.module}`." if served else ""
        parts.append(
            f"### `{parser.prog} {name}`\n\n{summary[:1].upper()}{summary[1:]}.{source}\n\n"
            + _options(sub)
        )
    return "\n".join(parts)


# ---------------------------------------------------------------- recording-topics


def recording_topics(_old: str) -> str:
    """Every topic of a recorded episode and every engine event, from
    ``sequence_ai_core/recording/topics.py``."""
    from sequence_ai_core.recording import topics

    rows = [[_code(t.name), _code(t.msgtype), _cell(t.carries)] for t in topics.TOPICS]
    rows.insert(
        1, [_code(topics.IMAGE_PREFIX + "<view>"), _code(topics.IMAGE_TYPE), topics.IMAGE_CARRIES]
    )
    events = [[_code(name), _cell(meaning)] for name, meaning in topics.EVENTS.items()]
    return (
        _table(["topic", "type", "one message is"], rows)
        + "\n"
        + _table([f"event on {_code(topics.EVENTS_TOPIC.name)}", "meaning"], events)
    )


# ---------------------------------------------------------------- interfaces

#: The interface files in the order the page describes them, and the names of their parts.
INTERFACES = ("action/RunEpisode.action", "msg/RunOutcome.msg", "srv/ValidateChunk.srv")
_PARTS = {".action": ("goal", "result", "feedback"), ".srv": ("request", "response")}
_FIELD = re.compile(r"^(?P<type>\S+)\s+(?P<name>\w+)\s*(?:#\s?(?P<meaning>.*))?$")


def _interface_fields(text: str, parts: Sequence[str]) -> tuple[str, list[list[str]]]:
    """(the file's opening comment, a row per field: part, name, type, meaning); a comment
    line under a field continues its meaning."""
    lines = text.splitlines()
    opening = []
    while lines and lines[0].startswith("#"):
        opening.append(lines.pop(0).lstrip("# "))
    rows: list[list[str]] = []
    part = 0
    for line in lines:
        stripped = line.strip()
        if stripped == "---":
            part += 1
        elif stripped.startswith("#") and rows:
            rows[-1][3] += " " + stripped.lstrip("# ")
        elif match := _FIELD.match(stripped):
            label = parts[part] if parts else ""
            rows.append([label, match["name"], match["type"], match["meaning"] or ""])
    return " ".join(opening), rows


def interfaces(_old: str) -> str:
    """Each of the package's own interfaces: what it is for and its fields."""
    sections = []
    for relative in INTERFACES:
        path = ROOT / relative
        parts = _PARTS.get(path.suffix, ())
        opening, rows = _interface_fields(path.read_text(encoding="utf-8"), parts)
        header = ["part", "field", "type", "meaning"] if parts else ["field", "type", "meaning"]
        cells = [
            ([_cell(part)] if parts else []) + [_code(name), _code(kind), _cell(meaning)]
            for part, name, kind, meaning in rows
        ]
        name = f"sequence_ai_ros/{relative.rsplit('.', 1)[0]}"
        sections.append(f"#### `{name}`\n\n{_cell(opening)}\n\n{_table(header, cells)}")
    return "\n".join(sections)


# ---------------------------------------------------------------- pages

GENERATORS: dict[str, Callable[[str], str]] = {
    "node-parameters": node_parameters,
    "errors": error_table,
    "cli": cli_usage,
    "recording-topics": recording_topics,
    "interfaces": interfaces,
}


def render(text: str) -> str:
    """The page with every generated block rewritten from its source."""

    def block(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in GENERATORS:
            raise KeyError(f"unknown generated block {name!r}; known: {', '.join(GENERATORS)}")
        body = GENERATORS[name](match.group("body"))
        return f"{match.group('open')}{body}{match.group('close')}"

    return BLOCK.sub(block, text)


def blocks(text: str) -> list[str]:
    """The names of the generated blocks in a page, in order."""
    return [match.group("name") for match in BLOCK.finditer(text)]


def disagreements(root: Path = ROOT) -> dict[Path, str]:
    """Each page whose generated tables differ from their sources, with the diff."""
    found = {}
    for page in pages(root):
        text = page.read_text(encoding="utf-8")
        fresh = render(text)
        if fresh != text:
            name = str(page.relative_to(root))
            found[page] = "".join(
                difflib.unified_diff(
                    text.splitlines(keepends=True),
                    fresh.splitlines(keepends=True),
                    fromfile=f"{name} (as written)",
                    tofile=f"{name} (from its sources)",
                )
            )
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 on a diff")
    args = parser.parse_args(argv)
    found = disagreements()
    for page, diff in found.items():
        if args.check:
            sys.stdout.write(diff)
        else:
            page.write_text(render(page.read_text(encoding="utf-8")), encoding="utf-8")
            print(f"rewrote {page.relative_to(ROOT)}")
    if args.check and found:
        print(f"\nthe pages above disagree with their sources: run `{COMMAND}`")
    return 1 if args.check and found else 0


if __name__ == "__main__":
    sys.exit(main())
