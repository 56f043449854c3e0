"""Tests for tff_fedwin.runtime.loopback: loopback-only workers fail closed."""

import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

import pytest

from tff_fedwin import runtime
from tff_fedwin.runtime import loopback

_NOBODY = 65534
_needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason='chown to another uid needs root'
)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
  """An empty XDG cache; returns the shim directory inside it."""
  monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path / 'cache'))
  return str(tmp_path / 'cache' / 'tff_fedwin')


@pytest.fixture(scope='module')
def shim(tmp_path_factory):
  """The shim built into a private cache for this module."""
  with pytest.MonkeyPatch.context() as mp:
    mp.setenv('XDG_CACHE_HOME', str(tmp_path_factory.mktemp('shim_cache')))
    return loopback.loopback_bind_library()


def _digest_of(path):
  with open(path, 'rb') as f:
    return hashlib.sha256(f.read()).hexdigest()


def _worker_children():
  """Pids of this process's children running the TFF worker binary."""
  found = set()
  for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
      with open(f'/proc/{pid}/stat') as f:
        fields = f.read().rsplit(')', 1)[1].split()
      with open(f'/proc/{pid}/cmdline', 'rb') as f:
        cmdline = f.read()
    except OSError:
      continue
    if (
        int(fields[1]) == os.getpid()
        and fields[0] != 'Z'
        and b'data/worker_binary' in cmdline
    ):
      found.add(int(pid))
  return found


def _loopback_listeners_in_proc_net(port):
  """Raw hex local addresses listening on `port`, from the global tables."""
  found = set()
  for table in ('/proc/net/tcp', '/proc/net/tcp6'):
    with open(table) as f:
      next(f)
      for line in f:
        fields = line.split()
        address, port_hex = fields[1].split(':')
        if fields[3] == '0A' and int(port_hex, 16) == port:
          found.add(address)
  return found


# 127.0.0.1 and ::1 as /proc/net prints them (little-endian 32-bit words).
_LOOPBACK_HEX = {'0100007F', '00000000000000000000000001000000'}


_BIND_SCRIPT = """
import socket, sys
family, address = getattr(socket, sys.argv[1]), sys.argv[2]
with socket.socket(family, socket.SOCK_STREAM) as s:
  s.bind((address, 0))
  print(s.getsockname()[0])
"""


@pytest.mark.parametrize(
    'family, wildcard, expected',
    [
        ('AF_INET6', '::', '::1'),
        ('AF_INET6', '::ffff:0.0.0.0', '::ffff:127.0.0.1'),
        ('AF_INET', '0.0.0.0', '127.0.0.1'),
        ('AF_INET', '127.0.0.2', '127.0.0.2'),  # Not a wildcard: unchanged.
    ],
)
def test_shim_rebinds_wildcards_to_loopback(shim, family, wildcard, expected):
  # Bound only, never listening: nothing is exposed even without the shim.
  result = subprocess.run(
      [sys.executable, '-c', _BIND_SCRIPT, family, wildcard],
      env=dict(os.environ, LD_PRELOAD=shim),
      capture_output=True,
      text=True,
      check=True,
  )
  assert result.stdout.strip() == expected


def test_build_is_private_and_recorded(cache_dir):
  library = loopback.loopback_bind_library()
  assert os.path.dirname(library) == cache_dir
  assert stat.S_IMODE(os.stat(cache_dir).st_mode) == 0o700
  with open(library + '.sha256') as f:
    assert f.read().strip() == _digest_of(library)
  assert sorted(os.listdir(cache_dir)) == sorted(
      [os.path.basename(library), os.path.basename(library) + '.sha256']
  )
  assert loopback.loopback_bind_library() == library  # Cached, still valid.


def test_tampered_library_is_rebuilt_not_used(cache_dir):
  library = loopback.loopback_bind_library()
  os.chmod(library, 0o700)
  with open(library, 'ab') as f:
    f.write(b'tampered')
  tampered = _digest_of(library)
  assert loopback.loopback_bind_library() == library
  assert _digest_of(library) != tampered
  with open(library + '.sha256') as f:
    assert f.read().strip() == _digest_of(library)


