"""The General Sequences gateway backend: HTTP/1.1 with kept-alive connections, sockets under
absolute deadlines, bounded bodies, the wire contract (DESIGN §3) and the catalogue."""
