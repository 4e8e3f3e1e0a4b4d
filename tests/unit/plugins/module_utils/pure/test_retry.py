"""The one backoff of every client."""
import itertools

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._retry import backoff_delay, backoff_delays, seconds, times


def test_backoff_doubles_with_jitter_and_honours_retry_after():
    assert backoff_delay(1, rand=lambda: 0.0) == 0.25 and backoff_delay(1, rand=lambda: 1.0) == 0.5
    assert backoff_delay(3, rand=lambda: 1.0) == 2.0
    assert backoff_delay(10, rand=lambda: 1.0) == 8.0  # capped
    assert backoff_delay(1, retry_after=3, rand=lambda: 0.0) == 3
    assert backoff_delay(1, retry_after=600, rand=lambda: 0.0) == 8.0


def test_endless_delays_follow_the_same_backoff():
    delays = backoff_delays(1.0, 8.0, rand=lambda: 1.0)
    assert list(itertools.islice(delays, 6)) == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    low = backoff_delays(1.0, 8.0, rand=lambda: 0.0)
    assert list(itertools.islice(low, 3)) == [0.5, 1.0, 2.0]


def test_words_of_a_retry_message():
    assert [times(n) for n in (1, 2, 3, 4)] == ["once", "twice", "three times", "4 times"]
    assert (seconds(30.0), seconds(2.5), seconds(None)) == ("30", "2.5", "?")
