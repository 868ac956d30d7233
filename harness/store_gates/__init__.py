"""The code each built-in store runs inside its gate, a package per store (named as the
store), each with the same roles: requests (what a request is), access (who may),
signatures (is it signed), bookkeeping (the buckets' owners and settings) and protocol (the
GateProtocol the gate calls)."""
