"""Test helpers: Linux network namespaces as hosts, a TFF worker in each.

`make_hosts(n)` makes n namespaces `tffw<pid>h<i>`, each joined to the root
namespace by a veth pair with the private /30 10.213.<k>.0/30 (root side .1,
the host's side .2; <k> a free one); `Host.start_worker` runs the TFF
`worker_binary` inside it (`ip netns exec`, in its own process group, killed
if this process dies), bound to that namespace's interfaces only, reached
from the root namespace at `10.213.<k>.2:port`. `remove_hosts` kills the
workers' process groups and deletes veths and namespaces; use it in a
finalizer. Traffic goes only to the namespaces made here.

`skip_reason()` says why namespaces cannot be made here (not root, no `ip`,
no CAP_SYS_ADMIN), or None.
"""

import fcntl
import itertools
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Optional
import warnings

import grpc
import pytest

from tests.runtime import processes
from tff_fedwin import runtime
from tff_fedwin.runtime import worker_memory
from tff_fedwin.runtime import worker_stub

_PREFIX = 'tffw'
_LOCK = os.path.join(tempfile.gettempdir(), 'tff_fedwin_netns.lock')
_SUBNET = '10.213.{}.'
# Host numbers of this process: names never repeat, even across fixtures.
_HOST_NUMBERS = itertools.count(1)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
  return subprocess.run(
      ['ip', *args], capture_output=True, text=True, check=check, timeout=30
  )


def skip_reason() -> Optional[str]:
  """Why network namespaces cannot be made here, or None if they can."""
  if os.geteuid() != 0:
    return 'network namespaces need root (euid is %d)' % os.geteuid()
  for tool in ('ip', 'unshare', 'mount'):
    if shutil.which(tool) is None:
      return f'`{tool}` is not installed'
  name = f'{_PREFIX}{os.getpid()}probe'
  made = _ip('netns', 'add', name, check=False)
  if made.returncode:
    return f'`ip netns add` failed: {made.stderr.strip()}'
  _ip('netns', 'del', name, check=False)
  return None


class Host:
  """A network namespace joined to the root one by a veth pair.

  Attributes:
    netns: The namespace's name.
    address: Its address, as the root namespace reaches it.
    veth: The root side of the veth pair.
    workers: Worker processes started in it (`subprocess.Popen`).
  """

  def __init__(self, netns: str, subnet: int, veth: str):
    self.netns = netns
    self.address = _SUBNET.format(subnet) + '2'
    self.veth = veth
    self.workers = []

  def start_worker(
      self,
      port: int,
      log_path: str,
      *,
      hidden_dir: Optional[str] = None,
      read_only_dir: Optional[str] = None,
      ready_timeout_seconds: float = 60.0,
  ) -> subprocess.Popen:
    """Starts `worker_binary` in this namespace; waits until it serves.

    Args:
      port: The port (int) to serve on, at `self.address`.
      log_path: The worker's log file (str).
      hidden_dir: If set, the worker runs in a private mount namespace
        (`unshare -m`, propagation private) with an empty tmpfs mounted over
        this directory: it cannot see the files there.
      read_only_dir: If set, the worker runs in a private mount namespace
        with this directory bind-mounted over itself read-only: it sees the
        files there and cannot write (as on a read-only shared mount; root
        included).
      ready_timeout_seconds: How long the worker may take to serve.

    Returns:
      The worker's process (`ip netns exec` execs it: the same pid).
    """
    command = ['ip', 'netns', 'exec', self.netns]
    mounts = {
        'mount -t tmpfs tmpfs "$0"': hidden_dir,
        'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0"': (
            read_only_dir
        ),
    }
    for mount, directory in mounts.items():
      if directory is not None:
        command += [
            'unshare',
            '-m',
            '--propagation',
            'private',
            '/bin/sh',
            '-c',
            f'{mount} && exec "$@"',
            directory,
        ]
    command += [
        runtime.worker_binary_path(),
        f'--port={port}',
        '--max_concurrent_computation_calls=2',
    ]
    setpriv = shutil.which('setpriv')
    if setpriv:  # Killed with this process, were it killed itself.
      command = [setpriv, '--pdeathsig', 'KILL', '--'] + command
    with open(log_path, 'ab') as log:
      process = subprocess.Popen(
          command,
          env=worker_memory.worker_memory_env(os.environ),
          stdin=subprocess.DEVNULL,
          stdout=log,
          stderr=subprocess.STDOUT,
          start_new_session=True,
      )
    self.workers.append(process)
    _wait_serving(f'{self.address}:{port}', process, ready_timeout_seconds)
    return process

  def kill_workers(self) -> None:
    """SIGKILLs every worker's process group here and reaps them."""
    for process in self.workers:
      kill(process)
    self.workers = []


