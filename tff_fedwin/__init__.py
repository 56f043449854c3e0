"""tff_fedwin: window-based model averaging for heterogeneous federated learning in TFF."""

from tff_fedwin.version import __version__
