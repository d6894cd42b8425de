"""Public test doubles and the store conformance suite for dsh backends.

``InMemorySessionStore`` is a store with no durability for unit tests of code above the
store; the conformance suite (``StoreConformance``) is what every real backend runs against
its own factory.
"""

from dsh_core.testing._memory import InMemorySessionStore

__all__ = ["InMemorySessionStore"]
