"""The ROS code checked against Humble's real API without running it.

rclpy cannot be installed here, but PyPI rclpy-intellisense is an exact copy of rclpy 3.3.15's
Python sources, and rosbags carries Humble's message definitions. This test parses
sequence_ai_ros with ``ast`` and checks every rclpy import, Node method call (positional count
and keyword names), QoS/enum member, lifecycle return name, message constructor keyword and
message field path (written, or read in a subscription/service/action callback) against them.

The package's own interfaces (msg/, srv/, action/) exist only after a colcon build: they are
parsed here with rosbags beside Humble's definitions, the way rosidl reads them (a bare type
name is the package's msg), so their fields resolve against Humble's builtin_interfaces,
trajectory_msgs and sensor_msgs. The action server (rclpy.action), its goal handles and
rclpy.task.Future are checked against Humble's rclpy/action/server.py and rclpy/task.py.
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
from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.base import Nodetype

ROOT = Path(__file__).resolve().parents[2]
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
    "episode_action.py",  # the RunEpisode action server and the latched ~/outcome
    "chunk_validator.py",  # the ValidateChunk client, called from a refill worker
    "sensor_inputs.py",  # the sensor subscriptions' node and wait loop
]
# The output types build their messages through conversions.py from `types.<Name>` classes;
# outcome_message.py's builders are handed theirs as `message_type` (builder_bindings).
OUTPUT_FILES = sorted(
    f"outputs/{p.name}" for p in (ROOT / "sequence_ai_ros" / "outputs").glob("*.py")
)
MESSAGE_FILES = [*ROS_FILES, "conversions.py", "outcome_message.py", *OUTPUT_FILES]
PACKAGE = "sequence_ai_ros"
#: The parts of the package's own interface files, in file order (split on `---`), by the
#: suffix rosidl gives each: ValidateChunk.Request is sequence_ai_ros/srv/ValidateChunk_Request.
HALVES = {"msg": ("",), "srv": ("Request", "Response"), "action": ("Goal", "Result", "Feedback")}
RUN_OUTCOME = f"{PACKAGE}/msg/RunOutcome"
GOAL, RESULT, FEEDBACK = (f"{PACKAGE}/action/RunEpisode_{half}" for half in HALVES["action"])
VALIDATE_REQUEST, VALIDATE_RESPONSE = (f"{PACKAGE}/srv/ValidateChunk_{h}" for h in HALVES["srv"])
# Humble std_srvs/srv/Trigger.srv (rosbags has no .srv files): request empty, then response.
SERVICES = {
    "std_srvs/srv/Trigger": {"Request": [], "Response": ["success", "message"]},
    # Humble std_srvs/srv/SetBool.srv: bool data --- bool success, string message
    "std_srvs/srv/SetBool": {"Request": ["data"], "Response": ["success", "message"]},
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


def cls_members(cls: ast.ClassDef) -> set[str]:
    return {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


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
    server = classes(RCLPY / "action" / "server.py")
    return {
        "Node": node_api,
        "ActionServer": server["ActionServer"],
        "ServerGoalHandle": server["ServerGoalHandle"],
        "GoalResponse": server["GoalResponse"],
        "CancelResponse": server["CancelResponse"],
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


Fielddefs = dict[str, tuple[list[tuple[str, str, int]], list[tuple[str, object]]]]


def own_interfaces() -> Fielddefs:
    """msg/*.msg, srv/*.srv and action/*.action as rosbags reads them, by rosidl's names
    (sequence_ai_ros/srv/ValidateChunk_Request, sequence_ai_ros/action/RunEpisode_Goal, ...).
    Each part is parsed as a msg of the package, so that a bare type name in it (RunOutcome in
    the action's Result) is the package's msg, as rosidl resolves it; rosbags would otherwise
    look for it beside the part (sequence_ai_ros/action/RunOutcome)."""
    defs: Fielddefs = {}
    for kind, halves in HALVES.items():
        for path in sorted((ROOT / kind).glob(f"*.{kind}")):
            text = path.read_text(encoding="utf-8")
            parts = re.split(r"^---[ \t]*$", text, flags=re.MULTILINE)
            assert len(parts) == len(halves), f"{path.name}: {len(parts)} parts, not {halves}"
            for half, part in zip(halves, parts, strict=True):
                stem = f"{path.stem}_{half}" if half else path.stem
                (definition,) = get_types_from_msg(part, f"{PACKAGE}/msg/{stem}").values()
                defs[f"{PACKAGE}/{kind}/{stem}"] = definition
    return defs


@pytest.fixture(scope="module")
def msgdefs() -> Fielddefs:
    """A copy of Humble's definitions with the package's own registered beside them."""
    humble = dict(get_typestore(Stores.ROS2_HUMBLE).fielddefs)
    own = own_interfaces()
    assert not set(own) & set(humble)
    return {**humble, **own}


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
    # A node's own methods are called on `self` too; the node the helpers hold is only a Node.
    held = {"node", "self.node", "self._node"}
    node_receivers = {"self", "super()", *held}
    checked = 0
    for name, tree in sources(ROS_FILES):
        # main() holds the file's own node class (PolicyNode, SimArmNode)
        own = {
            member
            for cls in ast.walk(tree)
            if isinstance(cls, ast.ClassDef) and "Node" in {ast.unparse(b) for b in cls.bases}
            for member in cls_members(cls)
        }
        for call in calls(tree):
            method = call.func.attr if isinstance(call.func, ast.Attribute) else ""
            if receiver(call) in held:
                assert method in {*node_api, *own}, f"{name}:{call.lineno} Node has no {method}"
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
        "remove_pending_request": "Client", "add_done_callback": "Future", "result": "Future",
        "done": "Future", "set_result": "Future", "now": "Clock", "to_msg": "Time",
        "info": "Logger", "warning": "Logger", "error": "Logger", "debug": "Logger",
    }  # fmt: skip
    checked, seen = 0, set()
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
            seen.add(method)
        # `clock.now().nanoseconds`: a property of rclpy's Time
        for node in ast.walk(tree):
            called = node.value if isinstance(node, ast.Attribute) else None
            if isinstance(called, ast.Call) and ast.unparse(called.func).endswith(".now"):
                assert node.attr in api["Time"], f"{name}:{node.lineno} Time.{node.attr}"  # type: ignore[attr-defined]
                checked += 1
    assert checked >= 10
    assert _entity_calls(api) >= 10
    # the validator's client calls and the action's goal future are among them
    assert {"call_async", "remove_pending_request", "service_is_ready", "done"} <= seen
    assert {"set_result", "add_done_callback", "result"} <= seen


#: What the code makes entities with: every method called on one must be its class's.
MAKERS = {
    "create_client": "Client", "call_async": "Future", "Future": "Future",
    "create_publisher": "Publisher", "create_timer": "Timer", "ActionServer": "ActionServer",
}  # fmt: skip


def _entity_calls(api: dict[str, dict[str, ast.AST]]) -> int:
    """Calls on a name or attribute bound to a made entity (`self._client = node.create_client(
    ...)`, `future = self._client.call_async(...)`, `self.ended = Future()` called on as
    `goal.ended`) exist on its rclpy class, whatever the method's name."""
    checked = 0
    for name, tree in sources(ROS_FILES):
        held: dict[str, str] = {}
        for node in ast.walk(tree):
            made = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            if isinstance(made, ast.Call):
                func = made.func
                maker = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]  # type: ignore[union-attr]
                for target in targets if maker in MAKERS else []:
                    held[ast.unparse(target).removeprefix("self")] = MAKERS[maker]
        for call in calls(tree):
            on = receiver(call)
            owner = held.get(on) or held.get(on[on.rfind(".") :] if "." in on else "")
            if owner is None or not isinstance(call.func, ast.Attribute):
                continue
            target = api[owner].get(call.func.attr)
            where = f"{name}:{call.lineno} {owner}.{call.func.attr}"
            assert isinstance(target, ast.FunctionDef), f"{where}: no such method"
            assert Sig.of(target).problem(call) is None, where
            checked += 1
    return checked


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


def _references(spec: object) -> list[str]:
    """The message types a field's type names (itself, or its elements')."""
    assert isinstance(spec, tuple)
    kind, detail = spec
    if kind == Nodetype.NAME:
        return [str(detail)]
    if kind in (Nodetype.ARRAY, Nodetype.SEQUENCE):
        return _references(detail[0])
    return []


def test_the_package_interfaces_resolve_against_humbles(msgdefs: Fielddefs) -> None:
    own = own_interfaces()
    assert set(own) == {RUN_OUTCOME, GOAL, RESULT, FEEDBACK, VALIDATE_REQUEST, VALIDATE_RESPONSE}
    named: dict[str, str] = {}
    for full, (_, fields) in own.items():
        assert fields, f"{full} has no fields"
        for field, spec in fields:
            for ref in _references(spec):
                assert ref in msgdefs, f"{full}.{field}: {ref} is not a Humble message"
                named[f"{full}.{field}"] = ref
    assert named == {
        f"{RUN_OUTCOME}.stamp": "builtin_interfaces/msg/Time",
        f"{VALIDATE_REQUEST}.chunk": "trajectory_msgs/msg/JointTrajectory",
        f"{VALIDATE_REQUEST}.state": "sensor_msgs/msg/JointState",
        f"{RESULT}.outcome": RUN_OUTCOME,  # a bare name in an .action: the package's msg
    }


class Messages:
    """Field lookups in Humble's definitions and the package's own, by the names a file
    imports them as (``import ... as`` included), its ``types.<Name>`` and the halves of a
    service or action (``ValidateChunk.Request``, ``RunEpisode.Feedback``)."""

    def __init__(self, defs: Fielddefs) -> None:
        self.defs = defs
        self.by_short: dict[str, str] = {}
        self.fields: dict[str, dict[str, object]] = {}
        for full, (_, fields) in defs.items():
            self.fields[full] = dict(fields)
        self.halves: dict[str, tuple[str, ...]] = {}
        for srv, halves in SERVICES.items():
            self.halves[srv] = tuple(halves)
            for half, names in halves.items():
                self.fields[f"{srv}_{half}"] = {n: None for n in names}
        for kind in ("srv", "action"):
            for full in defs:
                if full.startswith(f"{PACKAGE}/{kind}/"):
                    interface, _, half = full.rpartition("_")
                    self.halves[interface] = (*self.halves.get(interface, ()), half)
        # `types.<Name>` (conversions.py, the output types): the classes messages.py hands in.
        tree = parse(ROOT / PACKAGE / "messages.py")
        self.learn_imports(tree)
        made = next(c for c in calls(tree) if ast.unparse(c.func) == "MessageTypes")
        self.types_attr = {str(k.arg): self.by_short[ast.unparse(k.value)] for k in made.keywords}
        self.by_short = {}

    def learn_imports(self, tree: ast.Module) -> None:
        """The interfaces one file imports (those of the file before are forgotten)."""
        self.by_short = {}
        for node in ast.walk(tree):
            module = node.module or "" if isinstance(node, ast.ImportFrom) else ""
            package, _, kind = module.partition(".")
            if kind not in ("msg", "srv", "action") or package == "rclpy":
                continue
            for alias in node.names:  # type: ignore[attr-defined]
                full = f"{package}/{kind}/{alias.name}"
                known = full in self.defs or full in self.halves
                assert known, f"{full} is not a Humble interface nor one of {PACKAGE}'s"
                self.by_short[alias.asname or alias.name] = full

    def type_of(self, expr: ast.AST) -> str | None:
        """The interface a class expression names, or None."""
        if isinstance(expr, ast.Name):
            return self.by_short.get(expr.id)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            if expr.value.id == "types":
                return self.types_attr.get(expr.attr)
            full = self.by_short.get(expr.value.id)
            if full is not None and expr.attr in self.halves.get(full, ()):
                return f"{full}_{expr.attr}"
        return None

    def check_path(self, full: str, path: list[str], where: str) -> object:
        """Every field of ``path`` exists. Returns the last one's type, None when the path
        goes on past a base value or sequence (whose attributes are Python's)."""
        spec: object = None
        for i, field in enumerate(path):
            fields = self.fields[full]
            assert field in fields, f"{where}: {full} has no field '{field}'"
            spec = fields[field]
            if not (isinstance(spec, tuple) and spec[0] == Nodetype.NAME):
                return spec if i == len(path) - 1 else None
            full = str(spec[1])
        return spec


def _chain(node: ast.AST) -> tuple[str, list[str]] | None:
    """`msg.a.b` -> ("msg", ["a", "b"])."""
    path: list[str] = []
    while isinstance(node, ast.Attribute):
        path.insert(0, node.attr)
        node = node.value
    return (node.id, path) if isinstance(node, ast.Name) and path else None


def _constructed_type(value: ast.AST | None, messages: Messages) -> str | None:
    """`Name()`, `types.Name()`, `ValidateChunk.Request()`, `RunEpisode.Result(...)`."""
    return messages.type_of(value.func) if isinstance(value, ast.Call) else None


def conversions_types() -> list[str]:
    tree = parse(ROOT / "sequence_ai_ros" / "conversions.py")
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "MessageTypes")
    return [item.target.id for item in cls.body if isinstance(item, ast.AnnAssign)]  # type: ignore[union-attr]


def conversions_returns(messages: Messages) -> dict[str, str]:
    """The message each conversions function returns: `types.<Name>(...)`, a name bound to
    one, or what another of them returns."""
    tree = parse(ROOT / PACKAGE / "conversions.py")
    messages.learn_imports(tree)
    funcs = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}

    def returned(name: str, seen: frozenset[str]) -> str | None:
        made: dict[str, str] = {}
        for node in ast.walk(funcs[name]):
            target = node.targets[0] if isinstance(node, ast.Assign) else None
            full = _constructed_type(node.value, messages) if target else None  # type: ignore[attr-defined]
            if isinstance(target, ast.Name) and full is not None:
                made[target.id] = full
        found: set[str | None] = set()
        for node in ast.walk(funcs[name]):
            if not isinstance(node, ast.Return) or node.value is None:
                continue
            value, full = node.value, _constructed_type(node.value, messages)
            if full is None and isinstance(value, ast.Name):
                full = made.get(value.id)
            callee = getattr(value.func, "id", None) if isinstance(value, ast.Call) else None
            if full is None and callee in funcs and callee not in seen:
                full = returned(callee, seen | {callee})
            found.add(full)
        return found.pop() if len(found) == 1 else None

    out = {name: returned(name, frozenset({name})) for name in funcs}
    return {name: full for name, full in out.items() if full is not None}


def _value_type(
    value: ast.AST | None, messages: Messages, returns: dict[str, str], file: str
) -> str | None:
    """The message a value is, where the code says: constructed, or a conversions result."""
    made = _constructed_type(value, messages)
    if made is not None or not isinstance(value, ast.Call):
        return made
    func = value.func
    if isinstance(func, ast.Attribute) and ast.unparse(func.value) == "conv":
        return returns.get(func.attr)
    if isinstance(func, ast.Name) and file == "conversions.py":
        return returns.get(func.id)
    return None


def module_constants(tree: ast.Module) -> dict[str, tuple[str, ...]]:
    """Module-level tuples of names (outcome_message.COUNTS, FIGURES)."""
    out: dict[str, tuple[str, ...]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Tuple, ast.List)):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue
            if all(isinstance(v, str) for v in value):
                out.update({t.id: tuple(value) for t in node.targets if isinstance(t, ast.Name)})
    return out


def _setattr_fields(
    call: ast.Call, func: ast.AST, constants: dict[str, tuple[str, ...]]
) -> tuple[str, ...]:
    """The fields `setattr(msg, name, value)` writes: a literal name, or every name of the
    enclosing `for name in ...` over a literal tuple or a module constant. Anything else
    fails: a field the test cannot name would go unchecked."""
    name = call.args[1]
    if isinstance(name, ast.Constant) and isinstance(name.value, str):
        return (name.value,)
    where = f"line {call.lineno}: setattr({ast.unparse(call.args[0])}, {ast.unparse(name)}, ...)"
    assert isinstance(name, ast.Name), f"{where}: which field?"
    loops = [
        n
        for n in ast.walk(func)
        if isinstance(n, ast.For)
        and isinstance(n.target, ast.Name)
        and n.target.id == name.id
        and any(c is call for c in ast.walk(n))
    ]
    assert len(loops) == 1, f"{where}: not the variable of one enclosing loop"
    over = loops[0].iter
    if isinstance(over, ast.Name):
        assert over.id in constants, f"{where}: {over.id} is not a module tuple of names"
        return constants[over.id]
    value = ast.literal_eval(over)
    assert all(isinstance(v, str) for v in value), where
    return tuple(value)


def builder_bindings(messages: Messages) -> dict[str, set[str]]:
    """outcome_message.py's builders take their message class as ``message_type``: the
    classes the node and the action hand each one, wherever they call it."""
    tree = parse(ROOT / PACKAGE / "outcome_message.py")
    builders = {
        f.name
        for f in tree.body
        if isinstance(f, ast.FunctionDef) and f.args.args and f.args.args[0].arg == "message_type"
    }
    bound: dict[str, set[str]] = {name: set() for name in builders}
    for file, source in sources([f for f in MESSAGE_FILES if f != "outcome_message.py"]):
        messages.learn_imports(source)
        for call in calls(source):
            func = call.func
            callee = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if callee in builders:
                full = messages.type_of(call.args[0])
                assert full, f"{file}:{call.lineno} {callee}({ast.unparse(call.args[0])}, ...)"
                bound[callee].add(full)
    return bound


@dataclass(frozen=True)
class Write:
    file: str
    function: str
    type: str  # the message written to
    path: tuple[str, ...]  # its field path
    line: int
    value: str | None  # the message the value written is, where the code says


def message_writes(messages: Messages) -> list[Write]:
    """Every message field the files write: constructor keywords, `msg.a.b = ...` on a name
    bound to a message, `setattr(msg, ...)` on one."""
    bindings = builder_bindings(messages)
    returns = conversions_returns(messages)
    writes: list[Write] = []
    for file, tree in sources(MESSAGE_FILES):
        messages.learn_imports(tree)
        imported, constants = dict(messages.by_short), module_constants(tree)
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            messages.by_short = dict(imported)
            if file == "outcome_message.py" and func.name in bindings:
                (messages.by_short["message_type"],) = bindings[func.name]
            known: dict[str, str] = {}

            def value_of(value: ast.AST | None) -> str | None:
                if isinstance(value, ast.Name):
                    return known.get(value.id)  # noqa: B023 (used at once)
                return _value_type(value, messages, returns, file)  # noqa: B023

            for node in ast.walk(func):
                if isinstance(node, ast.Call):
                    full = _constructed_type(node, messages)
                    for keyword in node.keywords if full else []:
                        path = (str(keyword.arg),)
                        value = value_of(keyword.value)
                        writes.append(Write(file, func.name, full, path, node.lineno, value))  # type: ignore[arg-type]
                    target = node.args[0] if node.args else None
                    setattr_on = target.id if isinstance(target, ast.Name) else ""
                    if ast.unparse(node.func) == "setattr" and setattr_on in known:
                        value = value_of(node.args[2])
                        for field in _setattr_fields(node, func, constants):
                            path = (field,)
                            write = Write(
                                file, func.name, known[setattr_on], path, node.lineno, value
                            )
                            writes.append(write)
                if isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    made = value_of(node.value) if node.value else None
                    for target in targets:
                        if isinstance(target, ast.Name) and made:
                            known[target.id] = made
                        chain = _chain(target)
                        if chain and chain[0] in known:
                            path = tuple(chain[1])
                            write = Write(file, func.name, known[chain[0]], path, node.lineno, made)
                            writes.append(write)
    return writes


def test_message_constructors_and_written_fields(msgdefs: Fielddefs) -> None:
    messages = Messages(msgdefs)
    assert set(messages.types_attr) == set(conversions_types())
    returns = conversions_returns(messages)
    assert returns["chunk_trajectory"] == "trajectory_msgs/msg/JointTrajectory"
    assert returns["joint_state"] == "sensor_msgs/msg/JointState"
    assert returns["stamp"] == "builtin_interfaces/msg/Time"
    writes = message_writes(messages)
    typed: set[tuple[str, str, str]] = set()
    for w in writes:
        spec = messages.check_path(w.type, list(w.path), f"{w.file}:{w.line}")
        # A sub-message field takes only its own class (rclpy's setter asserts isinstance).
        if isinstance(spec, tuple) and spec[0] == Nodetype.NAME and w.value is not None:
            assert w.value == spec[1], f"{w.file}:{w.line} {'.'.join(w.path)} = a {w.value}"
            typed.add((w.file, w.type, ".".join(w.path)))
    assert len(writes) >= 60
    written = {(w.file, w.type) for w in writes}
    assert {("chunk_validator.py", VALIDATE_REQUEST), ("episode_action.py", RESULT)} <= written
    assert {("episode_action.py", RUN_OUTCOME), ("outcome_message.py", FEEDBACK)} <= written
    assert ("chunk_validator.py", VALIDATE_REQUEST, "chunk") in typed
    assert ("chunk_validator.py", VALIDATE_REQUEST, "state") in typed
    assert len(typed) >= 3  # trajectory points' durations, the validator's chunk and state


def test_outcome_message_builders_are_handed_the_right_classes(msgdefs: Fielddefs) -> None:
    assert builder_bindings(Messages(msgdefs)) == {
        "outcome_message": {RUN_OUTCOME},  # the node's RunOutcomeMsg
        "feedback_message": {FEEDBACK},  # the action's RunEpisode.Feedback
    }


def test_outcome_message_writes_every_field(msgdefs: Fielddefs) -> None:
    """No field of RunOutcome.msg or of the action's feedback is left at its default by the
    builders (an unwritten uint32 reads as a real 0 to a client). None is exempt."""
    writes = message_writes(Messages(msgdefs))
    for builder, full in (("outcome_message", RUN_OUTCOME), ("feedback_message", FEEDBACK)):
        written = {
            w.path[0] for w in writes if w.file == "outcome_message.py" and w.function == builder
        }
        fields = [name for name, _ in msgdefs[full][1]]
        assert written == set(fields), (
            f"{builder}: unwritten {sorted(set(fields) - written)}, "
            f"not in {full} {sorted(written - set(fields))}"
        )


def test_outcome_message_name_tuples_match_the_msg_types(msgdefs: Fielddefs) -> None:
    """COUNTS go through _count (an int clamped into uint32), FIGURES through float():
    rclpy's setters assert the Python type, so each name must be a field of that type."""
    constants = module_constants(parse(ROOT / PACKAGE / "outcome_message.py"))
    fields = dict(msgdefs[RUN_OUTCOME][1])
    base = {name: spec[1][0] for name, spec in fields.items() if spec[0] == Nodetype.BASE}  # type: ignore[index]
    assert constants["COUNTS"] and constants["FIGURES"]
    assert {base.get(name) for name in constants["COUNTS"]} == {"uint32"}, constants["COUNTS"]
    assert {base.get(name) for name in constants["FIGURES"]} == {"float64"}, constants["FIGURES"]
    assert not set(constants["COUNTS"]) & set(constants["FIGURES"])


def test_fields_read_in_callbacks_exist(msgdefs: Fielddefs) -> None:
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


# ---------------------------------------------------------------------- action and client


def _function(tree: ast.AST, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    found = [
        n
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name
    ]
    assert len(found) == 1, f"{len(found)} functions {name}"
    return found[0]


def _assigned(func: ast.AST, target: str) -> list[str]:
    """What `target` (a name, or `self.x`) is assigned in ``func``, unparsed."""
    return [
        ast.unparse(n.value)
        for n in ast.walk(func)
        if isinstance(n, (ast.Assign, ast.AnnAssign))
        and n.value is not None
        and target in {ast.unparse(t) for t in getattr(n, "targets", [getattr(n, "target", n)])}
    ]


def _enclosing(tree: ast.AST, node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """The innermost function ``node`` is in."""
    return [
        f
        for f in ast.walk(tree)
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
        and any(n is node for n in ast.walk(f))
    ][-1]


def _is_property(member: ast.AST) -> bool:
    decorators = getattr(member, "decorator_list", [])
    return "property" in {ast.unparse(d) for d in decorators}


EPISODE_ACTION = ROOT / PACKAGE / "episode_action.py"
#: ActionServer's callback keywords: the attribute Humble keeps each in and what it awaits it
#: with (``await_or_execute(callback, argument)`` in rclpy/action/server.py).
CALLBACKS = {
    "goal_callback": ("self._goal_callback", "goal_request.goal"),  # the Goal message
    "handle_accepted_callback": ("self._handle_accepted_callback", "goal_handle"),
    "cancel_callback": ("self._cancel_callback", "goal_handle"),
    "execute_callback": ("execute_callback", "goal_handle"),
}


def _callback_methods(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """ActionServer's keyword -> the EpisodeAction method passed for it."""
    (call,) = [c for c in calls(tree) if ast.unparse(c.func) == "ActionServer"]
    methods = {}
    for keyword in call.keywords:
        value = keyword.value
        assert isinstance(value, ast.Attribute) and ast.unparse(value.value) == "self"
        methods[str(keyword.arg)] = _function(tree, value.attr)
    return methods


def test_the_action_server_is_built_and_answered_as_humble_defines_it(
    api: dict[str, dict[str, ast.AST]], msgdefs: Fielddefs
) -> None:
    tree = parse(EPISODE_ACTION)
    (call,) = [c for c in calls(tree) if ast.unparse(c.func) == "ActionServer"]
    init = api["ActionServer"]["__init__"]
    assert isinstance(init, ast.FunctionDef)
    assert Sig.of(init).problem(call) is None, ast.unparse(call)
    messages = Messages(msgdefs)
    messages.learn_imports(tree)
    assert messages.type_of(call.args[1]) == f"{PACKAGE}/action/RunEpisode"
    server = parse(RCLPY / "action" / "server.py")
    handed = {
        ast.unparse(c.args[0]): ast.unparse(c.args[1])
        for c in calls(server)
        if ast.unparse(c.func) == "await_or_execute"
    }
    methods = _callback_methods(tree)
    assert set(methods) == set(CALLBACKS)
    for keyword, (attribute, argument) in CALLBACKS.items():
        assert handed[attribute] == argument, f"Humble hands {keyword} {handed[attribute]}"
        sig = Sig.of(methods[keyword])  # type: ignore[arg-type]
        assert len(sig.positional) - sig.defaults <= 1 <= len(sig.positional), keyword
        assert not sig.kw_required, keyword
    # Humble awaits a coroutine function's result (await_or_execute: iscoroutinefunction).
    assert "inspect.iscoroutinefunction(callback)" in (RCLPY / "executors.py").read_text()
    assert isinstance(methods["execute_callback"], ast.AsyncFunctionDef)
    # Humble rejects a goal whose callback answers anything but a GoalResponse; a cancel is
    # accepted only on CancelResponse.ACCEPT.
    for keyword, enum in (("goal_callback", "GoalResponse"), ("cancel_callback", "CancelResponse")):
        returns = [n.value for n in ast.walk(methods[keyword]) if isinstance(n, ast.Return)]
        assert len(returns) >= 2, keyword
        for value in returns:
            assert value is not None and ast.unparse(value).startswith(f"{enum}."), keyword
    members = set()
    for node in ast.walk(tree):
        enum = ast.unparse(node.value) if isinstance(node, ast.Attribute) else ""
        if enum in ("GoalResponse", "CancelResponse"):
            assert node.attr in api[enum], f"{enum}.{node.attr}"  # type: ignore[attr-defined]
            members.add(f"{enum}.{node.attr}")  # type: ignore[attr-defined]
    both = ("ACCEPT", "REJECT")
    assert members == {f"{e}.{m}" for e in ("GoalResponse", "CancelResponse") for m in both}
    # _on_cancel tells its goal by identity: Humble hands the cancel callback the very handle
    # it handed the accepted callback, both kept in its _goal_handles.
    accepted = ast.unparse(_function(server, "_execute_goal_request"))
    assert "self._goal_handles[bytes(goal_uuid.uuid)] = goal_handle" in accepted
    assert "await await_or_execute(self._handle_accepted_callback, goal_handle)" in accepted
    canceling = _function(server, "_execute_cancel_request")
    assert _assigned(canceling, "goal_handle") == ["self._goal_handles[goal_uuid]"]
    # The server is destroyed with the node's entities.
    on_server = [c for c in calls(tree) if receiver(c) == "self._server"]
    assert on_server
    for c in on_server:
        member = api["ActionServer"].get(c.func.attr)  # type: ignore[attr-defined]
        assert isinstance(member, ast.FunctionDef) and Sig.of(member).problem(c) is None


def test_the_goal_future_is_humbles(api: dict[str, dict[str, ast.AST]]) -> None:
    """The execute callback awaits the goal's rclpy.task.Future: Humble's yields until it is
    done, then gives its result; it is built with keywords only."""
    future = api["Future"]
    assert "return self.result()" in ast.unparse(future["__await__"])
    tree = parse(EPISODE_ACTION)
    imported = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert any(
        n.module == "rclpy.task" and [a.name for a in n.names] == ["Future"] for n in imported
    )
    made = [c for c in calls(tree) if ast.unparse(c.func) == "Future"]
    assert made
    init = future["__init__"]
    assert isinstance(init, ast.FunctionDef)
    for c in made:
        assert Sig.of(init).problem(c) is None, f"episode_action.py:{c.lineno}"
    awaited = [n for n in ast.walk(tree) if isinstance(n, ast.Await)]
    assert [ast.unparse(n.value) for n in awaited] == ["goal.ended"]
    assert _assigned(classes(EPISODE_ACTION)["_Goal"]["__init__"], "self.ended") == ["Future()"]


def test_goal_handles_are_used_as_humble_defines_them(
    api: dict[str, dict[str, ast.AST]], msgdefs: Fielddefs
) -> None:
    """Every attribute read or method called on a ServerGoalHandle exists in Humble's, a
    property read (not called), a method called with its signature; the messages it holds
    are read by their fields."""
    handle_api = api["ServerGoalHandle"]
    tree = parse(EPISODE_ACTION)
    methods = _callback_methods(tree)
    params = {
        methods[k].name: methods[k].args.args[1].arg
        for k in ("handle_accepted_callback", "cancel_callback", "execute_callback")
    }
    # _Goal keeps the accepted handle as its .handle, and is built only from one.
    goal_init = classes(EPISODE_ACTION)["_Goal"]["__init__"]
    assert isinstance(goal_init, ast.FunctionDef)
    assert _assigned(goal_init, "self.handle") == [goal_init.args.args[1].arg]
    for c in calls(tree):
        if ast.unparse(c.func) == "_Goal":
            assert [ast.unparse(a) for a in c.args] in ([p] for p in params.values()), c.lineno
    receivers: list[ast.Attribute] = []
    for name, param in params.items():
        for node in ast.walk(_function(tree, name)):
            if isinstance(node, ast.Attribute) and ast.unparse(node.value) == param:
                receivers.append(node)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
            inner = node.value
            if inner.attr == "handle" and ast.unparse(inner.value) != "self":
                receivers.append(node)  # goal.handle.<member>
    # What the handle's message properties hold in Humble.
    request = handle_api["request"]
    goal_id = handle_api["goal_id"]
    assert ast.unparse(request.body[-1]) == "return self._goal_request"  # type: ignore[attr-defined]
    assert ast.unparse(goal_id.body[-1]) == "return self._goal_info.goal_id"  # type: ignore[attr-defined]
    server_text = ast.unparse(parse(RCLPY / "action" / "server.py"))
    assert "ServerGoalHandle(self, goal_info, goal_request.goal)" in server_text
    assert "goal_info = GoalInfo()" in server_text
    uuid_type = dict(msgdefs["action_msgs/msg/GoalInfo"][1])["goal_id"][1]  # type: ignore[index]
    holds = {"request": GOAL, "goal_id": str(uuid_type)}
    messages = Messages(msgdefs)
    parents = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    used, read = set(), 0
    for node in receivers:
        where = f"episode_action.py:{node.lineno} {ast.unparse(node)}"
        member = handle_api.get(node.attr)
        assert isinstance(member, ast.FunctionDef), f"{where}: ServerGoalHandle has no {node.attr}"
        parent = parents[id(node)]
        called = isinstance(parent, ast.Call) and parent.func is node
        assert called != _is_property(member), f"{where}: a {'method' if called else 'property'}"
        if isinstance(parent, ast.Call) and called:
            assert Sig.of(member).problem(parent) is None, where
        used.add(node.attr)
        path, up = [], parent
        while isinstance(up, ast.Attribute):  # handle.goal_id.uuid
            path.append(up.attr)
            up = parents.get(id(up))
        if node.attr in holds and path:
            messages.check_path(holds[node.attr], path, where)
            read += 1
    wanted = {"request", "goal_id", "execute", "succeed", "abort", "canceled", "publish_feedback"}
    assert wanted | {"is_cancel_requested"} <= used
    assert read >= 2  # goal_id.uuid, twice
    # Humble's publish_feedback refuses anything but the action's Feedback class.
    messages.learn_imports(tree)
    published = [c for c in calls(tree) if getattr(c.func, "attr", "") == "publish_feedback"]
    assert published
    for c in published:
        (sent,) = c.args
        (bound,) = _assigned(_enclosing(tree, c), ast.unparse(sent))
        made = ast.parse(bound, mode="eval").body
        assert isinstance(made, ast.Call) and ast.unparse(made.func) == "feedback_message"
        assert messages.type_of(made.args[0]) == FEEDBACK, bound
    # The execute callback returns the action's Result (Humble sends it as the result).
    execute = methods["execute_callback"]
    returns = [n.value for n in ast.walk(execute) if isinstance(n, ast.Return)]
    assert returns
    for value in returns:
        assert isinstance(value, ast.Name)
        (bound,) = _assigned(execute, value.id)
        assert messages.type_of(ast.parse(bound, mode="eval").body.func) == RESULT  # type: ignore[attr-defined]


#: Names the new modules read message fields from: what each is bound to in its function
#: (None: a parameter) and the interface that holds; where each comes from is checked below.
READ_NAMES = {
    ("episode_action.py", "_on_accepted", "request"): ("handle.request", GOAL),
    ("episode_action.py", "_execute", "outcome"): ("await goal.ended", RUN_OUTCOME),
    ("episode_action.py", "ended", "outcome"): (None, RUN_OUTCOME),
    ("chunk_validator.py", "check", "response"): ("future.result()", VALIDATE_RESPONSE),
}


def test_fields_the_action_and_the_validator_read_exist(msgdefs: Fielddefs) -> None:
    messages = Messages(msgdefs)
    action, validator = parse(EPISODE_ACTION), parse(ROOT / PACKAGE / "chunk_validator.py")
    # Where the names' values come from. `handle` of _on_accepted is the accepted goal's
    # ServerGoalHandle, whose request is the Goal (test above).
    assert _callback_methods(action)["handle_accepted_callback"].name == "_on_accepted"
    assert _function(action, "_on_accepted").args.args[1].arg == "handle"
    # goal.ended is a Future that only ever holds a RunOutcome message ...
    messages.learn_imports(action)
    settled = [c for c in calls(action) if ast.unparse(c.func).endswith(".ended.set_result")]
    assert len(settled) == 2
    for c in settled:
        (value,) = c.args
        made = _constructed_type(value, messages)
        passed_on = (_enclosing(action, c).name, ast.unparse(value)) == ("ended", "outcome")
        assert made == RUN_OUTCOME or passed_on, ast.unparse(c)  # ended(outcome): below
    # ... as ended() is handed by the node: outcome_message(RunOutcomeMsg, ...)
    node = parse(ROOT / PACKAGE / "policy_node.py")
    messages.learn_imports(node)
    told = [c for c in calls(node) if ast.unparse(c.func) == "self.episode_action.ended"]
    assert told
    for c in told:
        (arg,) = c.args
        (bound,) = _assigned(_enclosing(node, c), ast.unparse(arg))
        made = ast.parse(bound, mode="eval").body
        assert isinstance(made, ast.Call) and ast.unparse(made.func) == "outcome_message"
        assert messages.type_of(made.args[0]) == RUN_OUTCOME
    # The validator's future is its ValidateChunk client's.
    messages.learn_imports(validator)
    (client,) = _assigned(_function(validator, "__init__"), "self._client")
    made = ast.parse(client, mode="eval").body
    assert isinstance(made, ast.Call) and ast.unparse(made.func) == "node.create_client"
    assert f"{messages.type_of(made.args[0])}_Response" == VALIDATE_RESPONSE
    (future,) = _assigned(_function(validator, "check"), "future")
    assert future.startswith("self._client.call_async(")

    trees = {"episode_action.py": action, "chunk_validator.py": validator}
    for (file, function, name), (bound_to, full) in READ_NAMES.items():
        func = _function(trees[file], function)
        if bound_to is None:
            assert name in [a.arg for a in func.args.args] and not _assigned(func, name)
        else:
            assert _assigned(func, name) == [bound_to], (file, function, name)
        read = 0
        for node in ast.walk(func):
            where = f"{file}:{getattr(node, 'lineno', '?')}"
            chain = _chain(node) if isinstance(node, ast.Attribute) else None
            if chain and chain[0] == name:
                messages.check_path(full, chain[1], where)
                read += 1
            call = node if isinstance(node, ast.Call) else None
            if call and ast.unparse(call.func) == "getattr" and ast.unparse(call.args[0]) == name:
                field = call.args[1]
                assert isinstance(field, ast.Constant), where
                messages.check_path(full, [str(field.value)], where)
                read += 1
        assert read, f"{file} {function}() reads nothing of {name}: the table is stale"


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


def assert_implements(module: str, protocol_name: str) -> set[str]:
    """PolicyNode implements ``module``'s ``protocol_name``: every method and property, with
    the protocol's parameters (an optional one optional in the node too). mypy cannot check
    it: PolicyNode subclasses rclpy's Node, which is Any without stubs."""
    protocol = classes(ROOT / PACKAGE / module)[protocol_name]
    node = classes(ROOT / PACKAGE / "policy_node.py")["PolicyNode"]
    for name, wanted in protocol.items():
        assert isinstance(wanted, ast.FunctionDef), name
        found = node.get(name)
        assert isinstance(found, ast.FunctionDef), f"PolicyNode has no method {name}"
        is_property = {ast.unparse(d) for d in wanted.decorator_list} == {"property"}
        assert is_property == ("property" in {ast.unparse(d) for d in found.decorator_list})
        need, have = Sig.of(wanted), Sig.of(found)
        assert have.positional[: len(need.positional)] == need.positional, name
        assert len(have.positional) - have.defaults <= len(need.positional) - need.defaults, name
        assert set(need.kwonly) <= set(have.kwonly), name
        assert set(have.kw_required) <= set(need.kw_required), name
    return set(protocol)


def test_the_node_implements_the_controller_protocol_its_interfaces_call() -> None:
    implemented = assert_implements("interfaces.py", "EpisodeController")
    assert {"start_episode", "stop_episode", "on_estop", "episode_number"} <= implemented


def test_the_node_implements_the_controller_protocol_its_action_calls() -> None:
    implemented = assert_implements("episode_action.py", "GoalController")
    assert {"start_refusal", "start_episode", "stop_episode", "episode_number"} <= implemented
    # the node hands itself as the controller
    init = classes(ROOT / PACKAGE / "policy_node.py")["PolicyNode"]["__init__"]
    assert "self.episode_action = EpisodeAction(self, self)" in ast.unparse(init)


def _members(path: Path, names: set[str], *, methods: bool = True) -> set[str]:
    """What the classes ``names`` of ``path`` set on ``self``, and the methods they define."""
    found: set[str] = set()
    for cls in ast.walk(parse(path)):
        if not (isinstance(cls, ast.ClassDef) and cls.name in names):
            continue
        if methods:
            found |= {f.name for f in cls.body if isinstance(f, ast.FunctionDef)}
        for node in ast.walk(cls):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
            ):
                found.add(node.attr)
    return found


@pytest.mark.parametrize(
    ("module", "name"), [("policy_node", "PolicyNode"), ("sim_arm_node", "SimArmNode")]
)
def test_our_nodes_set_nothing_rclpy_keeps_on_its_nodes(module: str, name: str) -> None:
    """Our state on ``self`` must not overwrite rclpy's: a node's ``_clock`` is its ROS clock,
    which declaring a parameter reads. (Our methods override rclpy's on purpose.)"""
    ours = _members(ROOT / PACKAGE / f"{module}.py", {name}, methods=False)
    lifecycle = RCLPY / "lifecycle" / "node.py"
    rclpys = _members(RCLPY / "node.py", {"Node"}) | _members(lifecycle, {"LifecycleNodeMixin"})
    assert ours and "_clock" in rclpys  # both sources read
    assert sorted(ours & rclpys) == []
