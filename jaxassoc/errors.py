"""User-facing errors.

Every failure a user can cause (a bad word set, a missing checkpoint, a typo in a config) raises one of
these with a message that names the offending input and says what to do. The app prints the message on
one line instead of a traceback.
"""


class JaxassocError(Exception):
    """Base class: the message is written for the user, not the developer."""


class ConfigError(JaxassocError, ValueError):
    """A config value, override or option that jaxassoc cannot use."""


class DataError(JaxassocError, ValueError):
    """A dataset, word list or data file that is missing, unknown or malformed."""


class ModelError(JaxassocError, ValueError):
    """A checkpoint, architecture or tokenizer that cannot be loaded or used as asked."""


class InputError(JaxassocError, ValueError):
    """Inputs to a metric or model that cannot be scored: empty sets, OOV words, overlong prompts, ..."""


class TrainingError(JaxassocError, RuntimeError):
    """Fine-tuning that cannot go on: a loss or gradient that is not finite (named with its step), a checkpoint
    written for other options."""
