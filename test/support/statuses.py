"""The typed error each gateway status becomes: the examples the error and fault tests hold
the client to."""

from __future__ import annotations

from sequence_ai_core import (
    AuthError,
    InvalidRequest,
    OutOfCredit,
    PermissionDenied,
    SequencesError,
    Unavailable,
)

EXPECTED: dict[int, type[SequencesError]] = {
    400: InvalidRequest,
    401: AuthError,
    402: OutOfCredit,
    403: PermissionDenied,
    404: InvalidRequest,
    409: InvalidRequest,
    410: InvalidRequest,
    413: InvalidRequest,
    422: InvalidRequest,
    429: Unavailable,
    500: SequencesError,
    501: SequencesError,
    502: Unavailable,
    503: Unavailable,
    504: Unavailable,
}
