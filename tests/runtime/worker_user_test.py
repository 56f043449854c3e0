"""A local worker serves only its own user (issue 65 item 4).

Connections from a socket of another uid (`nobody`, via setpriv) are closed by
the loopback shim before the worker reads them; the driver connects to exactly
the address the worker listens on; the log directory is private and never
reached through a symlink.
"""

import os
import pathlib
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_fedwin import runtime
from tff_fedwin.runtime import loopback
from tff_fedwin.runtime import worker_logs

_NOBODY = 65534
_SETPRIV = shutil.which('setpriv')
_needs_other_user = pytest.mark.skipif(
    os.geteuid() != 0 or _SETPRIV is None,
    reason='acting as nobody needs root and setpriv',
)


@tff.tensorflow.computation(np.float32)
def _add_one(x):
  return x + 1.0


def _as_nobody(*command, **kwargs):
  result = subprocess.run(
      [
          _SETPRIV,
          f'--reuid={_NOBODY}',
          f'--regid={_NOBODY}',
          '--clear-groups',
          *command,
      ],
      cwd='/',
      capture_output=True,
      text=True,
      timeout=60,
      check=False,
      **kwargs,
  )
  assert result.returncode == 0, result.stderr
  return result


@pytest.fixture(scope='module')
def shim(tmp_path_factory):
  with pytest.MonkeyPatch.context() as mp:
    mp.setenv('XDG_CACHE_HOME', str(tmp_path_factory.mktemp('shim_cache')))
    return loopback.loopback_bind_library()


@pytest.fixture(scope='module')
def worker(tmp_path_factory):
  """One loopback-only worker for the module's connection tests."""
  started = runtime.start_local_worker(
      log_dir=str(tmp_path_factory.mktemp('user_worker_logs'))
  )
  try:
    yield started
  finally:
    started.stop()


# Connects to argv[1] (`host:port`): a raw TCP connection sending the HTTP/2
# preface, then a gRPC call to a method no worker has. A worker that reads
# the connection answers (a SETTINGS frame; UNIMPLEMENTED); a connection
# closed before it is read gives `closed` and UNAVAILABLE.
_CLIENT = """
import socket, sys
import grpc
address = sys.argv[1]
host, port = address.rsplit(':', 1)
with socket.create_connection((host.strip('[]'), int(port)), timeout=20) as s:
  try:  # A refused connection may be closed before the send.
    s.sendall(b'PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n')
    print('raw', 'answered' if s.recv(100) else 'closed')
  except (BrokenPipeError, ConnectionResetError):
    print('raw', 'closed')
with grpc.insecure_channel(address) as channel:
  try:
    channel.unary_unary('/tff_fedwin.NoSuchService/Call')(b'', timeout=20)
  except grpc.RpcError as e:
    print('grpc', e.code().name)
"""


def test_driver_address_is_the_loopback_listener(worker):
  listeners = loopback.listening_sockets(worker.pid)
  assert listeners == [('::1', worker.port)]
  assert worker.address == f'[::1]:{worker.port}'


@_needs_other_user
def test_other_user_is_refused_before_the_worker_reads(worker):
  result = _as_nobody(sys.executable, '-c', _CLIENT, worker.address)
  assert result.stdout.split('\n') == ['raw closed', 'grpc UNAVAILABLE', '']
  with open(worker.log_path) as f:
    log = f.read()
  assert (
      'tff_fedwin loopback shim: refused a connection from uid '
      f'{_NOBODY} (this worker serves uid {os.geteuid()} only)\n'
  ) in log
  # The worker still serves its own user, who reaches the gRPC service.
  result = subprocess.run(
      [sys.executable, '-c', _CLIENT, worker.address],
      capture_output=True,
      text=True,
      timeout=60,
      check=True,
  )
  assert result.stdout.split('\n') == ['raw answered', 'grpc UNIMPLEMENTED', '']


def test_own_user_runs_a_computation(worker):
  context = runtime.create_remote_execution_context(worker.address)
  with tff.framework.get_context_stack().install(context):
    assert _add_one(2.0) == 3.0


