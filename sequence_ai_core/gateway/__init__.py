"""The General Sequences gateway backend: HTTP/1.1 with kept-alive connections, sockets under
absolute deadlines, bounded bodies, the wire contract (docs/architecture.md §2), the catalogue,
and at its edge the one mapping from an answer to a typed error (``error_map``)."""
