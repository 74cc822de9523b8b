"""Specific errors: each says what was expected and what was found."""


class L4SparkError(Exception):
    """Base class of every error l4spark raises on purpose."""


class ConfigError(L4SparkError):
    """A configuration file or value is invalid (the message names the key)."""


class InputLayoutError(L4SparkError):
    """The logs root or a path in it does not fit the configured layout."""


class TemplateStoreError(L4SparkError):
    """The persisted template store is missing, corrupt or of an unknown version."""
