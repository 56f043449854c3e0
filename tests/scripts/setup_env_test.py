"""scripts/setup_env.sh refuses unsupported Pythons before touching anything."""

import os
import stat
import subprocess

import pytest

_SETUP = os.path.join(
    os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ),
    'scripts',
    'setup_env.sh',
)


def _fake_python(tmp_path, version):
  # Stands in for an interpreter: answers the version query, nothing else.
  path = tmp_path / f'python{version}'
  path.write_text(f'#!/bin/sh\necho {version}\n')
  path.chmod(path.stat().st_mode | stat.S_IXUSR)
  return str(path)


def _setup(python, tmp_path):
  env = dict(os.environ, PYTHON=python, TFF_FEDWIN_VENV=str(tmp_path / 'venv'))
  return subprocess.run(
      ['bash', _SETUP],
      capture_output=True,
      text=True,
      env=env,
      timeout=60,
      check=False,
  )


@pytest.mark.parametrize('version', ['3.12', '3.8', '2.7'])
def test_unsupported_python_is_refused_with_what_to_install(tmp_path, version):
  result = _setup(_fake_python(tmp_path, version), tmp_path)
  assert result.returncode == 2
  assert f'is Python {version}' in result.stderr
  assert 'needs Python 3.9, 3.10 or 3.11' in result.stderr
  assert 'Install Python 3.11' in result.stderr
  assert not (tmp_path / 'venv').exists()


def test_missing_python_is_refused(tmp_path):
  result = _setup(str(tmp_path / 'no-such-python'), tmp_path)
  assert result.returncode == 2
  assert 'was not found' in result.stderr
  assert 'Install Python 3.11' in result.stderr
