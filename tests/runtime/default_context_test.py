"""Tests for tff_fedwin.runtime.default_context: a clean interpreter exit."""

import subprocess
import sys

import pytest
import tensorflow_federated as tff

from tff_fedwin.runtime import default_context


def _stderr_of(code):
  result = subprocess.run(
      [sys.executable, '-c', code],
      capture_output=True,
      text=True,
      timeout=300,
      check=False,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  return result.stderr


def test_importing_runtime_exits_without_tff_traceback():
  # TFF alone prints "Exception ignored in ... ServiceManager.__del__" at exit.
  assert 'Exception ignored' in _stderr_of('import tensorflow_federated')
  stderr = _stderr_of('import tff_fedwin.runtime')
  assert 'Exception ignored' not in stderr
  assert 'Traceback' not in stderr


def test_exited_context_refuses_computations():
  @tff.tensorflow.computation
  def one():
    return 1

  with tff.framework.get_context_stack().install(
      default_context.ExitedContext()
  ):
    with pytest.raises(RuntimeError, match='while Python exits'):
      one()
