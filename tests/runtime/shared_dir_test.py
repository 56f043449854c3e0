"""Tests for tff_fedwin.runtime.shared_dir: every worker sees the directory.

Workers run on namespace hosts (tests/runtime/netns.py): one sees the root
namespace's file system, one runs in a private mount namespace with an empty
tmpfs over the directory, so the driver's file is invisible to it, and one
with the directory bind-mounted read-only over itself, so it reads the
driver's file and cannot write its own. The
scripts/run_experiment.py cases with --shared_dir are in
other_hosts_test.py, next to the reference runs they compare with.
"""

import os
import signal

import pytest

from tests.runtime import netns
from tests.runtime import processes
from tff_fedwin import experiments
from tff_fedwin.experiments import worker_flags
from tff_fedwin.runtime import shared_dir

_PORT = 8000

hosts = netns.hosts_fixture(2)


@pytest.fixture(scope='module')
def hidden(tmp_path_factory):
  """The directory the second host's worker cannot see."""
  return str(tmp_path_factory.mktemp('shared'))


@pytest.fixture(scope='module')
def workers(hosts, hidden, tmp_path_factory):
  """(seeing, not seeing): a worker on each host, the second's dir hidden."""
  logs = tmp_path_factory.mktemp('logs')
  seeing = hosts[0].start_worker(_PORT, str(logs / 'seeing.log'))
  blind = hosts[1].start_worker(
      _PORT, str(logs / 'blind.log'), hidden_dir=hidden
  )
  return (seeing, f'{hosts[0].address}:{_PORT}'), (
      blind,
      f'{hosts[1].address}:{_PORT}',
  )


def test_hosts_and_workers_are_removed_also_when_a_test_fails(tmp_path):
  reason = netns.skip_reason()
  if reason is not None:
    pytest.skip(f'No network namespaces as hosts here: {reason}.')
  made = []
  with pytest.raises(RuntimeError, match='^a failing test$'):
    try:
      (host,) = netns.make_hosts(1, made)
      worker = host.start_worker(_PORT, str(tmp_path / 'worker.log'))
      assert netns.namespace_names() == [host.netns]
      raise RuntimeError('a failing test')
    finally:
      netns.remove_hosts(made)
  assert netns.namespace_names() == []
  assert worker.returncode == -signal.SIGKILL
  assert not processes.pid_alive(worker.pid)
  assert not os.path.exists(f'/sys/class/net/{host.veth}')


def test_local_worker_sees_the_directory(tmp_path):
  # The session's local worker (tests/conftest.py), through its context.
  shared_dir.check_shared_dir(str(tmp_path), ())
  assert os.listdir(tmp_path) == []  # The check file is removed.


def test_worker_on_another_host_sees_the_directory(workers, tmp_path):
  (_, address), _ = workers
  shared_dir.check_shared_dir(str(tmp_path), [address])
  assert os.listdir(tmp_path) == []


def test_worker_that_does_not_see_it_is_one_line(workers, hidden):
  (_, seeing), (blind, address) = workers
  # The protection took effect: a tmpfs over `hidden` in the worker's mount
  # namespace only; the driver sees its file, the worker (through its root,
  # /proc/PID/root, resolved in its mount namespace) does not.
  probe = os.path.join(hidden, 'probe')
  with open(probe, 'w') as f:
    f.write('driver')
  with open(f'/proc/{blind.pid}/mountinfo') as f:
    assert any(line.split()[4] == hidden and ' - tmpfs ' in line for line in f)
  with open('/proc/self/mountinfo') as f:
    assert not any(line.split()[4] == hidden for line in f)
  assert os.path.exists(probe)
  assert not os.path.exists(f'/proc/{blind.pid}/root{probe}')

  with pytest.raises(
      shared_dir.SharedDirError,
      match=(
          rf'^TFF worker {address} does not see the shared directory '
          rf'{hidden} \(reading {hidden}/\.tff_fedwin_shared_dir_check-\w+ '
          r'failed: .*\)\. Mount the same directory at .* on every worker '
          r'host, or set --client_state_transfer, --server_state_transfer and '
          r'--client_data_transfer to values\.$'
      ),
  ) as raised:
    shared_dir.check_shared_dir(hidden, [seeing, address])
  assert '\n' not in str(raised.value)
  assert (raised.value.address, raised.value.directory) == (address, hidden)
  assert os.listdir(hidden) == ['probe']  # The check file is removed.
  assert blind.poll() is None  # The worker is fine; only the file was hidden.


