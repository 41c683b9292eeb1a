"""The simulator's model slots serve queued requests in arrival order, as a gateway's queue
does. With a semaphore a freed slot went to whichever thread asked next (a request that
arrived later), and a waiter that woke to check for shutdown lost its place."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from support import TEST_KEY
from support.gateway_requests import act_request

from sequence_ai_sim import GatewaySimulator
from sequence_ai_sim.slots import FifoSlots

POLL_S = 0.01


def _queue_behind(
    slots: FifoSlots, stopping: threading.Event, got: list[int], name: int
) -> threading.Thread:
    """A thread that waits for a slot and notes when it got one; returns once it waits."""
    waiting = slots.waiting
    thread = threading.Thread(target=lambda: slots.take(stopping, POLL_S) and got.append(name))
    thread.start()
    deadline = time.monotonic() + 5
    while slots.waiting == waiting and time.monotonic() < deadline:
        time.sleep(0.001)
    assert slots.waiting == waiting + 1
    return thread


def test_a_freed_slot_goes_to_the_oldest_waiter_not_to_a_newcomer() -> None:
    slots, stopping, got = FifoSlots(1), threading.Event(), []
    assert slots.take(stopping, POLL_S)
    first = _queue_behind(slots, stopping, got, 1)
    slots.give_back()
    first.join(5)
    assert got == [1]
    # the slot is held by the waiter now: a newcomer queues instead of taking it
    second = _queue_behind(slots, stopping, got, 2)
    assert got == [1]
    slots.give_back()
    second.join(5)
    assert got == [1, 2]


def test_waiters_are_served_in_arrival_order_across_many_polls() -> None:
    slots, stopping, got = FifoSlots(1), threading.Event(), []
    assert slots.take(stopping, POLL_S)
    threads = [_queue_behind(slots, stopping, got, n) for n in range(6)]
    time.sleep(10 * POLL_S)  # every waiter has woken to check for shutdown several times
    for n in range(6):
        slots.give_back()
        threads[n].join(5)
        assert got == list(range(n + 1))
    assert slots.max_waiting == 6


def test_a_waiter_leaves_the_queue_on_stop_and_holds_no_slot() -> None:
    slots, stopping, got = FifoSlots(1), threading.Event(), []
    assert slots.take(stopping, POLL_S)
    waiter = _queue_behind(slots, stopping, got, 1)
    stopping.set()
    waiter.join(5)
    assert got == [] and slots.waiting == 0
    slots.give_back()
    assert slots.take(threading.Event(), POLL_S)  # the one slot is free again


@pytest.mark.timing
def test_the_simulator_answers_queued_requests_in_the_order_they_came() -> None:
    with GatewaySimulator(api_key=TEST_KEY, latency_s=1.5, workers=1) as sim:
        finished: list[int] = []
        lock = threading.Lock()

        def send(name: int) -> None:
            with httpx.Client(base_url=sim.url, timeout=60.0) as http:
                headers = {"Authorization": f"Bearer {TEST_KEY}"}
                response = http.post("/v1/act", json=act_request(), headers=headers)
            assert response.status_code == 200
            with lock:
                finished.append(name)

        def until(arrived: Callable[[dict[str, Any]], bool]) -> None:
            deadline = time.monotonic() + 10
            while not arrived(sim.stats()):
                assert time.monotonic() < deadline, sim.stats()
                time.sleep(0.005)

        threads = []
        for name in range(5):
            threads.append(threading.Thread(target=send, args=(name,)))
            threads[-1].start()
            # the next one starts only once this one holds the slot or waits for it
            if name == 0:
                until(lambda stats: stats["in_flight"] == 1)
            else:
                until(lambda stats, queued=name: stats["max_queued"] == queued)
        for thread in threads:
            thread.join(60)
        assert finished == list(range(5))
