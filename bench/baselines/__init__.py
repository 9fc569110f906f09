"""What the service is measured against: the no-op endpoint, the raw SQLite and PostgreSQL
ceilings, the official SDK servers and the SDK's example store."""