@_needs_root
@pytest.mark.parametrize('suffix', ['', '.sha256'])
def test_foreign_owned_cache_file_is_refused(cache_dir, suffix):
  path = loopback.loopback_bind_library() + suffix
  os.chown(path, _NOBODY, -1)
  with pytest.raises(
      runtime.WorkerConfinementError,
      match=f'{re.escape(path)}: owned by uid {_NOBODY}',
  ):
    loopback.loopback_bind_library()
  assert os.stat(path).st_uid == _NOBODY  # Neither used nor replaced.


def test_symlinked_library_is_refused(cache_dir, tmp_path):
  library = loopback.loopback_bind_library()
  os.replace(library, tmp_path / 'elsewhere.so')
  os.symlink(tmp_path / 'elsewhere.so', library)
  with pytest.raises(
      runtime.WorkerConfinementError,
      match=f'{re.escape(library)}: it is a symlink',
  ):
    loopback.loopback_bind_library()


@_needs_root
def test_foreign_owned_cache_dir_is_refused(cache_dir):
  loopback.loopback_bind_library()
  os.chown(cache_dir, _NOBODY, -1)
  with pytest.raises(
      runtime.WorkerConfinementError,
      match=f'{re.escape(cache_dir)}: owned by uid {_NOBODY}',
  ):
    loopback.loopback_bind_library()


def test_group_writable_cache_dir_is_refused(cache_dir):
  loopback.loopback_bind_library()
  os.chmod(cache_dir, 0o777)
  with pytest.raises(
      runtime.WorkerConfinementError,
      match=f'{re.escape(cache_dir)}: writable by group',
  ):
    loopback.loopback_bind_library()


def test_readable_cache_dir_is_made_private(cache_dir):
  os.makedirs(cache_dir, mode=0o755)
  os.chmod(cache_dir, 0o755)  # As older versions created it.
  loopback.loopback_bind_library()
  assert stat.S_IMODE(os.stat(cache_dir).st_mode) == 0o700


def test_no_compiler_is_one_line_error_naming_gcc(
    cache_dir, tmp_path, monkeypatch
):
  empty = tmp_path / 'empty_bin'
  empty.mkdir()
  monkeypatch.setenv('PATH', str(empty))
  monkeypatch.delenv('CC', raising=False)
  before = _worker_children()
  with pytest.raises(
      runtime.WorkerConfinementError, match='apt-get install gcc'
  ) as error:
    runtime.start_local_worker(log_dir=str(tmp_path))
  message = str(error.value)
  assert '\n' not in message
  assert 'loopback_only=False' in message and '--worker_bind=all' in message
  assert _worker_children() == before


def test_compile_failure_is_one_line_with_stderr_tail(cache_dir, monkeypatch):
  monkeypatch.setenv(
      'CC', 'sh -c "echo first >&2; echo boom-from-cc >&2; ' 'exit 3"'
  )
  with pytest.raises(
      runtime.WorkerConfinementError,
      match=r'failed \(exit 3\): first \| boom-from-cc$',
  ) as e:
    loopback.loopback_bind_library()
  assert '\n' not in str(e.value)
  assert e.value.__cause__ is None and e.value.__context__ is None
  assert [n for n in os.listdir(cache_dir) if n.startswith('.')] == []


@pytest.mark.parametrize('variable', ['XDG_CACHE_HOME', 'HOME'])
def test_cache_path_with_space_uses_private_temp_dir(
    tmp_path, monkeypatch, variable
):
  monkeypatch.delenv('XDG_CACHE_HOME', raising=False)
  monkeypatch.setenv(variable, str(tmp_path / 'with space'))
  monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path / 'tmp'))
  (tmp_path / 'tmp').mkdir()
  library = loopback.loopback_bind_library()
  fallback = tmp_path / 'tmp' / f'tff_fedwin-{os.geteuid()}'
  assert os.path.dirname(library) == str(fallback)
  assert loopback.ld_preload('/x.so').split(':') == [library, '/x.so']


def test_uncreatable_cache_dir_uses_private_temp_dir(tmp_path, monkeypatch):
  (tmp_path / 'a_file').write_text('')
  monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path / 'a_file'))
  monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path))
  assert loopback.shim_dir() == str(tmp_path / f'tff_fedwin-{os.geteuid()}')


def test_worker_with_space_in_cache_path_listens_on_loopback_only(
    tmp_path, monkeypatch
):
  monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path / 'with space'))
  monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path / 'tmp'))
  (tmp_path / 'tmp').mkdir()
  worker = runtime.start_local_worker(log_dir=str(tmp_path))
  try:
    addresses = _loopback_listeners_in_proc_net(worker.port)
    assert addresses and addresses <= _LOOPBACK_HEX, addresses
  finally:
    worker.stop()


