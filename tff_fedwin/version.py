"""The version of tff_fedwin."""

__version__ = '0.1.0'
