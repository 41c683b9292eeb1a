"""The General Sequences gateway backend: HTTP/1.1 with kept-alive connections, sockets under
absolute deadlines, bounded bodies, the wire contract (docs/architecture.md §2) and the
catalogue."""
