"""The daemon fuzzer: drives a running sluice through real sockets from the
client side, the origin side and DNS (see tests/fuzz/README.md)."""
