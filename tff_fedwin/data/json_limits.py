"""What a JSON reader says of input beyond Python's parser's limits.

Python's `json` parses nested arrays and objects recursively, so input
nested deeper than the interpreter's recursion limit (about 1,000 levels)
raises `RecursionError`; since Python 3.11 an integer of more than
`sys.get_int_max_str_digits()` digits (4,300 by default) raises a
`ValueError` that names no file. The data readers (`leaf.load_json`,
`leaf_sent140`'s `embs.json`, `text_records`' JSON Lines) catch both and
raise their own one-line error naming the file (and line) with
`problem`'s text; neither limit is raised (they keep a hostile file from
costing time or memory).
"""

import sys

# The exceptions of `json.load(s)` beyond its `JSONDecodeError`s (which the
# readers report with their line and column first).
LIMIT_ERRORS = (RecursionError, ValueError)


def problem(error: BaseException) -> str:
  """One line on what `error` (one of `LIMIT_ERRORS`) says of the input."""
  if isinstance(error, RecursionError):
    return (
        "invalid JSON: nested too deeply (Python's parser stops at its "
        f'recursion limit, {sys.getrecursionlimit()} levels; data files nest '
        'a few)'
    )
  text = str(error)
  if 'integer string conversion' in text:
    return (
        f'invalid JSON: an integer of more than '
        f"{sys.get_int_max_str_digits()} digits (Python's limit on "
        'integers read from text)'
    )
  return 'invalid JSON: ' + ' '.join(text.split())
