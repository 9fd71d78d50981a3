"""Fine-tuning against a bias (docs/methods.md §13): low-rank adapters (``jaxassoc.models.lora``) trained with
optax on counterfactual text (``cda``) or on a metric's differentiable score (``metric``), each with a
two-sided preservation term, in a pure jitted step on the model's mesh, with checkpoints and resume.

- :mod:`.objectives`: the losses; :mod:`.bias`: a metric's differentiable score as a bias term;
- :mod:`.batches`: training rows and each step's batch; :mod:`.optim`: the optimiser from config;
- :mod:`.step`: the train step (gradient accumulation); :mod:`.loop`: the loop; :mod:`.checkpoints`.
"""
