"""Helpers the tests share: databases, app clients, server processes, reference models."""
