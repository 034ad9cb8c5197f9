"""Threads parsing at once: the hub parses laws from many threads (each agent's VM session says hello
on a thread of its own, and the first hello of a new hub parses the 80 built-in laws).

Before the grammar was made ready at import and its parse actions took pyparsing's three arguments, two
threads parsing for the first time at once were refused laws that are right ("Expected a law id"), or left
pyparsing calling a parse action with no arguments, so that every parse of that process failed from then on
(`missing 1 required positional argument: 't'`): a hub whose agents could never say hello.
"""

import sys
import threading

import pytest

from jhrl import grammar
from jhrl.laws import BUILTIN_FILES, builtin_source

SOURCE = "\n".join(builtin_source(name) for name, *_ in BUILTIN_FILES)
THREADS = 4
#: Fresh grammars, each parsed first by all the threads at once (27 to 29 of 30 went wrong before the fix).
TRIALS = 10


@pytest.fixture
def switch_often():
    """Threads switched every microsecond, not every 5 ms: the first parses overlap as they would under load."""
    was = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(was)


def test_threads_parsing_for_the_first_time_at_once_each_get_the_laws_and_the_grammar_still_works(switch_often):
    expected = grammar.parse(SOURCE)
    assert len(expected) == 80
    for _ in range(TRIALS):
        source = grammar._build()  # a new grammar, never used, as at a hub's start
        barrier = threading.Barrier(THREADS)
        got: list[object] = []

        def parse(source=source, barrier=barrier, got=got):
            barrier.wait()
            try:
                got.append(tuple(source.parse_string(SOURCE, parse_all=True)))
            except Exception as e:  # noqa: BLE001 - what a thread met is the finding
                got.append(e)

        threads = [threading.Thread(target=parse) for _ in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert got == [expected] * THREADS
        assert tuple(source.parse_string(SOURCE, parse_all=True)) == expected  # and after them