@pytest.fixture(scope='module')
def read_only(hosts, tmp_path_factory):
  """(worker, address, directory): a worker that sees `directory` read-only."""
  directory = str(tmp_path_factory.mktemp('read_only'))
  worker = hosts[1].start_worker(
      _PORT + 1,
      str(tmp_path_factory.mktemp('read_only_logs') / 'worker.log'),
      read_only_dir=directory,
  )
  return worker, f'{hosts[1].address}:{_PORT + 1}', directory


def _mount_options(pid, directory):
  """The options of the mount at `directory` in `pid`'s namespace, or None."""
  with open(f'/proc/{pid}/mountinfo') as f:
    for line in f:
      fields = line.split()
      if fields[4] == directory:
        return fields[5].split(',')
  return None


def test_worker_that_cannot_write_it_is_one_line(workers, read_only):
  (_, seeing), _ = workers
  worker, address, directory = read_only
  # The protection took effect: read-only in the worker's mount namespace
  # only (as a read-only or root-squashed shared mount): it reads the
  # driver's file, its own write fails.
  assert 'ro' in _mount_options(worker.pid, directory)
  assert _mount_options('self', directory) is None

  with pytest.raises(
      shared_dir.SharedDirError,
      match=(
          rf'^TFF worker {address} does not see the shared directory '
          rf'{directory} \(writing {directory}/'
          r'\.tff_fedwin_shared_dir_check-\w+ failed: .*Read-only file '
          r'system.*\)\. Mount the same directory at .* on every worker host, '
          r'or set --client_state_transfer, --server_state_transfer and '
          r'--client_data_transfer to values\.$'
      ),
  ) as raised:
    shared_dir.check_shared_dir(directory, [seeing, address])
  assert '\n' not in str(raised.value)
  assert (raised.value.address, raised.value.directory) == (address, directory)
  assert os.listdir(directory) == []  # Every check file is removed.
  assert worker.poll() is None


def test_each_worker_writes_a_file_the_driver_reads(tmp_path, monkeypatch):
  # The session's local worker: its file is read back, then removed.
  written = []
  real_write = shared_dir._write_file

  def recording_write(path, contents):
    written.append((path, contents))
    return real_write(path, contents)

  monkeypatch.setattr(shared_dir, '_write_file', recording_write)
  shared_dir.check_shared_dir(str(tmp_path), ())

  ((path, contents),) = written
  assert os.path.dirname(path) == str(tmp_path)
  assert len(contents) == 32  # secrets.token_hex(16)
  assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    'workers_flag, shared, expected',
    [
        ('10.0.0.2:8000,10.0.0.3:8000', None, 'values'),
        ('10.0.0.2:8000,10.0.0.3:8000', '/mnt/shared', 'files'),
        ('', None, 'files'),
        ('2', '/mnt/shared', 'files'),
    ],
)
def test_auto_is_files_with_shared_dir(workers_flag, shared, expected):
  config = experiments.ExperimentConfig(
      algorithm='scaffold', workers=workers_flag, shared_dir=shared
  )
  assert worker_flags.resolve(config, 'client_state_transfer') == expected
  assert worker_flags.resolve(config, 'server_state_transfer') == expected
  assert worker_flags.resolve(config, 'client_data_transfer') == expected
