"""The ROS code checked against Humble's real API without running it.

rclpy cannot be installed here, but PyPI rclpy-intellisense is an exact copy of rclpy 3.3.15's
Python sources, and rosbags carries Humble's message definitions. This test parses
sequence_ai_ros with ``ast`` and checks every rclpy import, Node method call (positional count
and keyword names), QoS/enum member, lifecycle return name, message constructor keyword and
message field path (written, or read in a subscription/service callback) against them.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from rosbags.typesys import Stores, get_typestore
from rosbags.typesys.base import Nodetype

ROOT = Path(__file__).resolve().parents[1]
# rclpy-intellisense is installed outside sys.path (`pip install --target`, see the Makefile):
# its `rclpy/` is Humble's sources, not runnable, and would shadow a real rclpy.
RCLPY = Path(os.environ.get("SEQUENCE_AI_HUMBLE_RCLPY", ROOT / ".venv" / "humble-rclpy" / "rclpy"))
ROS_FILES = [
    "policy_node.py",
    "node_io.py",
    "interfaces.py",
    "messages.py",
    "command_sink.py",  # ROS-free, but it calls the publishers' publish()
    "sim_arm_node.py",
    "health_publisher.py",
    "rclpy_guards.py",
]
# The output types build their messages through conversions.py from `types.<Name>` classes.
OUTPUT_FILES = sorted(
    f"outputs/{p.name}" for p in (ROOT / "sequence_ai_ros" / "outputs").glob("*.py")
)
MESSAGE_FILES = [*ROS_FILES, "conversions.py", *OUTPUT_FILES]
# Humble std_srvs/srv/Trigger.srv (rosbags has no .srv files): request empty, then response.
SERVICES = {
    "std_srvs/srv/Trigger": {"Request": [], "Response": ["success", "message"]},
    # Humble lifecycle_msgs/srv/ChangeState.srv: Transition transition --- bool success
    "lifecycle_msgs/srv/ChangeState": {"Request": ["transition"], "Response": ["success"]},
}

# `make test` names the directory and so requires it; elsewhere (colcon) the check is optional.
pytestmark = pytest.mark.skipif(
    not RCLPY.is_dir() and "SEQUENCE_AI_HUMBLE_RCLPY" not in os.environ,
    reason="rclpy-intellisense not installed",
)


@dataclass(frozen=True)
class Sig:
    positional: tuple[str, ...]
    defaults: int
    kwonly: tuple[str, ...]
    kw_required: tuple[str, ...]
    varargs: bool
    varkw: bool

    @classmethod
    def of(cls, fn: ast.FunctionDef, drop_self: bool = True) -> Sig:
        args = fn.args
        positional = [a.arg for a in [*args.posonlyargs, *args.args]][1 if drop_self else 0 :]
        kw_required = [
            a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is None
        ]
        return cls(tuple(positional), len(args.defaults), tuple(a.arg for a in args.kwonlyargs),
                   tuple(kw_required), args.vararg is not None, args.kwarg is not None)  # fmt: skip

    def problem(self, call: ast.Call, skip_first: int = 0) -> str | None:
        if any(isinstance(a, ast.Starred) for a in call.args) or any(
            k.arg is None for k in call.keywords
        ):
            return None
        positional = self.positional[skip_first:]
        given = len(call.args)
        if given > len(positional) and not self.varargs:
            return f"{given} positional arguments, accepts {len(positional)}"
        names = {k.arg for k in call.keywords}
        unknown = names - set(positional) - set(self.kwonly)
        if unknown and not self.varkw:
            return f"unknown keywords {sorted(unknown)}"
        required = positional[: len(positional) - self.defaults]
        missing = [p for p in required[given:] if p not in names]
        missing += [k for k in self.kw_required if k not in names]
        return f"missing arguments {missing}" if missing else None


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def classes(path: Path) -> dict[str, dict[str, ast.AST]]:
    out: dict[str, dict[str, ast.AST]] = {}
    for node in ast.walk(parse(path)):
        if isinstance(node, ast.ClassDef):
            members: dict[str, ast.AST] = {}
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    members[item.name] = item
                elif isinstance(item, ast.Assign):
                    members.update({t.id: item for t in item.targets if isinstance(t, ast.Name)})
            out[node.name] = members
    return out


def module_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in parse(path).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def rclpy_module(dotted: str) -> Path:
    base = RCLPY.joinpath(*dotted.split(".")[1:])
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


@pytest.fixture(scope="module")
def api() -> dict[str, dict[str, ast.AST]]:
    node_api = {**classes(RCLPY / "node.py")["Node"]}
    node_api.update(classes(RCLPY / "lifecycle" / "node.py")["LifecycleNodeMixin"])
    return {
        "Node": node_api,
        "Publisher": classes(RCLPY / "publisher.py")["Publisher"],
        "Client": classes(RCLPY / "client.py")["Client"],
        "Future": classes(RCLPY / "task.py")["Future"],
        "Timer": classes(RCLPY / "timer.py")["Timer"],
        "Logger": classes(RCLPY / "impl" / "rcutils_logger.py")["RcutilsLogger"],
        "Clock": classes(RCLPY / "clock.py")["Clock"],
        "Time": classes(RCLPY / "time.py")["Time"],
        "qos": {k: v for k, v in classes(RCLPY / "qos.py").items()},  # type: ignore[dict-item]
        "param_type": classes(RCLPY / "parameter.py")["Type"],
    }


@pytest.fixture(scope="module")
def msgdefs() -> dict[str, tuple[list[tuple[str, str, int]], list[tuple[str, object]]]]:
    return dict(get_typestore(Stores.ROS2_HUMBLE).fielddefs)


def sources(files: list[str]) -> list[tuple[str, ast.Module]]:
    return [(name, parse(ROOT / "sequence_ai_ros" / name)) for name in files]


def calls(tree: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)]


def receiver(call: ast.Call) -> str:
    func = call.func
    return ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""


# ---------------------------------------------------------------------- rclpy


def test_humble_sources_cannot_shadow_a_real_rclpy() -> None:
    assert (RCLPY / "node.py").is_file(), f"Humble's rclpy sources missing at {RCLPY}"
    spec = importlib.util.find_spec("rclpy")
    # Importable rclpy, if any, is a real one: it ships the compiled extension.
    assert spec is None or any(Path(spec.origin or "").parent.glob("_rclpy_pybind11*")), spec
    assert all(Path(p).resolve() != RCLPY.parent.resolve() for p in sys.path if p)


def _newer_distro_imports(tree: ast.Module) -> set[int]:
    """Imports tried first under `try:` with an `except ImportError:` fallback (Jazzy's
    rclpy.event_handler, Humble's rclpy.qos_event): Humble needs only the fallback."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id == "ImportError" for h in node.handlers
        ):
            assert any(isinstance(n, ast.ImportFrom) for h in node.handlers for n in h.body)
            skipped |= {id(n) for n in node.body if isinstance(n, ast.ImportFrom)}
    return skipped


