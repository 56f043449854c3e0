"""Tiny Shakespeare as a raw-text JSONL: one client per speaker, one text per line.

Input: `data/tinyshakespeare/input.txt` of github.com/karpathy/char-rnn
(blob 7dcb3a2d4cc3b48b6283dd46870bfeb78f88aac9, 1,115,394 bytes): speeches
as blocks "SPEAKER:\\nline\\nline\\n\\n". Output: the 45 speakers with the
most lines, each line as written (case, punctuation) a record
{"client_id": speaker, "text": line}, in file order; no split field (the run's
--test_fraction takes each speaker's last 20%).

Usage: python make_corpus.py input.txt out.jsonl
"""

import collections
import json
import sys


def main(src, dst):
  with open(src, encoding='utf-8') as f:
    blocks = f.read().split('\n\n')
  lines = []
  for block in blocks:
    head, *rest = block.strip('\n').split('\n')
    if rest and head.endswith(':'):
      lines += [(head[:-1], line) for line in rest if line.strip()]
  counts = collections.Counter(s for s, _ in lines)
  kept = {s for s, _ in counts.most_common(45)}
  with open(dst, 'w', encoding='utf-8') as f:
    for speaker, line in lines:
      if speaker in kept:
        f.write(json.dumps(dict(client_id=speaker, text=line)) + '\n')


if __name__ == '__main__':
  main(*sys.argv[1:])
