"""The upstreams' one tool, `progress`, as every upstream of the matrix serves it.

Arguments: `n` (steps), `delay` (seconds paused before each step), `pad` (characters added
to each step's message), `result_bytes` (a result text of that size instead). It sends
progress notifications 1..n (total n, message `step i`) for the request's progress token,
then returns the text `counted to n`. (The Python SDK upstream, `python_server.py`, takes
the same arguments and more: gates for ordering.)
"""

from __future__ import annotations


def result_text(n: int, size: int = 0) -> str:
    """The tool's result: `counted to n`, or a text of `size` characters (some non-ASCII)."""
    if not size:
        return f"counted to {n}"
    line = "result line \u2713 0123456789 abcdefghijklmnopqrstuvwxyz\n"
    return (line * (size // len(line) + 1))[:size]
