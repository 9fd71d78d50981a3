"""Jobs: adapters from a Hydra :class:`~jaxassoc.app.registry.Job` to a pipeline and back to tables."""
