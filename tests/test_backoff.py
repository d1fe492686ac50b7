from symfence.protocol.backoff import Backoff


def test_spins_then_doubles_to_cap_and_resets():
    b = Backoff(cap_s=1.0, spins=3)
    assert [b.next_delay() for _ in range(3)] == [0.0, 0.0, 0.0]
    delays = [b.next_delay() for _ in range(13)]
    assert delays[0] == 1.0 / 1024
    assert all(later == min(1.0, 2 * earlier) for earlier, later in zip(delays, delays[1:]))
    assert delays[-1] == 1.0 and b.sleeping
    b.reset()
    assert b.next_delay() == 0.0 and not b.sleeping
