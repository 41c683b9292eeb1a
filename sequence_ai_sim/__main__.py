"""``python -m sequence_ai_sim``: the same as ``sequence-ai sim``."""

import sys

from .cli import main

sys.exit(main())
