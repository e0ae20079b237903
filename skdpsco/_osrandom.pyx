# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""A numpy bit generator whose bits come from the operating system's CSPRNG (secure mode).

:class:`OSRandom` is a :class:`numpy.random.BitGenerator`: ``numpy.random.Generator(OSRandom())``
draws every distribution numpy offers (the noise of :func:`skdpsco._noise.gaussian_noise`,
the Laplace draw, row orders, subsampling indices, secret stopping times) from ``os.urandom``, the
source of Python's :mod:`secrets` (``getrandom(2)`` on Linux, ``getentropy`` on macOS and the BSDs,
``BCryptGenRandom`` on Windows), which the Python documentation calls suitable for cryptographic
use. No cipher is implemented here: the words are the operating system's output, read in blocks of
:data:`BUFFER_BYTES` bytes (one ``os.urandom`` call per block, with the GIL; every other draw is a
load from the block).

What a seeded generator cannot give, and this one does:

* no seed and no state: ``state`` raises, so no seed, state dump or pickle can reproduce or reveal
  the noise; a pickled or copied generator unpickles as a fresh, independent one;
* fork safety: a forked child discards the parent's unread block (``os.register_at_fork``), so
  parent and child never draw the same words (a seeded generator, ChaCha or AES-counter included,
  continues the same stream in both);
* spawned children are fresh generators (``spawn``), not functions of a seed.

A failure of ``os.urandom`` after the first block (it does not fail on supported systems once the
first read succeeded) aborts the process: numpy's bit generator interface has no error channel,
and returning predictable words would be silent.
"""

import os
import sys

from libc.stdint cimport uint32_t, uint64_t
from libc.stdlib cimport abort
from libc.string cimport memcpy
from numpy.random cimport bitgen_t
from numpy.random.bit_generator cimport BitGenerator, SeedlessSeedSequence

cdef enum:
    BUFFER_WORDS = 8192

BUFFER_BYTES = BUFFER_WORDS * 8
"""Bytes read from ``os.urandom`` per block (64 KiB)."""

cdef uint64_t _fork_generation = 0


def _after_fork_in_child():
    """Invalidate every generator's unread block in a forked child (``os.register_at_fork``)."""
    global _fork_generation
    _fork_generation += 1


os.register_at_fork(after_in_child=_after_fork_in_child)


cdef struct osrandom_state:
    uint64_t words[BUFFER_WORDS]
    Py_ssize_t position
    uint64_t generation


cdef void _refill(osrandom_state *state) noexcept nogil:
    with gil:
        try:
            block = os.urandom(BUFFER_WORDS * 8)
            memcpy(state.words, <const char *> block, BUFFER_WORDS * 8)
        except BaseException as error:
            sys.stderr.write(f"skdpsco: os.urandom failed ({error!r}); aborting rather than "
                             "drawing privacy noise from predictable bits.\n")
            sys.stderr.flush()
            abort()
    state.position = 0
    state.generation = _fork_generation


cdef uint64_t osrandom_uint64(void *st) noexcept nogil:
    cdef osrandom_state *state = <osrandom_state *> st
    cdef uint64_t value
    if state.position >= BUFFER_WORDS or state.generation != _fork_generation:
        _refill(state)
    value = state.words[state.position]
    state.position += 1
    return value


cdef uint32_t osrandom_uint32(void *st) noexcept nogil:
    return <uint32_t> (osrandom_uint64(st) >> 32)


cdef double osrandom_double(void *st) noexcept nogil:
    return (osrandom_uint64(st) >> 11) * (1.0 / 9007199254740992.0)


cdef class OSRandom(BitGenerator):
    """Bit generator over ``os.urandom`` (the operating system's CSPRNG); takes no seed.

    Use as ``numpy.random.Generator(OSRandom())``; :func:`skdpsco._secure.secure_generator`
    does, for the estimators in secure mode (``skdpsco.set_config(secure_noise=True)``).
    """

    cdef osrandom_state rng_state

    def __init__(self):
        BitGenerator.__init__(self, SeedlessSeedSequence())
        self.rng_state.position = BUFFER_WORDS  # empty: the first draw reads a block
        self.rng_state.generation = _fork_generation
        self._bitgen.state = <void *> &self.rng_state
        self._bitgen.next_uint64 = &osrandom_uint64
        self._bitgen.next_uint32 = &osrandom_uint32
        self._bitgen.next_double = &osrandom_double
        self._bitgen.next_raw = &osrandom_uint64

    @property
    def state(self):
        """Refused: the bits come from the operating system and have no state to save or restore."""
        raise TypeError("OSRandom has no state: its bits come from the operating system's CSPRNG "
                        "(os.urandom) and cannot be saved, restored or reproduced.")

    @state.setter
    def state(self, value):
        raise TypeError("OSRandom has no state to set: it takes no seed.")

    def spawn(self, int n_children):
        """``n_children`` fresh, independent :class:`OSRandom` generators."""
        return [type(self)() for _ in range(n_children)]

    def __reduce__(self):
        # a copy or an unpickled generator is a fresh one: no stream is ever duplicated
        return (type(self), ())
