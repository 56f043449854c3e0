"""README.md's library examples ("Use it") run as printed, at 2 rounds.

Each Python block of the section is run on its own (a fresh namespace, so it
cannot lean on another block's imports), all in one subprocess started in a
temporary directory (the examples write `runs/`), with only the round counts
cut to 2: `range(1, 41)` -> `range(1, 3)`, `total_rounds=40` ->
`total_rounds=2`. After each block the runner prints what the block promises
(the window model it read, the run's metrics rows) on a `README-CHECK` line,
which the test checks (the blocks' own output, e.g. the training loop's
progress lines, is passed over).
"""

import json
import os
import subprocess
import sys

from tests import readme_shape_test

_SECTION = ('## Use it', '## Data')
# The tiny-size substitutions, each of which must apply to some block.
_TINY = (('range(1, 41)', 'range(1, 3)'), ('total_rounds=40', 'total_rounds=2'))

_RUNNER = """
import json, os, sys
blocks = json.loads(sys.argv[1])
for i, code in enumerate(blocks):
  names = {'__name__': f'readme_block_{i + 1}'}
  exec(compile(code, f'README block {i + 1}', 'exec'), names)
  found = {}
  if 'window_model' in names:
    found['window_model_leaves'] = len(names['window_model'].trainable)
  if 'summary' in names:
    with open(os.path.join('runs', 'scaffold', 'metrics.csv')) as f:
      found['metrics_rows'] = len(f.read().splitlines()) - 1
  print('README-CHECK', json.dumps(found), flush=True)
"""


def _use_it_blocks() -> list[str]:
  with open(readme_shape_test._README) as f:
    text = f.read()
  start, end = (text.index(heading) for heading in _SECTION)
  return [
      code
      for info, code in readme_shape_test.code_blocks(text[start:end])
      if info == 'python'
  ]


def test_use_it_blocks_run_as_printed_at_two_rounds(tmp_path):
  blocks = _use_it_blocks()
  assert len(blocks) == 3
  tiny = []
  for code in blocks:
    for old, new in _TINY:
      code = code.replace(old, new)
    tiny.append(code)
  for old, _ in _TINY:  # Each cut applies: the README still says 40 rounds.
    assert any(old in code for code in blocks), old
  env = dict(os.environ, PYTHONPATH=readme_shape_test._ROOT)
  result = subprocess.run(
      [sys.executable, '-c', _RUNNER, json.dumps(tiny)],
      cwd=tmp_path,
      env=env,
      capture_output=True,
      text=True,
      timeout=600,
      check=False,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  assert 'Traceback' not in result.stderr, result.stderr[-3000:]
  # The MNIST task's small CNN (docs/data.md: conv 16, conv 32, dense) has 3
  # layers of a kernel and a bias: 6 trainable leaves; the SCAFFOLD run's
  # metrics.csv, a row per round.
  checks = [
      json.loads(line.split(' ', 1)[1])
      for line in result.stdout.splitlines()
      if line.startswith('README-CHECK ')
  ]
  assert checks == [
      {'window_model_leaves': 6},
      {'window_model_leaves': 6},
      {'metrics_rows': 2},
  ]
