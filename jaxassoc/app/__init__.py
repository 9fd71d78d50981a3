"""The Hydra app: pipelines that compose a model, a dataset and a metric; result store; reports."""
