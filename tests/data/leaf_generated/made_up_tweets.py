"""Writes made-up tweets in the layout of Sentiment140's two CSV files.

Usage: python3 made_up_tweets.py RAW_DIR
Writes RAW_DIR/training.csv and RAW_DIR/test.csv as LEAF's
data/sent140/preprocess/get_data.sh leaves them (ISO-8859-1, every field
quoted: polarity 0 / 4, id, date, query, user, text): 5 users, 6-8 tweets
each, seeded; words with case, apostrophes, the five marks LEAF splits off,
an accented letter and a URL.
"""

import csv
import os
import random
import sys

_WORDS = (
    "I love this , it's GREAT ! so sad today ... why ? "
    'the café was fine ; http://t.co/x1 @friend lol'
).split()


def main(raw_dir):
  random.seed(1)
  os.makedirs(raw_dir, exist_ok=True)
  rows, n = [], 0
  for user in ('ann_b', 'Bob99', 'cat', 'dee_dee', 'eve'):
    for _ in range(random.randint(6, 8)):
      n += 1
      text = ' '.join(
          random.choice(_WORDS) for _ in range(random.randint(3, 30))
      )
      polarity = random.choice(['0', '4'])
      date = f'Mon Apr 06 22:{n:02d}:45 PDT 2009'
      rows.append([polarity, str(1467810000 + n), date, 'NO_QUERY', user, text])
  for name, part in (('training.csv', rows[:30]), ('test.csv', rows[30:])):
    with open(
        os.path.join(raw_dir, name), 'w', encoding='ISO-8859-1', newline=''
    ) as f:
      csv.writer(f, quoting=csv.QUOTE_ALL).writerows(part)


if __name__ == '__main__':
  main(sys.argv[1])
