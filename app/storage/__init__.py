"""Everything that talks SQL: the schema, the engine and the store."""
