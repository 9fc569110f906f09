"""The routers, one per audience, with the schemas and parameters only they use."""
