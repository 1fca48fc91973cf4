"""Random streams: each random block's generator in a run, fixed by its id, its seed, the step
and the run's seed (a plan's BlockStreams hands them out).

Must not import PySide6 or the block library.
"""
from __future__ import annotations

import threading

import numpy as np

__all__ = ["BlockStreams", "stream_generator", "stream_hash", "stream_key", "stream_start"]


# A block's random stream is keyed by everything that tells it apart: its whole id, its seed, the
# run's seed and the step. All but the step's low 64 bits are written down unambiguously (the id with
# its length in front, then the numbers in decimal) and hashed with SHA-256; the 256-bit digest is
# the whole entropy of a SeedSequence with a 256-bit pool, whose mixing is a bijection of entropy
# that fits the pool, and whose first words seed PCG64's state bijectively. Two keys share a stream
# only if they share a SHA-256 digest (no such pair is known). CRC32, used before, is 32 bits and
# linear: equal checksums for distinct ids are easy to make and turn up by chance among ~10^5 ids.
#
# The step's low 64 bits then pick a stretch of that stream: step s starts s * 2^64 numbers in, so
# two steps never draw the same numbers (no step draws 2^64). Before, the whole step was hashed
# with the rest: step 0 draws the numbers it drew then, other steps draw new ones. Making a
# SeedSequence and a PCG64 for every random block on every run cost 70-110 us in place (right
# after a large product), a tenth of an RBM's step; moving a kept generator to its stretch costs
# 15-20 (BlockStreams, below).
_STREAM_TAG = b"blockflow random stream\0"
_STEP_BITS = 64
_STEP_MASK = (1 << _STEP_BITS) - 1


def stream_hash(node: str):
    """The id part of a block's stream key, hashed once per block."""
    # imported here: loading OpenSSL took 3-10 ms of every start, and most pages draw nothing
    import hashlib

    data = node.encode("utf-8", "surrogatepass")
    return hashlib.sha256(_STREAM_TAG + len(data).to_bytes(8, "little") + data)


def stream_key(seed: int, step: int, run_seed: int) -> tuple:
    """(the part of the key that is hashed, the stretch of the stream): what a kept generator's
    owner compares to decide whether :func:`stream_start` must be made again."""
    step = int(step)
    return (int(seed), int(run_seed), step >> _STEP_BITS), (step & _STEP_MASK) << _STEP_BITS


def stream_start(base, hashed: tuple) -> np.random.PCG64:
    """A PCG64 at the start of the stream of the block whose :func:`stream_hash` is ``base``, for
    the hashed part of a :func:`stream_key`."""
    seed, run_seed, high_step = hashed
    h = base.copy()
    # in the order the whole step had when it was hashed: a step below 2^64 (every step) writes
    # what it wrote then, so step 0's numbers (an editor's run) are the ones they were
    h.update(f"{seed},{high_step},{run_seed}".encode("ascii"))
    # The digest's words as a uint32 array, not a list of ints: the same entropy, and SeedSequence
    # takes an array as it is instead of converting int by int.
    entropy = np.frombuffer(h.digest(), dtype="<u4")
    return np.random.PCG64(np.random.SeedSequence(entropy, pool_size=8))


def stream_generator(base, seed: int, step: int, run_seed: int) -> np.random.Generator:
    """A new generator for the block whose :func:`stream_hash` is ``base``, at ``seed``, ``step``
    and ``run_seed``: the numbers the runtime's block draws."""
    hashed, offset = stream_key(seed, step, run_seed)
    bits = stream_start(base, hashed)
    bits.advance(offset)
    return np.random.Generator(bits)


class BlockStreams:
    """The random streams of one plan's blocks (``steps``: the program's).

    Forward and backward get identical streams, so a vjp can redraw what forward drew
    (Dropout's mask) instead of keeping it. Each thread keeps one generator per block and moves
    it to the run's stretch: a new SeedSequence and PCG64 per block and run cost 70-110 us right
    after a large product, moving a kept one 15-20.
    """

    def __init__(self, steps):
        self._steps = steps
        self._ids: dict = {}
        #: {step index: (stream_key's hashed part, the PCG64 state its stream starts at)}
        self._starts: dict = {}
        self._kept = threading.local()

    def generator(self, index: int, data) -> np.random.Generator:
        """Step ``index``'s generator for the run asking ``data`` (a DataRequest: step, seed)."""
        st = self._steps[index]
        hashed, offset = stream_key(st.attrs.get("seed", 0), data.step, data.seed)
        start = self._starts.get(index)
        if start is None or start[0] != hashed:
            base = self._ids.get(index)
            if base is None:
                base = self._ids[index] = stream_hash(st.node)
            start = self._starts[index] = (hashed, stream_start(base, hashed).state)
        kept = self._kept.__dict__
        gen = kept.get(index)
        if gen is None:
            gen = kept[index] = np.random.Generator(np.random.PCG64(0))
        bits = gen.bit_generator
        bits.state = start[1]
        bits.advance(offset)
        return gen
