"""The version of this distribution (``ticketing_client.__version__``)."""

__version__ = "0.2.0"
