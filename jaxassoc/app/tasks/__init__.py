"""One module per metric the app runs (``metric=<name>``): its config dataclass, the options its setting
leaves unused, its ``run(job) -> JobResult`` and its compact tables (``views``); the figures of its report.
The model readouts they call and the analysis that turns them into tables live in the library
(:mod:`jaxassoc.readouts`, :mod:`jaxassoc.suites`)."""
