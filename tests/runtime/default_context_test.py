"""Tests for tff_fedwin.runtime.default_context: a clean interpreter exit."""

import subprocess
import sys

import pytest
import tensorflow_federated as tff

from tff_fedwin.runtime import default_context

_TFF_TRACEBACK = 'Exception ignored in: <function local_cpp_executor_factory'


def _run(code):
  """(exit code, stdout, stderr) of `python -c code`."""
  result = subprocess.run(
      [sys.executable, '-c', code],
      capture_output=True,
      text=True,
      timeout=300,
      check=False,
  )
  return result.returncode, result.stdout, result.stderr


def test_tff_alone_prints_the_traceback_at_exit():
  # What the package prevents: TFF's import alone prints it at exit.
  returncode, _, stderr = _run('import tensorflow_federated')
  assert returncode == 0
  assert _TFF_TRACEBACK in stderr
  assert "'NoneType' object has no attribute 'Popen'" in stderr


@pytest.mark.parametrize(
    'code',
    [
        'import tff_fedwin.runtime',
        # `aggregators` imports TFF without `runtime`.
        'import tff_fedwin; from tff_fedwin import aggregators',
        # TFF imported first: its own exit hooks run before the package's.
        'import tensorflow_federated; from tff_fedwin import aggregators',
    ],
)
def test_importing_the_package_exits_without_tff_traceback(code):
  returncode, stdout, stderr = _run(f'{code}; print("done")')
  assert (returncode, stdout) == (0, 'done\n'), stderr[-3000:]
  assert 'Exception ignored' not in stderr
  assert 'Traceback' not in stderr


def test_a_script_failing_early_shows_only_its_own_traceback():
  # As a README snippet with a bad argument: its ValueError and nothing else.
  returncode, stdout, stderr = _run(
      'from tff_fedwin import aggregators\n'
      'aggregators.WindowedModelAveragingFactory.wima(window_size=0)\n'
  )
  assert (returncode, stdout) == (1, '')
  assert 'Exception ignored' not in stderr
  assert stderr.count('Traceback') == 1
  assert stderr.rstrip().splitlines()[-1].startswith('ValueError: ')


def test_exit_hook_imports_nothing_without_tff():
  # `tff_fedwin.choices` is TF-free; the exit hook keeps it so.
  returncode, stdout, stderr = _run(
      'import sys\n'
      'import tff_fedwin\n'
      'from tff_fedwin import choices\n'
      'tff_fedwin._release_tff_default_context()\n'
      "print(sorted({'tensorflow', 'tensorflow_federated',"
      " 'tff_fedwin.runtime'} & set(sys.modules)))\n"
  )
  assert (returncode, stdout, stderr) == (0, '[]\n', '')


def test_exited_context_refuses_computations():
  @tff.tensorflow.computation
  def one():
    return 1

  with tff.framework.get_context_stack().install(
      default_context.ExitedContext()
  ):
    with pytest.raises(RuntimeError, match='while Python exits'):
      one()
