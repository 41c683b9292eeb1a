"""rclpy.node.Node, rclpy.lifecycle and the entities they create, with rclpy 3.3.15 signatures.

Only the surface the project's nodes use. Behaviour kept because bugs hide there: a lifecycle
publisher drops messages unless activated (and only the base on_activate/on_deactivate switch
it), an exception in a transition callback becomes ERROR without a log line, publish() rejects
a message of the wrong type, destroyed entities stop receiving.
"""

from __future__ import annotations

import itertools
from typing import Any

from .entities import (
    Client,
    Clock,
    LifecyclePublisher,
    Logger,
    Publisher,
    QoSProfile,
    Service,
    Subscription,
    Timer,
    TransitionCallbackReturn,
    _Entity,
    qos_profile_services_default,
)
from .graph import Graph, resolve
from .parameters import Parameter, ParameterStore


def _remappings(cli_args: list[str]) -> dict[str, str]:
    """`--ros-args -r from:=to` pairs (only plain topic/service remaps)."""
    remaps = {}
    for flag, rule in itertools.pairwise(cli_args):
        if flag in ("-r", "--remap") and ":=" in rule:
            source, target = rule.split(":=", 1)
            remaps[source] = target
    return remaps


class Node(ParameterStore):
    graph: Graph  # set by install()

    def __init__(
        self,
        node_name: str,
        *,
        context: Any = None,
        cli_args: list[str] | None = None,
        namespace: str | None = None,
        use_global_arguments: bool = True,
        enable_rosout: bool = True,
        start_parameter_services: bool = True,
        parameter_overrides: list[Parameter] | None = None,
        allow_undeclared_parameters: bool = False,
        automatically_declare_parameters_from_overrides: bool = False,
    ) -> None:
        self._name = node_name
        self._namespace = namespace or "/"
        self._remaps = _remappings(cli_args or [])
        self._init_parameters(parameter_overrides)
        self.log_records: list[tuple[str, str]] = []
        self._logger = Logger(self.log_records)
        self.publishers: list[Publisher] = []
        self.subscriptions: list[Subscription] = []
        self.timers: list[Timer] = []
        self.services: list[Service] = []
        self.clients: list[Client] = []
        self.graph.nodes.append(self)

    def get_name(self) -> str:
        return self._name

    def get_namespace(self) -> str:
        return self._namespace

    def get_logger(self) -> Logger:
        return self._logger

    def get_clock(self) -> Clock:
        return Clock()

    def _resolve(self, name: str) -> str:
        name = self._remaps.get(name, name)
        return resolve(name, self._name, self._namespace)

    def create_publisher(
        self,
        msg_type: Any,
        topic: str,
        qos_profile: Any,
        *,
        callback_group: Any = None,
        event_callbacks: Any = None,
        qos_overriding_options: Any = None,
        publisher_class: type[Publisher] = Publisher,
    ) -> Publisher:
        assert isinstance(qos_profile, (QoSProfile, int))
        publisher = publisher_class(self, msg_type, self._resolve(topic), qos_profile)
        self.publishers.append(publisher)
        return publisher

    def create_subscription(
        self,
        msg_type: Any,
        topic: str,
        callback: Any,
        qos_profile: Any,
        *,
        callback_group: Any = None,
        event_callbacks: Any = None,
        qos_overriding_options: Any = None,
        raw: bool = False,
    ) -> Subscription:
        assert isinstance(qos_profile, (QoSProfile, int))
        subscription = Subscription(msg_type, self._resolve(topic), callback, qos_profile)
        self.subscriptions.append(subscription)
        self.graph.subscribe(subscription)
        return subscription

    def create_service(
        self,
        srv_type: Any,
        srv_name: str,
        callback: Any,
        *,
        qos_profile: Any = qos_profile_services_default,
        callback_group: Any = None,
    ) -> Service:
        service = Service(srv_type, self._resolve(srv_name), callback)
        assert service.srv_name not in self.graph.services, f"{service.srv_name} exists"
        self.graph.services[service.srv_name] = service
        self.services.append(service)
        return service

    def create_client(
        self,
        srv_type: Any,
        srv_name: str,
        *,
        qos_profile: Any = qos_profile_services_default,
        callback_group: Any = None,
    ) -> Client:
        client = Client(self.graph, srv_type, self._resolve(srv_name))
        self.clients.append(client)
        return client

    def create_timer(
        self,
        timer_period_sec: float,
        callback: Any,
        callback_group: Any = None,
        clock: Any = None,
    ) -> Timer:
        timer = Timer(timer_period_sec, callback)
        self.timers.append(timer)
        return timer

    def _destroy(self, entity: _Entity, owner: list[Any]) -> bool:
        if entity not in owner:
            return False
        owner.remove(entity)
        entity.destroyed = True
        return True

    def destroy_publisher(self, publisher: Publisher) -> bool:
        self.graph.forget(publisher)
        return self._destroy(publisher, self.publishers)

    def destroy_subscription(self, subscription: Subscription) -> bool:
        self.graph.subscriptions[subscription.topic_name].remove(subscription)
        return self._destroy(subscription, self.subscriptions)

    def destroy_service(self, service: Service) -> bool:
        self.graph.services.pop(service.srv_name, None)
        return self._destroy(service, self.services)

    def destroy_client(self, client: Client) -> bool:
        return self._destroy(client, self.clients)

    def destroy_timer(self, timer: Timer) -> bool:
        return self._destroy(timer, self.timers)

    def destroy_node(self) -> None:
        for entity in [*self.publishers, *self.subscriptions, *self.timers, *self.services]:
            entity.destroyed = True
        for publisher in self.publishers:
            self.graph.forget(publisher)
        for subscription in self.subscriptions:
            self.graph.subscriptions[subscription.topic_name].remove(subscription)
        for service in self.services:
            self.graph.services.pop(service.srv_name, None)
        if self in self.graph.nodes:
            self.graph.nodes.remove(self)