def test_rclpy_imports_exist_in_rclpy_sources() -> None:
    checked = 0
    for name, tree in sources(ROS_FILES):
        newer = _newer_distro_imports(tree)
        for node in ast.walk(tree):
            if id(node) in newer:
                continue
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rclpy"):
                available = module_names(rclpy_module(node.module or ""))
                for alias in node.names:
                    assert alias.name in available, (
                        f"{name}: {node.module}.{alias.name} not in rclpy"
                    )
                    checked += 1
    assert checked >= 10


def test_node_method_calls_match_rclpy_signatures(api: dict[str, dict[str, ast.AST]]) -> None:
    node_api = api["Node"]
    node_receivers = {"self", "node", "self.node", "super()"}
    checked = 0
    for name, tree in sources(ROS_FILES):
        for call in calls(tree):
            method = call.func.attr if isinstance(call.func, ast.Attribute) else ""
            if receiver(call) not in node_receivers or method not in node_api:
                continue
            target = node_api[method]
            assert isinstance(target, ast.FunctionDef)
            if (
                method == "create_lifecycle_publisher"
            ):  # forwards *args/**kwargs to create_publisher
                target = node_api["create_publisher"]
                assert isinstance(target, ast.FunctionDef)
            problem = Sig.of(target).problem(call)
            assert problem is None, f"{name}:{call.lineno} {method}(): {problem}"
            checked += 1
    assert checked >= 20  # declare_parameter, create_*, destroy_*, get_logger, super().on_*


def test_object_method_calls_exist_on_rclpy_classes(api: dict[str, dict[str, ast.AST]]) -> None:
    owners = {
        "publish": "Publisher", "call_async": "Client", "service_is_ready": "Client",
        "add_done_callback": "Future", "result": "Future", "now": "Clock", "to_msg": "Time",
        "info": "Logger", "warning": "Logger", "error": "Logger", "debug": "Logger",
    }  # fmt: skip
    checked = 0
    for name, tree in sources(ROS_FILES):
        for call in calls(tree):
            method = call.func.attr if isinstance(call.func, ast.Attribute) else ""
            owner = owners.get(method)
            if owner is None or receiver(call).startswith(("self.inputs", "log")):
                continue
            target = api[owner].get(method)
            assert isinstance(target, ast.FunctionDef), f"{name}:{call.lineno} {owner}.{method}"
            assert Sig.of(target).problem(call) is None, f"{name}:{call.lineno} {method}()"
            checked += 1
    assert checked >= 10


