"""The simulator's listening socket: accepts connections, one daemon thread each.

The stdlib ``ThreadingHTTPServer`` model, with TLS wrapped per connection and every
connection thread registered with the shared ``SimState`` so ``stop()`` can join them. It
knows the handler only as the class it is given, so the handler, this module and
``server.GatewaySimulator`` import in one direction: server -> handler -> listener -> state.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .state import SimState

log = logging.getLogger(__name__)


class Listener(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # The stdlib default backlog of 5 drops SYNs when a benchmark opens many connections at
    # once, which would show up as 1 s connect stalls that are not the gateway's doing.
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        state: SimState,
        ssl_context: ssl.SSLContext | None,
    ) -> None:
        #: What the handler of every connection reads and updates.
        self.state = state
        self._ssl_context = ssl_context
        super().__init__(address, handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = self.socket.accept()
        if self._ssl_context is not None:
            # The handshake runs on the connection's own thread (see handler.setup), so a slow
            # or broken client cannot stall the accept loop.
            sock = self._ssl_context.wrap_socket(
                sock, server_side=True, do_handshake_on_connect=False
            )
        return sock, address

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name="sim-connection",
            daemon=True,
        )
        self.state.track_thread(thread)
        thread.start()

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("simulator connection ended with an error", exc_info=True)