_SERVER = """
import os, socket, sys
family, address = getattr(socket, sys.argv[1]), sys.argv[2]
with socket.socket(family, socket.SOCK_STREAM) as s:
  s.bind(address if family == socket.AF_UNIX else (address, 0))
  if family == socket.AF_UNIX:
    os.chmod(address, 0o777)
  s.listen()
  print(s.getsockname() if family == socket.AF_UNIX else s.getsockname()[1],
        flush=True)
  connection, _ = s.accept()  # Blocks until a connection passes the shim.
  with connection:
    print('accepted', connection.recv(10).decode(), flush=True)
"""

# Connects to (argv[1] family, argv[2] address, argv[3] port), sends argv[4],
# then reports whether the server closed the connection.
_PEER = """
import socket, sys
family, address = getattr(socket, sys.argv[1]), sys.argv[2]
with socket.socket(family, socket.SOCK_STREAM) as s:
  s.settimeout(20)
  s.connect(address if family == socket.AF_UNIX else (address, int(sys.argv[3])))
  try:  # A refused connection may be closed before the send.
    s.sendall(sys.argv[4].encode())
    if sys.argv[4] == 'nobody':
      print('closed' if s.recv(10) == b'' else 'answered')
  except (BrokenPipeError, ConnectionResetError):
    print('closed')
"""


@_needs_other_user
@pytest.mark.parametrize(
    'server_family, listen, peer_family, connect',
    [
        ('AF_INET6', '::1', 'AF_INET6', '::1'),
        ('AF_INET', '127.0.0.1', 'AF_INET', '127.0.0.1'),
        # A dual-stack listener sees the IPv4 peer as ::ffff:127.0.0.1.
        ('AF_INET6', '::ffff:127.0.0.1', 'AF_INET', '127.0.0.1'),
        ('AF_UNIX', None, 'AF_UNIX', None),  # SO_PEERCRED.
    ],
)
def test_shim_accepts_only_connections_of_its_uid(
    shim, open_tmp, server_family, listen, peer_family, connect
):
  if server_family == 'AF_UNIX':
    listen = connect = str(open_tmp / 'socket')
  server = subprocess.Popen(
      [sys.executable, '-c', _SERVER, server_family, listen],
      env=dict(os.environ, LD_PRELOAD=shim),
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
  )
  try:
    port = server.stdout.readline().strip()
    refused = _as_nobody(
        sys.executable, '-c', _PEER, peer_family, connect, port, 'nobody'
    )
    subprocess.run(
        [sys.executable, '-c', _PEER, peer_family, connect, port, 'owner'],
        timeout=60,
        check=True,
    )
    out, err = server.communicate(timeout=60)
  finally:
    server.kill()
    server.wait()
  assert refused.stdout == 'closed\n'
  # accept() returned the owner's connection, never nobody's.
  assert out == 'accepted owner\n'
  assert err == (
      f'tff_fedwin loopback shim: refused a connection from uid {_NOBODY} '
      f'(this worker serves uid {os.geteuid()} only)\n'
  )


def test_missing_shim_in_the_worker_is_refused(shim):
  with pytest.raises(
      runtime.WorkerConfinementError,
      match=f'pid {os.getpid()} did not load the LD_PRELOAD shim '
      f'{re.escape(shim)}, so it would serve connections from other users',
  ):
    loopback.check_shim_loaded(os.getpid(), shim)
  loopback.check_shim_loaded(os.getpid(), os.path.realpath(sys.executable))


def test_worker_without_the_shim_is_refused_and_killed(
    shim, tmp_path, monkeypatch
):
  # A copy binds to loopback as the shim does, but is not the verified shim.
  copy = str(tmp_path / 'copy.so')
  shutil.copy(shim, copy)
  monkeypatch.setattr(loopback, 'ld_preload', lambda existing=None: copy)
  with pytest.raises(
      runtime.WorkerConfinementError,
      match=r'pid (\d+) did not load the LD_PRELOAD shim .*The worker was '
      r'killed\.$',
  ) as error:
    runtime.start_local_worker(log_dir=str(tmp_path))
  pid = int(re.search(r'pid (\d+)', str(error.value)).group(1))
  assert not os.path.exists(f'/proc/{pid}')
  assert pid not in {w.pid for w in runtime.running_workers()}


