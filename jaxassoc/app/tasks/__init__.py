"""One module per metric the app runs (``metric=<name>``): its config dataclass, the options its setting
leaves unused, its ``run(job) -> JobResult`` and its compact tables (``views``); the figures of its report.
The model readouts they call live in the library (:mod:`jaxassoc.readouts`)."""
