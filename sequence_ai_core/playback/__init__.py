"""Playback: the tick-driven engine over any chunk source (time-indexed plans, just-in-time
and pipelined refills, retries and load backoff), the episode both drivers share, ``run()``'s
loop, and the measured ``RunOutcome``."""
