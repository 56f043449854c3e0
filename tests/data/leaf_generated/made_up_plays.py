"""Prints two made-up plays in the layout LEAF's preprocess_shakespeare.py parses.

The layout of the Gutenberg file LEAF downloads: a first line it skips, a title two lines above
each "by William Shakespeare" (the first occurrence is the table of contents and is skipped),
speeches as "  NAME. text" with "    text" continuation lines. The words are drawn from a
small list with a fixed seed; one speech holds a curly apostrophe (U+2019), outside LEAF's 80
letters, as substitute copies of the plays do.
"""

import random

WORDS = (
    'the a of and to my lord good sir what is this thou art not so well fair night day come '
    'go speak hear love death king queen noble friend'
).split()
PLAYS = {
    'THE TRAGEDY OF TESTUS': ('TESTUS', 'MARINA'),
    'THE COMEDY OF MOCKS': ('PIP', 'DAME QUILL'),
}


def _line(rng, n):
  return ' '.join(rng.choice(WORDS) for _ in range(n))


def main():
  rng = random.Random(5)
  print('Made-up plays for tff_fedwin tests')
  print('CONTENTS\n\nby William Shakespeare\n\n\n\n')
  for title, characters in PLAYS.items():
    print(f'{title}\n\nby William Shakespeare\n')
    for speech in range(16):
      name = characters[speech % 2]
      text = _line(rng, 7).capitalize() + ','
      if (title, speech) == ('THE COMEDY OF MOCKS', 7):
        text = 'O\u2019er ' + text
      print(f'  {name}. {text}')
      print(f'    {_line(rng, 6)}.')
    print()


if __name__ == '__main__':
  main()
