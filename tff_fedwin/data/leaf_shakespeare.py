"""LEAF's Shakespeare rows, mapped as LEAF's reader maps them.

LEAF's Shakespeare model (`models/utils/language_utils.py` of the LEAF
repository) maps `x` with `word_to_indices` and `y` with `letter_to_vec`,
over its 80-character `ALL_LETTERS`. Kept here as uint8 ids
`1 + ALL_LETTERS.find(c)` (`[n, 80]` and `[n]`); id 0 is left for padding
(`PAD_ID`). A character outside `ALL_LETTERS` is what LEAF makes of it: in
`x`, `find` gives -1, so id 0; in `y`, LEAF's one-hot sets index -1, the
last letter `'}'`, so id 80. Plain Python and numpy.
"""

import numpy as np

from tff_fedwin.data import leaf_kinds

# LEAF's `models/utils/language_utils.py`, verbatim.
ALL_LETTERS = (
    '\n !"&\'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrs'
    'tuvwxyz}'
)
SEQ_LENGTH = 80
PAD_ID = 0
# Character ids: PAD_ID, then 1 + LEAF's index of each letter.
VOCAB_SIZE = len(ALL_LETTERS) + 1

_CHAR_TO_ID = np.full(128, -1, np.int16)
for _i, _c in enumerate(ALL_LETTERS):
  _CHAR_TO_ID[ord(_c)] = _i + 1


def encode_letters(
    text: str, unknown_id: int = PAD_ID
) -> tuple[np.ndarray, int]:
  """uint8 ids `1 + ALL_LETTERS.find(c)` of `text`, and how many were unknown.

  A character outside `ALL_LETTERS` gets `unknown_id`: `PAD_ID` (0) is
  LEAF's `word_to_indices` (`find` gives -1), `len(ALL_LETTERS)` (80, `'}'`)
  its `letter_to_vec` (a one-hot at index -1).
  """
  code_points = np.frombuffer(text.encode('utf-32-le'), dtype=np.uint32)
  ids = _CHAR_TO_ID[np.minimum(code_points, 127)]
  unknown = (code_points >= 128) | (ids < 0)
  ids = np.where(unknown, unknown_id, ids)
  return ids.astype(np.uint8), int(np.count_nonzero(unknown))


def arrays(
    path, where, x, y, notes: leaf_kinds.LeafNotes
) -> tuple[np.ndarray, np.ndarray]:
  """uint8 ids `[n, 80]` and `[n]` of Shakespeare rows, checked."""
  for name, rows, length in (('x', x, SEQ_LENGTH), ('y', y, 1)):
    for i, row in enumerate(rows):
      if not isinstance(row, str) or len(row) != length:
        got = f'{len(row)} characters' if isinstance(row, str) else repr(row)
        raise leaf_kinds.error(
            path,
            where,
            f'{name}[{i}] has {got}; Shakespeare {name} is a string of '
            f'{length} character{"s" if length > 1 else ""}',
        )
  x_ids, unknown_x = encode_letters(''.join(x), PAD_ID)
  y_ids, unknown_y = encode_letters(''.join(y), len(ALL_LETTERS))
  notes.unknown_x += unknown_x
  notes.unknown_y += unknown_y
  return x_ids.reshape([len(x), SEQ_LENGTH]), y_ids
