"""Which of LEAF's six datasets a JSON file holds, from its first row.

LEAF's datasets differ in what an `x` row and a `y` label are
(`tff_fedwin.data.leaf` reads the supported ones):

* `femnist`: a list of 784 numbers all in `[0, 1]` (a 28x28 image).
* `synthetic`: any other list of numbers (LEAF's `data/synthetic` generator
  draws Gaussian features of any `-num-dim`, 784 included; outside `[0, 1]`).
* `shakespeare`: a string (80 characters), `y` a string (the next one).
* `celeba`: a string that is an image file name, or whose `y` is a number.
* `sent140`: a list ending in a string (the tweet, after its metadata).
* `reddit`: a list of token lists, or a `y` that is an object.

`kind_of` decides from one row and its label; plain Python, no numpy.
"""

from typing import Any, Optional

KINDS = ('femnist', 'shakespeare', 'synthetic', 'sent140', 'celeba', 'reddit')
FEMNIST_PIXELS = 784
# The kinds recognized but not read yet, as their one-line message says them.
NOT_SUPPORTED = {
    'sent140': 'Sent140-style data (x rows ending in the tweet)',
    'celeba': 'CelebA-style data (x image file names, y numbers)',
    'reddit': 'Reddit-style data (x token lists or y objects)',
}
_IMAGE_SUFFIXES = ('.jpg', '.jpeg', '.png')


def is_number(value: Any) -> bool:
  """A JSON number numpy reads as one (no bool, no int beyond int64)."""
  if isinstance(value, float):
    return True
  return (
      isinstance(value, int)
      and not isinstance(value, bool)
      and abs(value) < 2**63
  )


def kind_of(row: Any, label: Any = None) -> Optional[str]:
  """The kind (one of `KINDS`) of an `x` row and its `y` label (module
  docstring); None for a row that is neither a list nor a string."""
  if isinstance(label, dict):
    return 'reddit'
  if isinstance(row, str):
    if isinstance(label, str):
      return 'shakespeare'
    if row.lower().endswith(_IMAGE_SUFFIXES) or is_number(label):
      return 'celeba'
    return 'shakespeare'
  if not isinstance(row, list):
    return None
  if row and isinstance(row[0], list):
    return 'reddit'
  if row and isinstance(row[-1], str):
    return 'sent140'
  if not all(map(is_number, row)):
    return 'femnist'  # FEMNIST's checks name the value that is not a number.
  image = len(row) == FEMNIST_PIXELS and all(0 <= v <= 1 for v in row)
  return 'femnist' if image else 'synthetic'
