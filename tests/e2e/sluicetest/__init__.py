"""Helpers for sluice's end-to-end tests: the network namespace, the test
resolver, the origin servers, the sluice process and raw clients."""