def test_no_preloadable_location_is_refused(tmp_path, monkeypatch):
  monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path / 'with space'))
  monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path / 'tmp:colon'))
  before = _worker_children()
  with pytest.raises(
      runtime.WorkerConfinementError,
      match='No usable directory for the loopback shim: .*'
      'contains whitespace.*contains whitespace',
  ):
    runtime.start_local_worker(log_dir=str(tmp_path))
  assert _worker_children() == before


@pytest.mark.skipif(sys.byteorder != 'little', reason='hex is host order')
@pytest.mark.parametrize(
    'hex_address, address, is_loopback',
    [
        ('0100007F', '127.0.0.1', True),
        ('0500007F', '127.0.0.5', True),
        ('00000000', '0.0.0.0', False),
        ('0100000A', '10.0.0.1', False),
        ('00000000000000000000000001000000', '::1', True),
        ('00000000000000000000000000000000', '::', False),
        ('0000000000000000FFFF00000100007F', '::ffff:127.0.0.1', True),
        ('0000000000000000FFFF000000000000', '::ffff:0.0.0.0', False),
        ('B80D0120000000000000000001000000', '2001:db8::1', False),
    ],
)
def test_proc_net_addresses_decode(hex_address, address, is_loopback):
  # pylint: disable-next=protected-access
  assert loopback._decode_address(hex_address) == address
  assert loopback.is_loopback(address) == is_loopback


_LISTEN_SCRIPT = """
import socket, sys
with socket.socket(getattr(socket, sys.argv[1]), socket.SOCK_STREAM) as s:
  s.bind((sys.argv[2], 0))
  s.listen()
  print(s.getsockname()[1], flush=True)
  sys.stdin.readline()
"""


@pytest.mark.parametrize(
    'family, address, is_loopback',
    [
        ('AF_INET', '0.0.0.0', False),
        ('AF_INET', '127.0.0.1', True),
        ('AF_INET6', '::', False),
        ('AF_INET6', '::1', True),
        ('AF_INET6', '::ffff:127.0.0.1', True),
    ],
)
def test_listening_sockets_of_a_process(family, address, is_loopback):
  # Listens only while checked; nothing connects.
  child = subprocess.Popen(
      [sys.executable, '-c', _LISTEN_SCRIPT, family, address],
      stdin=subprocess.PIPE,
      stdout=subprocess.PIPE,
      text=True,
  )
  try:
    port = int(child.stdout.readline())
    assert loopback.listening_sockets(child.pid) == [(address, port)]
    if is_loopback:
      loopback.check_loopback_only(child.pid)
    else:
      with pytest.raises(
          runtime.WorkerConfinementError,
          match=f'pid {child.pid} listens on port {port} at address '
          f'{re.escape(address)}, which is not loopback',
      ):
        loopback.check_loopback_only(child.pid)
  finally:
    child.kill()
    child.wait()


def test_unreadable_sockets_fail_closed():
  with pytest.raises(
      runtime.WorkerConfinementError,
      match='Cannot read the listening sockets of process',
  ):
    loopback.check_loopback_only(2**22 + 1)  # Above any pid_max.


@pytest.mark.skipif(shutil.which('gcc') is None, reason='needs gcc')
def test_unconfined_worker_is_refused_and_killed(tmp_path, monkeypatch):
  source = tmp_path / 'noop.c'
  source.write_text('int tff_fedwin_noop;\n')
  noop = str(tmp_path / 'noop.so')
  subprocess.run(
      ['gcc', '-shared', '-fPIC', '-o', noop, str(source)], check=True
  )
  monkeypatch.setattr(loopback, 'loopback_bind_library', lambda: noop)
  before = _worker_children()
  with pytest.raises(
      runtime.WorkerConfinementError,
      match=r'pid (\d+) listens on port \d+ at address '
      r'(::|0\.0\.0\.0), which is not loopback .*'
      r'The worker was killed\.$',
  ) as error:
    runtime.start_local_worker(log_dir=str(tmp_path), loopback_only=True)
  pid = int(re.search(r'pid (\d+)', str(error.value)).group(1))
  assert not os.path.exists(f'/proc/{pid}')  # Killed and reaped.
  assert pid not in {w.pid for w in runtime.running_workers()}
  assert _worker_children() == before
