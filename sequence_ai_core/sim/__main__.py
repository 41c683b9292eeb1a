"""``python -m sequence_ai_core.sim``: the same as ``sequence-ai sim``."""

import sys

from .cli import main

sys.exit(main())
