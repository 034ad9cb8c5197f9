"""The vault's speed, each figure a ratio against one bare AES-GCM decryption of the same
value measured in the same process (ratios travel between noisy machines; seconds don't).

  python bench/vault.py [--quick]

1. unseal by key file: one slot opened, the index checksum and the store checked
2. unseal by passphrase: the same plus scrypt (N=2^15, r=8, p=1): slow on purpose
3. reveal for a bound consumer: resolve the entry, open its data key, open the value,
   count the use (grouped per minute, so most reveals write nothing)
The last line is the headline: reveal latency / one bare AES-GCM decryption.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # noqa: E402

from agentplaza.commands.unit import Commands  # noqa: E402
from agentplaza.config import Folders  # noqa: E402
from agentplaza.events.store import EventStore  # noqa: E402
from agentplaza.vault import VaultService  # noqa: E402

VALUE = "sk-ant-api03-" + "x" * 95  # the length of a real Anthropic key
PASSPHRASE = "a passphrase for the benchmark"


def per_call(fn, n: int) -> float:
    """Median seconds per call over 5 rounds of n calls."""
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        rounds.append((time.perf_counter() - t0) / n)
    return statistics.median(rounds)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    n_fast = 2_000 if args.quick else 20_000
    n_unseal = 3 if args.quick else 10

    key, nonce, aad = AESGCM.generate_key(256), os.urandom(12), b"aad"
    ct = AESGCM(key).encrypt(nonce, VALUE.encode(), aad)
    bare = per_call(lambda: AESGCM(key).decrypt(nonce, ct, aad), n_fast)
    print(f"baseline: one bare AES-GCM decryption of a {len(VALUE)}-character value: {bare * 1e6:.2f} µs")

    with tempfile.TemporaryDirectory(prefix="apz-bench-vault.") as d:
        folders = Folders(Path(d) / "s", Path(d) / "c", Path(d) / "d").make()
        store = EventStore.open(state_dir=folders.state)
        now = [dt.datetime(2026, 11, 29, tzinfo=dt.UTC)]
        cmds = Commands(store, clock=lambda: now[0])
        vault = VaultService.open(folders, cmds)
        ctx = cmds.context("owner")
        vault.add_passphrase(ctx, PASSPHRASE)
        for i in range(20):
            vault.set(ctx, f"OTHER_KEY_{i}", f"value-{i}-" + "y" * 40, bindings=["hf"])
        vault.set(ctx, "ANTHROPIC_API_KEY", VALUE, bindings=["provider:anthropic"])

        def unseal(method: str) -> float:
            times = []
            for _ in range(n_unseal):
                vault.seal()
                t0 = time.perf_counter()
                vault.unseal(method, PASSPHRASE if method == "passphrase" else None)
                times.append(time.perf_counter() - t0)
            return statistics.median(times)

        by_file = unseal("keyfile")
        by_pass = unseal("passphrase")
        print(f"unseal by key file: {by_file * 1e3:.2f} ms = {by_file / bare:,.0f}x one bare decryption")
        print(f"unseal by passphrase: {by_pass * 1e3:.1f} ms = {by_pass / bare:,.0f}x one bare decryption "
              f"({by_pass / by_file:.0f}x the key file: scrypt's work factor)")

        assert vault.reveal("ANTHROPIC_API_KEY", consumer="provider:anthropic") == VALUE
        reveal = per_call(lambda: vault.reveal("ANTHROPIC_API_KEY", consumer="provider:anthropic", node="n0"), n_fast)
        now[0] += dt.timedelta(minutes=1)
        vault.flush_uses()
        used = sum(r.data["count"] for r in store.read() if r.kind == "VaultUsage.SecretUsed")
        print(f"reveal for a bound consumer: {reveal * 1e6:.2f} µs; {used:,} uses recorded in "
              f"{sum(1 for r in store.read() if r.kind == 'VaultUsage.SecretUsed')} grouped events")
        vault.close()
        store.close()
    print(f"vault: reveal {reveal / bare:.1f}x one bare AES-GCM decryption; unseal key file {by_file * 1e3:.1f} ms, "
          f"passphrase {by_pass * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
