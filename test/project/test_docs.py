"""The README and docs/ hold: their generated tables agree with their sources, every relative
link and anchor resolves, and the README stays a front page.

The tables are rewritten by ``python -m docs._generate`` (docs/_generate.py); this loads that
module from its file, so it runs against whichever copy of the packages is installed (the
floor tiers test the installed copy, not the source tree).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from support import TEST_KEY

from sequence_ai_core import EngineConfig, PlaybackEngine, connect
from sequence_ai_sim import GatewaySimulator

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "_generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


generate = _generator()
PAGES = generate.pages(ROOT)


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


# ---------------------------------------------------------------- generated tables


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_generated_tables_agree_with_their_sources(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    fresh = generate.render(text)
    if fresh != text:
        diff = generate.disagreements(ROOT)[page]
        pytest.fail(
            f"{_name(page)} disagrees with its sources; from the repository root run "
            f"`{generate.COMMAND}` and commit the result:\n{diff}"
        )


def test_each_generated_table_is_on_its_page() -> None:
    found = {_name(page): generate.blocks(page.read_text(encoding="utf-8")) for page in PAGES}
    placed = {name: blocks for name, blocks in found.items() if blocks}
    assert placed == {
        "docs/cli.md": ["cli"],
        "docs/errors.md": ["errors"],
        "docs/node.md": ["node-parameters", "interfaces"],
        "docs/recording.md": ["recording-topics"],
    }


def test_every_error_row_says_what_a_controller_does() -> None:
    page = (DOCS / "errors.md").read_text(encoding="utf-8")
    missing = [line for line in page.splitlines() if generate.ADVICE_MISSING in line]
    assert missing == [], "write the last column of these rows in docs/errors.md"


def test_the_generated_tables_cover_every_source_entry() -> None:
    """Every parameter, error class and command is a row or a heading of its table."""
    from sequence_ai_core import errors
    from sequence_ai_core.tools import cli
    from sequence_ai_ros.parameters import PARAMETERS

    node = (DOCS / "node.md").read_text(encoding="utf-8")
    assert all(f"| `{spec.name}` |" in node for spec in PARAMETERS)
    table = (DOCS / "errors.md").read_text(encoding="utf-8")
    classes = [
        value.__name__
        for value in vars(errors).values()
        if isinstance(value, type) and issubclass(value, errors.SequencesError)
    ]
    assert len(classes) >= 11 and all(f"| `{name}`" in table for name in classes)
    usage = (DOCS / "cli.md").read_text(encoding="utf-8")
    for command in ("models", "login", "doctor", *cli.SERVED_ELSEWHERE):
        assert f"### `sequence-ai {command}`" in usage
    assert "`--disagreement {none,calibrated,mode_switch}`" in usage  # sim's, by module name


def test_a_changed_source_shows_as_a_disagreement(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check compares with the source, not with itself: a parameter whose meaning
    changes makes the page disagree, and the rewrite keeps the hand-written advice."""
    from sequence_ai_ros.parameters import PARAMETERS

    changed = dataclasses.replace(PARAMETERS[0], meaning="Another meaning.")
    monkeypatch.setattr(generate, "PARAMETERS", (changed, *PARAMETERS[1:]))
    node = (DOCS / "node.md").read_text(encoding="utf-8")
    assert "Another meaning." in generate.render(node) != node
    errors_page = (DOCS / "errors.md").read_text(encoding="utf-8")
    emptied = re.sub(r"(<!-- generated: errors -->\n).*?(<!-- end generated -->)", r"\1\2",
                     errors_page, flags=re.DOTALL)  # fmt: skip
    assert generate.ADVICE_MISSING in generate.render(emptied)
    assert generate.render(errors_page) == errors_page


# ---------------------------------------------------------------- links and anchors

FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[(?P<text>[^\]\n]*)\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*#*\s*$", re.MULTILINE)


def _prose(text: str) -> str:
    """The page without code blocks, comments and code spans, where a link is no link."""
    return CODE_SPAN.sub("", COMMENT.sub("", FENCE.sub("", text)))


