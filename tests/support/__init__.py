"""Helpers the tests share (databases, app clients, server processes, transports,
reference models); not test modules."""
