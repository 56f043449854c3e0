"""tff_fedwin: window-based model averaging for heterogeneous FL in TFF."""

from tff_fedwin.version import __version__
