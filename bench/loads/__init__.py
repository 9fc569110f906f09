"""The load side: the processes that drive the servers under test (each its own process, so
the servers' CPU is theirs), what they send, and how the bench starts them."""
