"""What a server may send: the one place the client's limits are set (docs/architecture.md §2).

Parsing holds the GIL, so the control thread waits while a worker parses an answer; these
caps bound that wait as much as memory: the largest chunk allowed below (128 x 32 values)
parses in a small fraction of what an unbounded 1000 x 32 chunk takes, and a body of the
most expensive shape (single-digit numbers) is refused by ``MAX_JSON_ITEMS`` before parsing
(what parsing costs: docs/performance.md, "Hostile gateways and parsing").
"""

from __future__ import annotations

#: Decoded bytes of any one answer (after any content encoding). The largest allowed chunk
#: at full float precision is about 45 kB; a catalogue of 300 models is about 100 kB.
MAX_BODY_BYTES = 128 * 1024
#: Commas in one body (one per value or member but the last of each list or object),
#: counted before parsing: the cost of ``json.loads`` grows with the number of values, not
#: bytes. The largest allowed chunk, as ``{"index", "values"}`` steps, has about 2,100.
MAX_JSON_ITEMS = 4096
#: Steps in one chunk, values per step, values per chunk. 50 Hz x 2.1 s = 105 steps is the
#: longest chunk a catalogue model documents; pi0-style models send 50 steps of 32 values
#: (1,600), within the 2,048 that keep a parse near a millisecond.
MAX_STEPS = 256
MAX_ACTION_DIM = 64
MAX_CHUNK_VALUES = 2048
#: Control rates a chunk may declare. Below 1 Hz a single step would hold the arm on one
#: command for over a second; above 1 kHz no HTTP-fed loop can keep up.
MIN_CONTROL_HZ = 1.0
MAX_CONTROL_HZ = 1000.0
#: A chunk's rate may differ from the catalogue's by this fraction (rounding in the
#: gateway's JSON); more means the chunk would play at a speed the model was not made for.
CONTROL_HZ_TOLERANCE = 0.01
#: Content encodings decoded (each layer bounded by ``MAX_BODY_BYTES``). The client asks for
#: ``identity``; these are accepted only because a proxy may compress anyway.
DECODABLE_ENCODINGS = ("gzip", "x-gzip", "deflate")
#: At most this many stacked encodings (``Content-Encoding: gzip, gzip, ...``).
MAX_ENCODING_LAYERS = 2
#: Bytes of one frame an openpi server may send (its metadata, or an answer). The largest
#: chunk allowed above as float64 is 16 kB (MAX_CHUNK_VALUES x 8); openpi answers also
#: carry ``server_timing`` and whatever the policy adds (pi0 servers return ``state`` too).
MAX_OPENPI_FRAME_BYTES = 1024 * 1024
