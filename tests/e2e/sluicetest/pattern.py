"""Deterministic test payloads. The period is a prime, so a lost, repeated or
shifted block anywhere in a large body changes the bytes."""

import functools
import hashlib
import random

PERIOD = 65521


@functools.lru_cache(maxsize=4)
def _block(seed):
    return random.Random(seed).randbytes(PERIOD)


@functools.lru_cache(maxsize=8)
def pattern(n, seed=1):
    """n bytes of the pattern (seed 1 is what the origin serves)."""
    block = _block(seed)
    reps = n // PERIOD + 1
    return (block * reps)[:n]


def digest(data):
    return hashlib.sha256(data).hexdigest()


MiB = 1024 * 1024
BIG = 64 * MiB
