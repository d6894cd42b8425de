"""``check_batch``: the one batch check every store runs before it appends."""

from __future__ import annotations

import pytest

from dsh_core import SeqError, check_batch
from dsh_core.testing import synthetic_turn


def test_a_contiguous_batch_that_continues_the_log_passes() -> None:
    check_batch("session s", synthetic_turn(5, 1), 5)
    check_batch("session s", [], 99)  # nothing to append, nothing to refuse


def test_a_gap_inside_the_batch_is_named_with_its_offset() -> None:
    events = synthetic_turn(0, 1)
    broken = [*events[:3], events[4]]
    with pytest.raises(SeqError, match=r"^session s \(/x\): the batch is not contiguous: event 3"):
        check_batch("session s (/x)", broken, 0)


def test_a_batch_that_does_not_continue_the_log_names_both_seqs() -> None:
    with pytest.raises(SeqError, match=r"starts at seq 2 but the log continues at seq 0$"):
        check_batch("session s", synthetic_turn(2, 1), 0)