@pytest.mark.parametrize(
    'listening, host',
    [
        ('::1', '[::1]'),
        ('127.0.0.1', '127.0.0.1'),
        ('::ffff:127.0.0.1', '127.0.0.1'),
    ],
)
def test_connect_host_is_the_listening_address(listening, host):
  assert loopback.connect_host(listening) == host


@pytest.fixture
def open_tmp():
  """A new directory that `nobody` can reach (pytest's tmp_path is 0700)."""
  path = tempfile.mkdtemp(prefix='worker_user_test-')
  os.chmod(path, 0o755)
  try:
    yield pathlib.Path(path)
  finally:
    shutil.rmtree(path)


@pytest.fixture
def shared_tmp(open_tmp, monkeypatch):
  """A sticky, world-writable temp dir (as /tmp) used as `$TMPDIR`."""
  shared = open_tmp / 'shared'
  shared.mkdir()
  os.chmod(shared, 0o1777)
  monkeypatch.setattr(tempfile, 'tempdir', str(shared))
  return shared


def test_default_log_dir_is_private_per_user(shared_tmp):
  default = shared_tmp / f'tff_fedwin_workers-{os.geteuid()}'
  default.mkdir(mode=0o755)  # As an older version created it: tightened.
  os.chmod(default, 0o755)
  # pylint: disable-next=protected-access
  fd = worker_logs.open_log(
      worker_logs.default_log_dir(), 'w.log', tighten=True
  )
  os.close(fd)
  assert stat.S_IMODE(os.lstat(default).st_mode) == 0o700
  assert stat.S_IMODE(os.lstat(default / 'w.log').st_mode) == 0o600


def _start_fails(match, **kwargs):
  before = runtime.running_workers()
  with pytest.raises(runtime.WorkerConfinementError, match=match) as error:
    runtime.start_local_worker(**kwargs)
  assert '\n' not in str(error.value)
  assert runtime.running_workers() == before


@_needs_other_user
def test_log_dir_symlink_planted_by_another_user_is_not_followed(shared_tmp):
  default = shared_tmp / f'tff_fedwin_workers-{os.geteuid()}'
  target = shared_tmp / 'nobody_logs'
  _as_nobody('mkdir', '-m', '0777', str(target))
  _as_nobody('ln', '-s', str(target), str(default))
  _start_fails(
      f'^Refusing TFF worker log directory {default}: it is a symlink.$'
  )
  assert os.listdir(target) == []


@_needs_other_user
def test_log_dir_owned_by_another_user_is_refused(shared_tmp):
  default = shared_tmp / f'tff_fedwin_workers-{os.geteuid()}'
  _as_nobody('mkdir', '-m', '0700', str(default))
  _start_fails(
      f'^Refusing TFF worker log directory {default}: owned by uid {_NOBODY}, '
      rf'not by the current user \(uid {os.geteuid()}\).$'
  )
  assert os.listdir(default) == []


def test_writable_log_dir_is_refused(tmp_path):
  os.chmod(tmp_path, 0o777)
  _start_fails(
      f'^Refusing TFF worker log directory {tmp_path}: writable by group or '
      r'others \(mode 0777\).$',
      log_dir=str(tmp_path),
  )


def test_log_file_symlink_is_not_followed(tmp_path):
  port = 1  # Never bound: the start fails before the worker is spawned.
  victim = tmp_path / 'victim'
  victim.write_text('untouched')
  log = tmp_path / f'worker-{os.getpid()}-{port}.log'
  log.symlink_to(victim)
  _start_fails(
      f'^Refusing TFF worker log file {log}: it is a symlink.$',
      port=port,
      log_dir=str(tmp_path),
  )
  assert victim.read_text() == 'untouched'
