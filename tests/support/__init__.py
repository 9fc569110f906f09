"""Helpers shared by the tests (servers, processes, transports); not test modules."""
