"""Random streams: each random block's generator in a run, fixed by its id, its seed, the step
and the run's seed (runtime._Plan._rng asks for them).

Must not import PySide6 or the block library.
"""
from __future__ import annotations

import numpy as np

__all__ = ["stream_generator", "stream_hash"]


# A block's random stream is keyed by everything that tells it apart: its whole id, its seed, the
# step and the run's seed. They are written down unambiguously (the id with its length in front,
# then the numbers in decimal) and hashed with SHA-256; the 256-bit digest is the whole entropy of
# a SeedSequence with a 256-bit pool, whose mixing is a bijection of entropy that fits the pool, and
# whose first words seed PCG64's state bijectively. Two keys share a stream only if they share a
# SHA-256 digest (no such pair is known). CRC32, used before, is 32 bits and linear: equal
# checksums for distinct ids are easy to make and turn up by chance among ~10^5 ids.
_STREAM_TAG = b"blockflow random stream\0"


def stream_hash(node: str):
    """The id part of a block's stream key, hashed once per block."""
    # imported here: loading OpenSSL took 3-10 ms of every start, and most pages draw nothing
    import hashlib

    data = node.encode("utf-8", "surrogatepass")
    return hashlib.sha256(_STREAM_TAG + len(data).to_bytes(8, "little") + data)


def stream_generator(base, seed: int, step: int, run_seed: int) -> np.random.Generator:
    """The generator for the block whose :func:`stream_hash` is ``base``, at ``seed``, ``step``
    and ``run_seed``."""
    h = base.copy()
    h.update(f"{int(seed)},{int(step)},{int(run_seed)}".encode("ascii"))
    # The digest's words as a uint32 array, not a list of ints: the same entropy, and SeedSequence
    # takes an array as it is instead of converting int by int (2 against 9 us, a third of a
    # stream's making, paid by every random block on every run).
    entropy = np.frombuffer(h.digest(), dtype="<u4")
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy, pool_size=8)))