def kill(process: subprocess.Popen) -> None:
  """SIGKILLs `process`'s process group and reaps it."""
  try:
    os.killpg(process.pid, signal.SIGKILL)
  except ProcessLookupError:
    pass
  process.wait(timeout=30)


def _wait_serving(address, process, timeout_seconds) -> None:
  deadline = time.monotonic() + timeout_seconds
  with grpc.insecure_channel(
      address, worker_stub.GRPC_CHANNEL_OPTIONS
  ) as channel:
    ready = grpc.channel_ready_future(channel)
    while True:
      try:
        ready.result(timeout=0.2)
        return
      except grpc.FutureTimeoutError:
        pass
      if process.poll() is not None or time.monotonic() > deadline:
        kill(process)
        raise RuntimeError(
            f'The TFF worker for {address} (pid {process.pid}) did not serve '
            f'(exit code {process.returncode}).'
        )


def _free_subnets(count: int) -> list[int]:
  """`count` values k whose 10.213.k.0/30 no interface here uses."""
  used = _ip('-o', '-4', 'addr').stdout
  taken = {int(k) for k in re.findall(r'inet 10\.213\.(\d+)\.', used)}
  free = [k for k in range(1, 255) if k not in taken][:count]
  if len(free) < count:
    raise RuntimeError('No free 10.213.k.0/30 subnets left.')
  return free


def _remove_stale() -> None:
  """Deletes namespaces of this prefix whose test process is gone."""
  listed = _ip('netns', 'list', check=False).stdout
  for name, pid in re.findall(rf'^({_PREFIX}(\d+)h\d+)', listed, re.M):
    if not processes.pid_alive(int(pid)):
      _ip('netns', 'del', name, check=False)


def _make_host(index: int, subnet: int) -> Host:
  pid = os.getpid()
  host = Host(f'{_PREFIX}{pid}h{index}', subnet, f'tw{pid}r{index}')
  peer = f'tw{pid}n{index}'
  prefix = _SUBNET.format(subnet)
  _ip('netns', 'add', host.netns)
  _ip('link', 'add', host.veth, 'type', 'veth', 'peer', 'name', peer)
  _ip('link', 'set', peer, 'netns', host.netns)
  _ip('addr', 'add', prefix + '1/30', 'dev', host.veth)
  _ip('link', 'set', host.veth, 'up')
  _ip('-n', host.netns, 'addr', 'add', prefix + '2/30', 'dev', peer)
  _ip('-n', host.netns, 'link', 'set', peer, 'up')
  _ip('-n', host.netns, 'link', 'set', 'lo', 'up')
  return host


def make_hosts(count: int, made: list[Host]) -> list[Host]:
  """Makes `count` hosts, appending each to `made` as soon as it exists.

  Pass a list that a finalizer hands to `remove_hosts`: a failure half way
  leaves nothing behind either.
  """
  with open(_LOCK, 'w') as lock:  # Other test processes pick subnets too.
    fcntl.flock(lock, fcntl.LOCK_EX)
    _remove_stale()
    for subnet in _free_subnets(count):
      index = next(_HOST_NUMBERS)
      try:
        made.append(_make_host(index, subnet))
      except subprocess.CalledProcessError as e:
        # What exists of this host is removed with the others, then fail.
        pid = os.getpid()
        made.append(Host(f'{_PREFIX}{pid}h{index}', subnet, f'tw{pid}r{index}'))
        raise RuntimeError(f'{e.cmd}: {e.stderr}') from None
  return made[-count:]


def hosts_fixture(count: int, scope: str = 'module'):
  """A pytest fixture yielding `count` hosts, all removed at its teardown.

  Where namespaces cannot be made, the tests using it are skipped with the
  reason, also shown as a warning (pytest -q lists skip reasons only with
  -rs).
  """

  @pytest.fixture(scope=scope)
  def hosts():
    reason = skip_reason()
    if reason is not None:
      reason = f'No network namespaces as hosts here: {reason}.'
      warnings.warn(reason)
      pytest.skip(reason)
    made = []
    try:
      yield make_hosts(count, made)
    finally:
      remove_hosts(made)

  return hosts


def remove_hosts(hosts: list[Host]) -> None:
  """Kills the hosts' workers, deletes their veths and namespaces."""
  for host in hosts:
    host.kill_workers()
    _ip('link', 'del', host.veth, check=False)
    _ip('netns', 'del', host.netns, check=False)
  hosts.clear()


def namespace_names() -> list[str]:
  """The namespaces this process has made and not deleted."""
  listed = _ip('netns', 'list', check=False).stdout
  return re.findall(rf'^({_PREFIX}{os.getpid()}h\d+)', listed, re.M)
