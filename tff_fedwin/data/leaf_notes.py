"""What a LEAF read accepted the way LEAF's own reader does, counted.

`tff_fedwin.data.leaf` counts, while it reads, what LEAF's scripts write and
LEAF's reader (`models/utils/model_utils.py`, `language_utils.py`) accepts
but a strict check would refuse; `messages` makes one warning line of each
(`tff_fedwin.data.leaf_cache` stores them in its index and logs them at
every start).
"""

import attrs


@attrs.define
class LeafNotes:
  """What a read accepted as LEAF's reader does (module docstring), counted.

  Attributes:
    num_samples_users: Users whose `num_samples` is not their `len(x)`.
    empty_files: Files with `"users": []`, skipped.
    unknown_x: Characters of `x` outside `ALL_LETTERS` (read as id 0).
    unknown_y: Labels `y` outside `ALL_LETTERS` (read as `'}'`, id 80).
  """

  num_samples_users: int = 0
  empty_files: list[str] = attrs.Factory(list)
  unknown_x: int = 0
  unknown_y: int = 0

  def messages(self) -> list[str]:
    """One warning line per kind of note, none when there is nothing."""
    lines = []
    if self.num_samples_users:
      lines.append(
          f'{self.num_samples_users} LEAF user(s) have a "num_samples" other '
          "than their number of x rows (LEAF's scripts write such counts: "
          "Shakespeare's by-sample split for every test user, Reddit's "
          "preprocess.py each user's comments of all splits); their x rows "
          "are used, as LEAF's reader does"
      )
    if self.empty_files:
      lines.append(
          f'{len(self.empty_files)} LEAF file(s) with "users": [] skipped '
          f"(LEAF writes them when -k removes every user): "
          + ", ".join(self.empty_files)
      )
    if self.unknown_x or self.unknown_y:
      lines.append(
          f"{self.unknown_x} x character(s) and {self.unknown_y} y "
          "character(s) are outside LEAF's Shakespeare ALL_LETTERS: read as "
          "LEAF's reader reads them (x: find() = -1, id 0; y: the one-hot at "
          "index -1, '}')"
      )
    return lines
