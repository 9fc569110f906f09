"""HTTP: routers, schemas, auth and the mapping of errors to problem+json."""
