"""The flight recorder: every episode as a rosbag2 (MCAP) bag, and a report of one.

Optional: ``pip install 'sequence-ai-ros[record]'`` (rosbags) to record, ``[report]`` (adds
matplotlib) for ``sequence-ai report BAG``. Nothing here is imported unless recording is on.
"""