def slug(title: str) -> str:
    """A heading's anchor as GitHub makes it: link text kept, code marks and punctuation
    dropped, lower case, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for match in HEADING.finditer(FENCE.sub("", page.read_text(encoding="utf-8"))):
        base = slug(match.group("title"))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[str]:
    return [m.group("target") for m in LINK.finditer(_prose(page.read_text(encoding="utf-8")))]


def test_slugs_are_githubs() -> None:
    assert slug("The `sequence-ai` command and the gateway simulator") == (
        "the-sequence-ai-command-and-the-gateway-simulator"
    )
    assert slug("A control loop: `run()`") == "a-control-loop-run"
    assert slug("Coming from sequence-ai 0.1.0") == "coming-from-sequence-ai-010"
    assert slug("ROS 2 (Humble and Jazzy)") == "ros-2-humble-and-jazzy"
    assert slug("Every end holds, on time") == "every-end-holds-on-time"


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: (not fetched)
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading with that anchor in {resolved.name}")
        elif ROOT not in resolved.parents and resolved != ROOT:
            broken.append(f"{target}: outside the repository")
    assert broken == []


def test_the_link_check_sees_links() -> None:
    assert len(links(README)) >= 20
    assert "docs/node.md#parameters" in links(README)
    assert "../bench/results/continuity.png" in links(DOCS / "performance.md")  # an image
    assert "`" not in " ".join(links(DOCS / "contributing.md"))  # code is not followed


# ---------------------------------------------------------------- the README as a front page


def test_the_readme_is_a_front_page() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 350


def test_the_readme_keeps_exactly_the_two_commands() -> None:
    readme = README.read_text(encoding="utf-8")
    section = readme.split("\n## Try it\n", 1)[1]
    block = section.split("```\n", 2)[1]
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    assert commands == ["make demo", "make test"]


def test_the_first_screen_says_where_to_go() -> None:
    """Within the README's first 60 lines: trying it without a robot, running it on an arm
    with ros2_control, and where every parameter is described."""
    head = "\n".join(README.read_text(encoding="utf-8").splitlines()[:60])
    targets = [m.group("target") for m in LINK.finditer(_prose(head))]
    assert "#see-it-run-without-a-robot-or-credit" in targets
    assert "#on-a-real-arm" in targets
    assert "docs/node.md#parameters" in targets


def _table_after(text: str, heading: str) -> str:
    section = text.split(heading, 1)[1]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    start = section.splitlines().index(rows[0])
    table = []
    for line in section.splitlines()[start:]:
        if not line.startswith("|"):
            break
        table.append(line)
    return "\n".join(table)


def test_the_controller_table_is_the_same_in_the_readme_and_its_page() -> None:
    readme = _table_after(README.read_text(encoding="utf-8"), "\n### On a real arm\n")
    page = (DOCS / "controllers.md").read_text(encoding="utf-8")
    assert readme.startswith("| model's action space")
    assert readme == _table_after(page, "\n## Which controller, for which model\n")


def test_the_docs_index_lists_every_page() -> None:
    listed = {target.partition("#")[0] for target in links(DOCS / "README.md")}
    pages = {page.name for page in DOCS.glob("*.md")} - {"README.md"}
    assert pages <= listed


# ---------------------------------------------------------------- what the node page lists


def test_the_node_page_names_every_diagnostics_key(sim: GatewaySimulator) -> None:
    """Every key the node's status carries (with every optional part present, and a real
    engine's live numbers and outcome) is in docs/node.md's key table, and the table names
    no key the node does not send."""
    from sequence_ai_core.errors import OutOfCredit
    from sequence_ai_ros import diagnostics

    with connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url) as policy:
        engine = PlaybackEngine(policy, EngineConfig())
        snapshot = engine.snapshot()
        outcome = engine.outcome(reason="completed", stopped_early=False)
        engine.close()
    health = diagnostics.Health(
        lifecycle="active", model="pi05-droid", episode_running=True, episode_number=1,
        actions=0, estop_latched=False, input_problem="no joint_states received yet",
        error=OutOfCredit("out"), snapshot=snapshot, outcome=outcome, gateway=sim.url,
        requests_sent=1, configure_problem="parameter 'model': must not be empty",
    )  # fmt: skip
    keys = {key for key, _ in diagnostics.evaluate(health)[2]}
    page = (DOCS / "node.md").read_text(encoding="utf-8")
    section = page.split("\n## Diagnostics\n", 1)[1].split("\n## ", 1)[0]
    rows = {  # first cell: the keys, or a prefix; for a prefix, the names after the colon
        line.split("|")[1].strip(): set(re.findall(r"`(\w+)`", line.split("|")[2].split(":")[-1]))
        for line in section.splitlines()
        if line.startswith("| `")
    }
    plain = {name.strip("`") for cell in rows for name in re.findall(r"`[\w.]+`", cell)}
    documented = plain | {f"live.{name}" for name in rows["`live.<name>`"]}
    documented |= {f"last.{name}" for name in rows["`last.<name>`"]}
    documented -= {"live.<name>", "last.<name>"}
    assert keys == documented
