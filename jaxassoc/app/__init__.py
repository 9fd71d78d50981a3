"""The Hydra app: one task per metric (:mod:`jaxassoc.app.tasks`) composing a model, a dataset and the library's
readouts and suites; result store; reports."""
