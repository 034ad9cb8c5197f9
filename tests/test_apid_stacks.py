"""A hub that seems stuck says what each of its threads is doing: on SIGUSR1 (``api.main.STACKS_SIGNAL``) apid
writes every thread's stack to its stderr and goes on serving, unchanged (docs/operations.md, "A hub that
seems stuck"). The VM tests' fixtures print it beside a test that timed out waiting for an agent."""

from __future__ import annotations

from support.hubproc import HubProcess, ok


def test_sigusr1_prints_every_threads_stack_and_the_hub_goes_on(folders):
    h = HubProcess(folders, args=("--node", "off")).start()
    try:
        with h.client() as c:
            before = ok(c.get("/v1/overview"))
            stacks = h.stacks()
            assert "Current thread" in stacks, h.output[-2000:]
            assert stacks.count("(most recent call first)") >= 2, stacks  # every thread, not only the signalled one
            assert 'File "' in stacks and "agentplaza/api/main.py" in stacks, stacks
            assert h.proc.poll() is None  # it goes on
            after = ok(c.get("/v1/overview"))
            assert after.keys() == before.keys()
            assert h.stacks().count("Current thread") == 1  # and answers the signal again, once a signal
    finally:
        h.stop()
