"""The public model catalogue (GET /v1/models): no key needed."""

from __future__ import annotations

import ssl

from ..credentials import resolve_api_key
from ..types import Model
from .transport import Transport, resolve_base_url
from .wire import parse_models


def models(
    *,
    endpoint: str | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
    verify: bool | str | ssl.SSLContext = True,
    allow_insecure_http: bool = False,
    timeout_s: float = 30.0,
) -> list[Model]:
    """List the gateway's models, optionally only those serving ``endpoint`` (e.g. ``"act"``).

    The catalogue is public; a resolved key is still sent so a gateway may show private models.
    """
    transport = Transport(
        resolve_base_url(base_url, allow_insecure_http=allow_insecure_http),
        resolve_api_key(api_key),
        timeout_s=timeout_s,
        verify=verify,
        max_connections=1,
    )
    try:
        params = {"endpoint": endpoint} if endpoint else None
        body, request_id, _ = transport.request("GET", "/v1/models", params=params)
        return parse_models(body, request_id=request_id, secret=transport.secret)
    finally:
        transport.close()