def test_qos_enums_lifecycle_returns_and_parameter_types(
    api: dict[str, dict[str, ast.AST]],
) -> None:
    qos = api["qos"]
    slots = {
        "history", "depth", "reliability", "durability", "lifespan", "deadline",
        "liveliness", "liveliness_lease_duration", "avoid_ros_namespace_conventions",
    }  # fmt: skip
    assert {f"_{s}" for s in slots} <= set(
        re.findall(r"'(_[a-z_]+)'", (RCLPY / "qos.py").read_text())
    )
    returns = set(re.findall(r"TransitionCallbackReturn\.([A-Z]+)", _all_rclpy_text()))
    seen = 0
    for name, tree in sources(ROS_FILES):
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "QoSProfile":
                assert {k.arg for k in node.keywords} <= slots, f"{name}:{node.lineno}"
                assert any(k.arg in ("depth", "history") for k in node.keywords)
                seen += 1
            if not isinstance(node, ast.Attribute) or not isinstance(node.value, ast.Name):
                continue
            owner, member = node.value.id, node.attr
            if owner in ("ReliabilityPolicy", "DurabilityPolicy", "HistoryPolicy"):
                assert member in qos[owner], f"{name}:{node.lineno} {owner}.{member}"
                seen += 1
            elif owner == "TransitionCallbackReturn":
                assert member in returns, f"{name}:{node.lineno} {owner}.{member}"
                seen += 1
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and ast.unparse(node.value) == "Parameter.Type":
                assert node.attr in api["param_type"], (
                    f"{name}:{node.lineno} Parameter.Type.{node.attr}"
                )
                seen += 1
    assert seen >= 15


def _all_rclpy_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in RCLPY.rglob("*.py"))


# ---------------------------------------------------------------------- messages


class Messages:
    """Field lookups in Humble's definitions, by short class name as the code imports them."""

    def __init__(
        self, defs: dict[str, tuple[list[tuple[str, str, int]], list[tuple[str, object]]]]
    ):
        self.defs = defs
        self.by_short: dict[str, str] = {}
        self.fields: dict[str, dict[str, object]] = {}
        for full, (_, fields) in defs.items():
            self.fields[full] = dict(fields)
        for srv, halves in SERVICES.items():
            for half, names in halves.items():
                self.fields[f"{srv}_{half}"] = {n: None for n in names}

    def learn_imports(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith((".msg", ".srv")):
                package, kind = (node.module or "").split(".")
                for alias in node.names:
                    full = f"{package}/{kind}/{alias.name}"
                    known = full in self.defs or full in SERVICES
                    assert known, f"{full} is not a Humble interface"
                    self.by_short[alias.name] = full

    def check_path(self, full: str, path: list[str], where: str) -> None:
        for field in path:
            fields = self.fields[full]
            assert field in fields, f"{where}: {full} has no field '{field}'"
            spec = fields[field]
            if not (isinstance(spec, tuple) and spec[0] == Nodetype.NAME):
                return  # a base value or sequence: attributes beyond it are Python's
            full = str(spec[1])


def _chain(node: ast.AST) -> tuple[str, list[str]] | None:
    """`msg.a.b` -> ("msg", ["a", "b"])."""
    path: list[str] = []
    while isinstance(node, ast.Attribute):
        path.insert(0, node.attr)
        node = node.value
    return (node.id, path) if isinstance(node, ast.Name) and path else None


def _constructed_type(value: ast.AST, messages: Messages) -> str | None:
    if not isinstance(value, ast.Call):
        return None
    func = value.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if isinstance(func, ast.Attribute) and ast.unparse(func.value) not in ("types",):
        if func.attr == "Request" and ast.unparse(func.value) in messages.by_short:
            return f"{messages.by_short[ast.unparse(func.value)]}_Request"
        return None
    return messages.by_short.get(name)


def conversions_types() -> list[str]:
    tree = parse(ROOT / "sequence_ai_ros" / "conversions.py")
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "MessageTypes")
    return [item.target.id for item in cls.body if isinstance(item, ast.AnnAssign)]  # type: ignore[union-attr]


