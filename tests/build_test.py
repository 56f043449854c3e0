"""BUILD mirrors the tree: every module, test and script has its target.

The modules are the package's, those of the top-level benchmarks/ and those
in folders of scripts/ (run_experiment.py's flag modules).
"""

import os
import subprocess
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_build_file_is_current():
  result = subprocess.run(
      [
          sys.executable,
          os.path.join(_ROOT, 'scripts', 'generate_build.py'),
          '--check',
      ],
      capture_output=True,
      text=True,
      check=False,
  )
  assert result.returncode == 0, result.stderr


def test_every_tracked_module_has_a_target():
  with open(os.path.join(_ROOT, 'BUILD')) as f:
    build = f.read()
  tracked = subprocess.run(
      ['git', 'ls-files', 'tff_fedwin', 'benchmarks', 'tests', 'scripts'],
      cwd=_ROOT,
      capture_output=True,
      text=True,
      check=True,
  ).stdout.split()
  for path in tracked:
    if path.endswith('.py') and not path.endswith('conftest.py'):
      assert f'"{path}"' in build, path
