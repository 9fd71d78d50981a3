"""jaxassoc's Hydra configs: the wheel installs this folder as ``jaxassoc.conf`` (``pkg://jaxassoc.conf``)."""
