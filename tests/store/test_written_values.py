"""What a process wrote to a checkpoint, kept by version for its next read."""

from __future__ import annotations

from orchestrator.store.written_values import WrittenValues


def test_a_value_is_found_under_the_version_it_was_written_with_only():
    written = WrittenValues()
    messages = ["hi", "hello"]
    written.wrote("t", "", {"messages": messages}, {"messages": "2.abc"})

    found, value = written.read("t", "", "messages", "2.abc")
    assert found and value == messages
    assert value is not messages, "a copy: the channel may take it as its own"
    assert written.read("t", "", "messages", "3.def") == (False, None), "another write's version"
    assert written.read("t", "ns", "messages", "2.abc") == (False, None), "another namespace"
    assert written.read("u", "", "messages", "2.abc") == (False, None), "another thread"


def test_only_the_most_recently_written_channels_are_kept():
    written = WrittenValues(limit=2)
    for thread in ("a", "b", "c"):
        written.wrote(thread, "", {"messages": [thread]}, {"messages": "1"})
    written.wrote("b", "", {"messages": ["b2"]}, {"messages": "2"})

    assert written.read("a", "", "messages", "1") == (False, None), "the oldest left"
    assert written.read("b", "", "messages", "2") == (True, ["b2"])
    assert written.read("c", "", "messages", "1") == (True, ["c"])