def test_message_constructors_and_written_fields(msgdefs: dict) -> None:  # type: ignore[type-arg]
    messages = Messages(msgdefs)
    trees = sources(MESSAGE_FILES)
    for _, tree in trees:
        messages.learn_imports(tree)
    # conversions.py builds messages from classes passed in as `types.<Name>`.
    for name in conversions_types():
        messages.by_short.setdefault(name, next(k for k in msgdefs if k.endswith(f"/{name}")))
    checked = 0
    for file, tree in trees:
        for func in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
            known: dict[str, str] = {}
            for node in ast.walk(func):
                full = _constructed_type(node, messages) if isinstance(node, ast.Call) else None
                if full is not None:
                    assert isinstance(node, ast.Call)
                    for keyword in node.keywords:
                        messages.check_path(full, [str(keyword.arg)], f"{file}:{node.lineno}")
                        checked += 1
                if isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    made = _constructed_type(node.value, messages) if node.value else None
                    for target in targets:
                        if isinstance(target, ast.Name) and made:
                            known[target.id] = made
                        chain = _chain(target)
                        if chain and chain[0] in known:
                            messages.check_path(known[chain[0]], chain[1], f"{file}:{node.lineno}")
                            checked += 1
    assert checked >= 25


def test_fields_read_in_callbacks_exist(msgdefs: dict) -> None:  # type: ignore[type-arg]
    messages = Messages(msgdefs)
    checked = 0
    for file, tree in sources(ROS_FILES):
        messages.learn_imports(tree)
        methods = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        for call in calls(tree):
            if len(call.args) < 3 or not isinstance(call.args[0], ast.Name):
                continue
            full = messages.by_short.get(call.args[0].id)
            callback, skip = call.args[2], 0
            if isinstance(callback, ast.Call) and ast.unparse(callback.func) == "partial":
                callback, skip = callback.args[0], len(callback.args) - 1
            if full is None or not isinstance(callback, ast.Attribute):
                continue
            method = methods[callback.attr]
            names = [a.arg for a in method.args.args][1 + skip :]
            typed = {names[0]: full}
            if full in SERVICES:
                typed = {names[0]: f"{full}_Request", names[1]: f"{full}_Response"}
            for node in ast.walk(method):
                chain = _chain(node) if isinstance(node, ast.Attribute) else None
                if chain and chain[0] in typed:
                    messages.check_path(typed[chain[0]], chain[1], f"{file}:{node.lineno}")
                    checked += 1
    assert checked >= 15  # joint_states, images, instruction, estop, Trigger responses


def test_main_calls_rclpy_init_and_spin_once_as_humble_defines_them() -> None:
    init_source = (RCLPY / "__init__.py").read_text()
    init = next(
        n
        for n in ast.parse(init_source).body
        if isinstance(n, ast.FunctionDef) and n.name == "init"
    )
    accepted = {a.arg for a in init.args.kwonlyargs}
    main = next(
        n
        for n in parse(ROOT / "sequence_ai_ros" / "policy_node.py").body
        if isinstance(n, ast.FunctionDef) and n.name == "main"
    )
    found = {ast.unparse(c.func): c for c in ast.walk(main) if isinstance(c, ast.Call)}
    keywords = {k.arg: ast.unparse(k.value) for k in found["rclpy.init"].keywords}
    assert set(keywords) <= accepted
    assert keywords["signal_handler_options"] == "SignalHandlerOptions.NO"
    assert "SignalHandlerOptions.NO" in init_source  # a pybind11 enum: its members show here
    assert "from rclpy.utilities import ok" in init_source  # rclpy.ok()
    assert [k.arg for k in found["executor.spin_once"].keywords] == ["timeout_sec"]


def test_the_node_implements_the_controller_protocol_its_interfaces_call() -> None:
    """mypy cannot check it: PolicyNode subclasses rclpy's Node, which is Any without stubs."""
    protocol = classes(ROOT / "sequence_ai_ros" / "interfaces.py")["EpisodeController"]
    node = classes(ROOT / "sequence_ai_ros" / "policy_node.py")["PolicyNode"]
    assert {"start_episode", "stop_episode", "on_estop", "episode_number"} <= set(protocol)
    for name, wanted in protocol.items():
        assert isinstance(wanted, ast.FunctionDef), name
        found = node.get(name)
        assert isinstance(found, ast.FunctionDef), f"PolicyNode has no method {name}"
        is_property = {ast.unparse(d) for d in wanted.decorator_list} == {"property"}
        assert is_property == ("property" in {ast.unparse(d) for d in found.decorator_list})
        need, have = Sig.of(wanted), Sig.of(found)
        assert have.positional[: len(need.positional)] == need.positional, name
        assert len(have.positional) - have.defaults <= len(need.positional), name
        assert set(need.kwonly) <= set(have.kwonly) and set(have.kw_required) <= set(need.kwonly)
