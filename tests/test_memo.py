"""The bounded memo the planner keeps its repeated work in (luminal_fn/ir/memo.py)."""
import pytest

from luminal_fn.ir.memo import Memo


def test_makes_each_key_once_while_kept():
    made = []
    memo = Memo(4)

    def make(k):
        made.append(k)
        return k * 10

    assert [memo.get(k, lambda k=k: make(k)) for k in (1, 2, 1, 2, 3)] == [10, 20, 10, 20, 30]
    assert made == [1, 2, 3]
    assert len(memo) == 3


def test_forgets_the_least_recently_used_past_its_size():
    made = []
    memo = Memo(2)
    for k in (1, 2, 1, 3):  # 1 was used after 2, so 2 is the one forgotten when 3 comes
        memo.get(k, lambda k=k: made.append(k) or k)
    assert len(memo) == 2
    memo.get(1, lambda: made.append("1 again"))
    memo.get(2, lambda: made.append("2 again"))
    assert made == [1, 2, 3, "2 again"]


def test_a_failed_make_keeps_nothing():
    memo = Memo(2)

    def fail():
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        memo.get("k", fail)
    assert len(memo) == 0
    assert memo.get("k", lambda: 5) == 5


def test_size_must_be_positive():
    with pytest.raises(ValueError, match="at least 1"):
        Memo(0)


def test_threads_share_a_memo_without_losing_its_bound():
    """Two jitted functions may be planned at once: many threads asking a small memo for
    overlapping keys get each key's own value, and the memo stays within its size."""
    from concurrent.futures import ThreadPoolExecutor

    memo = Memo(8)

    def ask(seed):
        for i in range(2000):
            k = (seed * 7 + i) % 23
            assert memo.get(k, lambda k=k: ("value", k)) == ("value", k)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(ask, range(8)))  # (a thread's exception is raised here)
    assert len(memo) <= 8
