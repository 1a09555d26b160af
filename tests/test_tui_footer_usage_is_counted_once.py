"""The footer's token and cost totals are counted as messages arrive, not on every redraw.

The footer is drawn on every screen refresh (every streamed delta); its totals come from a
:class:`UsageTally` that adds only the messages it has not seen. It must always equal a full
recount (:func:`usage_totals`), float for float, whatever happens to the transcript: appends,
a reload (a new list), a shorter list.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pi_actors.cli.tui.resources import UsageTally, usage_totals

_usage = st.fixed_dictionaries(
    {"input": st.integers(0, 10**6), "output": st.integers(0, 10**5), "cacheRead": st.integers(0, 10**5),
     "cacheWrite": st.integers(0, 10**5), "cost": st.fixed_dictionaries({"total": st.floats(0, 10, allow_nan=False)})}
)
_message = st.one_of(
    st.builds(lambda u: {"role": "assistant", "usage": u, "stopReason": "stop"}, _usage),
    st.just({"role": "user", "content": "hi"}),
    st.just({"role": "assistant", "stopReason": "error"}),
)
_op = st.one_of(
    st.tuples(st.just("append"), _message),
    st.tuples(st.just("reload"), st.lists(_message, max_size=5)),
    st.tuples(st.just("truncate"), st.integers(0, 3)),
    st.tuples(st.just("draw"), st.none()),
)


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(_op, max_size=40))
def test_the_footer_totals_equal_a_full_recount_after_every_change(ops):
    tally = UsageTally()
    messages: list[dict] = []
    for kind, value in ops:
        if kind == "append":
            messages.append(value)
        elif kind == "reload":
            messages = list(value)
        elif kind == "truncate":
            messages = messages[:value]
        assert tally.totals(messages) == usage_totals(messages)


def test_a_long_transcript_is_counted_once_and_then_only_its_new_messages():
    tally = UsageTally()
    messages = [{"role": "assistant", "usage": {"input": 1, "output": 1, "cost": {"total": 0.5}}} for _ in range(300)]
    assert tally.totals(messages)["input"] == 300
    assert tally.counted == 300
    messages.append({"role": "assistant", "usage": {"input": 2, "output": 0, "cost": {"total": 0.25}}})
    assert tally.totals(messages) == usage_totals(messages)
    assert tally.counted == 301
