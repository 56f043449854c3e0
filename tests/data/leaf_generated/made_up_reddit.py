"""Writes made-up Reddit comments in the layout LEAF's Reddit scripts read.

Usage: python3 made_up_reddit.py JSON_DIR
Writes JSON_DIR/reddit_0.json as LEAF's data/reddit/source/get_json.py
leaves it for preprocess.py: `{"users", "num_samples", "user_data": {user:
{"x": [comment, ...], "y": [{"subreddit", "created_utc", "score"}, ...]}}}`,
each comment already cleaned and tokenized (tokens joined by spaces, as
clean_raw.py writes them). 4 users, 5-8 comments of 2-24 tokens each, seeded;
the creation times out of order (preprocess.py sorts each user's comments).
"""

import json
import os
import random
import sys

_TOKENS = (
    'i think the game was great but the ref was bad . lol what a goal ! '
    'did you see it ? <URL> <USER> no way , that is wrong'
).split()


def main(json_dir):
  random.seed(1)
  users, num_samples, user_data = [], [], {}
  for u in range(1, 5):
    comments, labels = [], []
    for _ in range(random.randint(5, 8)):
      length = random.randint(2, 24)
      comments.append(' '.join(random.choice(_TOKENS) for _ in range(length)))
      labels.append(
          {
              'subreddit': random.choice(['soccer', 'nba']),
              'created_utc': random.randint(1512086400, 1514764799),
              'score': random.randint(-3, 40),
          }
      )
    users.append(str(u))
    num_samples.append(len(comments))
    user_data[str(u)] = {'x': comments, 'y': labels}
  os.makedirs(json_dir, exist_ok=True)
  with open(os.path.join(json_dir, 'reddit_0.json'), 'w') as f:
    json.dump(
        {'users': users, 'num_samples': num_samples, 'user_data': user_data}, f
    )


if __name__ == '__main__':
  main(sys.argv[1])
