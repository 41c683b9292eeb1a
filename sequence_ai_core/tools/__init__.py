"""The ``sequence-ai`` command (models, login, doctor, sim) and ``make demo``."""