class LifecycleState:
    def __init__(self, label: str, state_id: int) -> None:
        self.label, self.state_id = label, state_id


# (start, transition) -> (intermediate, success, failure)
_TRANSITIONS = {
    ("unconfigured", "configure"): ("configuring", "inactive", "unconfigured"),
    ("inactive", "cleanup"): ("cleaningup", "unconfigured", "inactive"),
    ("inactive", "activate"): ("activating", "active", "inactive"),
    ("active", "deactivate"): ("deactivating", "inactive", "active"),
    ("unconfigured", "shutdown"): ("shuttingdown", "finalized", "unconfigured"),
    ("inactive", "shutdown"): ("shuttingdown", "finalized", "inactive"),
    ("active", "shutdown"): ("shuttingdown", "finalized", "active"),
}
_CALLBACKS = {
    "configuring": "on_configure",
    "cleaningup": "on_cleanup",
    "activating": "on_activate",
    "deactivating": "on_deactivate",
    "shuttingdown": "on_shutdown",
}


class LifecycleNode(Node):
    def __init__(self, node_name: str, *, enable_communication_interface: bool = True, **kw: Any):
        super().__init__(node_name, **kw)
        self.lifecycle_state = "unconfigured"
        self._managed_entities: set[Any] = set()

    def create_lifecycle_publisher(self, *args: Any, **kwargs: Any) -> Publisher:
        if "publisher_class" in kwargs:
            raise TypeError(
                "create_publisher() got an unexpected keyword argument 'publisher_class'"
            )
        publisher = self.create_publisher(*args, **kwargs, publisher_class=LifecyclePublisher)
        self._managed_entities.add(publisher)
        return publisher

    def destroy_lifecycle_publisher(self, publisher: Publisher) -> bool:
        self._managed_entities.discard(publisher)
        return self.destroy_publisher(publisher)

    def _each(self, name: str, state: Any) -> TransitionCallbackReturn:
        for entity in self._managed_entities:
            result = getattr(entity, name, lambda s: TransitionCallbackReturn.SUCCESS)(state)
            if result != TransitionCallbackReturn.SUCCESS:
                return result
        return TransitionCallbackReturn.SUCCESS

    def on_configure(self, state: Any) -> TransitionCallbackReturn:
        return self._each("on_configure", state)

    def on_cleanup(self, state: Any) -> TransitionCallbackReturn:
        return self._each("on_cleanup", state)

    def on_shutdown(self, state: Any) -> TransitionCallbackReturn:
        return self._each("on_shutdown", state)

    def on_activate(self, state: Any) -> TransitionCallbackReturn:
        return self._each("on_activate", state)

    def on_deactivate(self, state: Any) -> TransitionCallbackReturn:
        return self._each("on_deactivate", state)

    def on_error(self, state: Any) -> TransitionCallbackReturn:
        return self._each("on_error", state)

    def _run(self, callback_name: str, previous: str) -> TransitionCallbackReturn:
        try:
            result = getattr(self, callback_name)(LifecycleState(previous, 0))
        except Exception:  # rclpy 3.3 swallows it without logging
            return TransitionCallbackReturn.ERROR
        assert isinstance(result, TransitionCallbackReturn), f"{callback_name} returned {result!r}"
        return result

    def _change(self, transition: str) -> TransitionCallbackReturn:
        start = self.lifecycle_state
        if (start, transition) not in _TRANSITIONS:
            raise RuntimeError(f"transition {transition} not valid from {start}")
        intermediate, success, failure = _TRANSITIONS[(start, transition)]
        self.lifecycle_state = intermediate
        result = self._run(_CALLBACKS[intermediate], start)
        if result == TransitionCallbackReturn.SUCCESS:
            self.lifecycle_state = success
        elif result == TransitionCallbackReturn.FAILURE:
            self.lifecycle_state = failure
        else:
            self.lifecycle_state = "errorprocessing"
            recovered = self._run("on_error", start) == TransitionCallbackReturn.SUCCESS
            self.lifecycle_state = "unconfigured" if recovered else "finalized"
        return result

    def trigger_configure(self) -> TransitionCallbackReturn:
        return self._change("configure")

    def trigger_cleanup(self) -> TransitionCallbackReturn:
        return self._change("cleanup")

    def trigger_activate(self) -> TransitionCallbackReturn:
        return self._change("activate")

    def trigger_deactivate(self) -> TransitionCallbackReturn:
        return self._change("deactivate")

    def trigger_shutdown(self) -> TransitionCallbackReturn:
        return self._change("shutdown")
