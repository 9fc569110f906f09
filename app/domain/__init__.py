"""Pure rules of the event log: ids, the resume decision, the append rules.

Nothing in this package does I/O, reads a clock or imports a framework.
"""
