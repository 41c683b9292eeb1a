"""What the tests share: simulators and rigs on real servers, fake clocks, recorded episodes,
the real-ROS tier's processes (``realros``). Test files import from here, never from one
another; ``conftest.py`` (its folder on ``sys.path``) makes ``support`` importable."""

from __future__ import annotations

#: The key every simulator in the suite requires.
TEST_KEY = "sk-test-0123456789abcdef"
