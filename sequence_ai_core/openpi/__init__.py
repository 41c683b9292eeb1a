"""The openpi backend: drive openpi policy servers (``WebsocketPolicyServer``) with the same
engine, checks and hold rules as the gateway. ``connect("ws://host:8000", profile="droid")``
selects it; its dependencies (websockets, msgpack) are the ``openpi`` extra and are imported
only when it is used, so this package's ``profiles`` work without them."""

from .profiles import BUILTIN, ImageSpec, Profile, StateSpec
from .rtc import RtcSpec
from .user_profiles import load_profile, profile_from_mapping

__all__ = [
    "BUILTIN",
    "ImageSpec",
    "Profile",
    "RtcSpec",
    "StateSpec",
    "load_profile",
    "profile_from_mapping",
]
