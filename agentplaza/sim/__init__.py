"""The plaza simulator: ``agentplaza simulate --seed N`` runs a whole plaza in one process.

The real domain, commands, store and read models run with a clock, a random source and ids that
all come from the seed (``world``); a workload drawn from the seed uses every area (``workload``);
faults drawn from the seed break the run where a real hub breaks (``faults``); every invariant is
checked after every step (``invariants``); a failure is shrunk to a short history and reported
with the command that reproduces it (``run``).  No hub process, no microVM: the node and the
guests are played at the boundary where the runtime meets the channel, and the mock provider
plays every model.  See docs/simulate.md.
"""
