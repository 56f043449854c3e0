"""The version of tff_fedwin."""

__version__ = '0.2.0'
