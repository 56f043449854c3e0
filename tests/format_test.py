"""The tree is formatted with pyink in TFF's style (`scripts/format.sh`)."""

import os
import subprocess
import sys

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_tree_is_pyink_formatted():
  pytest.importorskip('pyink', reason='pyink needs Python >= 3.10')
  result = subprocess.run(
      ['bash', os.path.join('scripts', 'format.sh'), '--check', '--diff'],
      cwd=_ROOT,
      env={**os.environ, 'PYTHON': sys.executable},
      capture_output=True,
      text=True,
      check=False,
  )
  assert result.returncode == 0, (
      'Run `bash scripts/format.sh`; pyink would change:\n'
      + result.stdout[-4000:]
      + result.stderr[-2000:]
  )
