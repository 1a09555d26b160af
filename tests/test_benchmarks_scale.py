"""benchmarks/scale.py's pure helpers: ratios against the baseline and the server-clock turn times."""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.scale import mib, per_minute, ratio, turn_gaps  # noqa: E402


def test_ratios_are_against_the_baseline_and_say_na_without_one():
    assert ratio(3.0, 2.0) == "1.50x"
    assert ratio(2.0, 2.0) == "1.00x"
    assert ratio(1.0, 0.0) == "n/a"
    assert ratio(float("nan"), 1.0) == "n/a"
    assert per_minute(8, 30.0) == 16.0 and math.isnan(per_minute(8, 0.0))
    assert mib(36 * 2**20) == "36 MiB"


def test_a_turn_is_the_gap_from_the_end_of_a_reply_to_the_next_request():
    records = [{"received": 0.0, "replied": 1.0}, {"received": 1.25, "replied": 2.0}, {"received": 2.5}]
    assert turn_gaps(records) == [0.25, 0.5]
    assert turn_gaps(records[:1]) == []
