"""Confine a TFF worker to loopback and to its user, or refuse to start it.

TFF's `worker_binary` serves unauthenticated gRPC on every interface and has no
flag for the address. This module builds and verifies an LD_PRELOAD shim
(`loopback_bind.c`) that rebinds wildcard addresses to loopback and closes,
before the worker reads a byte, every accepted connection whose other end is
not a socket of the worker's own uid; it reads a process's listening TCP
sockets from /proc to check that they are loopback only, and its memory map to
check that the shim is loaded. Every failure raises `WorkerConfinementError`,
with a one-line message.
"""

import errno
import hashlib
import ipaddress
import os
import shlex
import shutil
import stat
import struct
import subprocess
import tempfile
from typing import Optional

from absl import logging

from tff_fedwin import errors

SHIM_SOURCE = os.path.join(os.path.dirname(__file__), 'loopback_bind.c')
_COMPILE_TIMEOUT_SECONDS = 120
_STDERR_TAIL_LINES = 5
# The loader splits LD_PRELOAD on spaces and colons, and expands `$ORIGIN`-style
# tokens; a path with any of these cannot be carried intact.
_UNSAFE_PRELOAD_CHARS = frozenset(' \t\n\r\v\f:$')
_TCP_LISTEN = '0A'
_INSTALL_HINT = (
    'install gcc (Debian/Ubuntu: apt-get install gcc) or set CC, or request a '
    'worker listening on all interfaces without authentication explicitly: '
    'loopback_only=False (scripts: --worker_bind=all)'
)


class WorkerConfinementError(errors.EnvironmentProblemError):
  """A TFF worker cannot be confined, or proven confined, to loopback and user.

  Raised for the shim, the worker's listening sockets and its log directory.
  """


def _fail(message: str) -> WorkerConfinementError:
  return WorkerConfinementError(' '.join(message.splitlines()))


def is_preload_safe(path: str) -> bool:
  """True if the loader reads `path` from LD_PRELOAD as one intact entry."""
  return os.path.isabs(path) and not _UNSAFE_PRELOAD_CHARS.intersection(path)


def _preferred_shim_dir() -> str:
  cache = os.environ.get('XDG_CACHE_HOME', '')
  if not os.path.isabs(cache):  # The XDG spec ignores relative paths.
    cache = os.path.join(os.path.expanduser('~'), '.cache')
  return os.path.join(cache, 'tff_fedwin')


def _fallback_shim_dir() -> str:
  return os.path.join(tempfile.gettempdir(), f'tff_fedwin-{os.geteuid()}')


def shim_dir() -> str:
  """The private directory holding the shim; created (mode 0700) and checked.

  `$XDG_CACHE_HOME/tff_fedwin` (default `~/.cache/tff_fedwin`), or, when that
  path cannot be carried in LD_PRELOAD or cannot be created,
  `<tempdir>/tff_fedwin-<euid>`.

  Raises:
    WorkerConfinementError: If neither path is usable, or the chosen directory
      is not a directory owned by this user and closed to others.
  """
  problems = []
  for path in (_preferred_shim_dir(), _fallback_shim_dir()):
    path = os.path.abspath(path)
    if not is_preload_safe(path):
      problems.append(f'{path!r} contains whitespace, ":" or "$"')
      continue
    try:
      _make_private_dir(path)
    except OSError as e:
      problems.append(f'{path!r} cannot be created ({e.strerror})')
      continue
    _check_private_dir(path)
    if problems:
      logging.info('Loopback shim directory: %s; using %s.', problems[0], path)
    return path
  raise _fail(
      f'No usable directory for the loopback shim: '
      f'{"; ".join(problems)}. Set XDG_CACHE_HOME to a writable path '
      f'without whitespace, ":" or "$".'
  )


def _make_private_dir(path: str) -> None:
  os.makedirs(os.path.dirname(path), exist_ok=True)
  try:
    os.mkdir(path, 0o700)
  except FileExistsError:
    pass


def _check_private_dir(path: str) -> None:
  """Refuses a directory others control; drops group/other read access."""
  st = os.lstat(path)
  if not stat.S_ISDIR(st.st_mode):
    raise _fail(
        f'Refusing loopback shim directory {path}: not a directory '
        '(a symlink or another file type).'
    )
  if st.st_uid != os.geteuid():
    raise _fail(
        f'Refusing loopback shim directory {path}: owned by uid '
        f'{st.st_uid}, not by the current user (uid {os.geteuid()}).'
    )
  mode = stat.S_IMODE(st.st_mode)
  if mode & 0o022:
    raise _fail(
        f'Refusing loopback shim directory {path}: writable by group '
        f'or others (mode {mode:04o}); remove it or `chmod 700` it.'
    )
  if mode & 0o077:  # Only readable by others (e.g. an older cache): tighten.
    os.chmod(path, 0o700)


def _read_owned_file(path: str) -> Optional[bytes]:
  """Content of `path`, opened without following symlinks; None if missing.

  Raises:
    WorkerConfinementError: If it is not a regular file owned by this user and
      closed to writes by others.
  """
  try:
    fd = os.open(
        path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    )
  except FileNotFoundError:
    return None
  except OSError as e:
    reason = 'it is a symlink' if e.errno == errno.ELOOP else e.strerror
    raise _fail(f'Refusing loopback shim file {path}: {reason}.') from None
  with os.fdopen(fd, 'rb') as f:
    st = os.fstat(f.fileno())
    if not stat.S_ISREG(st.st_mode):
      problem = 'not a regular file'
    elif st.st_uid != os.geteuid():
      problem = (
          f'owned by uid {st.st_uid}, not by the current user '
          f'(uid {os.geteuid()})'
      )
    elif st.st_mode & 0o022:
      problem = (
          f'writable by group or others (mode '
          f'{stat.S_IMODE(st.st_mode):04o})'
      )
    else:
      return f.read()
  raise _fail(f'Refusing loopback shim file {path}: {problem}.')


def _library_paths(directory: str, source: str) -> tuple[str, str]:
  with open(source, 'rb') as f:
    source_digest = hashlib.sha256(f.read()).hexdigest()[:16]
  stem = os.path.splitext(os.path.basename(source))[0]
  library = os.path.join(directory, f'{stem}-{source_digest}.so')
  return library, library + '.sha256'


def loopback_bind_library() -> str:
  """Path of the verified loopback shim (`preload_library(SHIM_SOURCE)`)."""
  return preload_library(SHIM_SOURCE)


def preload_library(source: str) -> str:
  """Path of the verified build of the C file `source`; built when missing.

  The loopback shim and the worker's malloc_trim shim
  (`runtime.worker_memory`) are built and checked the same way.

  The shim is used only if it and its SHA-256 recorded at build time (the
  `.sha256` file next to it) are regular files owned by this user and not
  writable by others, in the private `shim_dir()`, and its content matches the
  digest. A missing or mismatching shim is rebuilt with the C compiler (`$CC`,
  `cc` or `gcc`) into a new temporary file that is then moved into place; a
  file or directory owned by someone else is refused, never used.

  Raises:
    WorkerConfinementError: If the shim cannot be verified or built.
  """
  directory = shim_dir()
  library, digest_path = _library_paths(directory, source)
  try:
    content = _read_owned_file(library)
    recorded = _read_owned_file(digest_path)
    if content is not None:
      if recorded is not None and (
          hashlib.sha256(content).hexdigest().encode() == recorded.strip()
      ):
        return library
      logging.warning(
          'LD_PRELOAD shim %s does not match its recorded digest; '
          'rebuilding it.',
          library,
      )
    _build(directory, library, digest_path, source)
  except OSError as e:
    raise _fail(
        f'Cannot build the LD_PRELOAD shim {source} in {directory}: {e}.'
    ) from None
  return library


def _compiler(source: str) -> list[str]:
  command = shlex.split(os.environ.get('CC', ''))
  if command:
    return command
  found = shutil.which('cc') or shutil.which('gcc')
  if found is None:
    raise _fail(
        f'Cannot confine the TFF worker to loopback: no C compiler ($CC, cc '
        f'or gcc on PATH) to build the LD_PRELOAD shim {source}, and no '
        f'valid build of it is cached. To fix: {_INSTALL_HINT}.'
    )
  return [found]


def _build(directory: str, library: str, digest_path: str, source: str) -> None:
  """Compiles `source` to a new temporary file, then moves it into place."""
  compiler = _compiler(source)
  fd, tmp_library = tempfile.mkstemp(
      prefix='.loopback_bind-', suffix='.so', dir=directory
  )  # O_EXCL, mode 0600.
  os.close(fd)
  tmp_digest = None
  try:
    _compile(compiler, tmp_library, source)
    content = _read_owned_file(tmp_library)
    if content is None:
      raise _fail(f'Compiling {source} produced no {tmp_library}.')
    os.chmod(tmp_library, 0o500)
    fd, tmp_digest = tempfile.mkstemp(prefix='.digest-', dir=directory)
    with os.fdopen(fd, 'w') as f:
      f.write(hashlib.sha256(content).hexdigest() + '\n')
    os.replace(tmp_library, library)
    os.replace(tmp_digest, digest_path)
  finally:
    for leftover in (tmp_library, tmp_digest):
      if leftover is not None and os.path.lexists(leftover):
        os.unlink(leftover)


def _compile(compiler: list[str], output: str, source: str) -> None:
  command = compiler + [
      '-shared',
      '-fPIC',
      '-pthread',
      '-O2',
      '-o',
      output,
      source,
      '-ldl',
  ]
  try:
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=_COMPILE_TIMEOUT_SECONDS,
        check=False,
    )
  except (OSError, subprocess.TimeoutExpired) as e:
    raise _fail(
        f'Cannot confine the TFF worker to loopback: running the C '
        f'compiler {shlex.join(compiler)} failed ({e}). To fix: '
        f'{_INSTALL_HINT}.'
    ) from None
  if result.returncode != 0:
    tail = ' | '.join(result.stderr.strip().splitlines()[-_STDERR_TAIL_LINES:])
    raise _fail(
        f'Cannot confine the TFF worker to loopback: compiling '
        f'{source} with {shlex.join(compiler)} failed (exit '
        f'{result.returncode}): {tail or "no output"}'
    )


def ld_preload(existing: Optional[str] = None) -> str:
  """The LD_PRELOAD value loading the verified shim first, then `existing`.

  Raises:
    WorkerConfinementError: If the shim cannot be built, verified or carried
      intact in LD_PRELOAD.
  """
  library = loopback_bind_library()
  if not is_preload_safe(library):
    raise _fail(
        f'The loopback shim path {library!r} cannot be carried in '
        f'LD_PRELOAD (it must be absolute, without whitespace, ":" or '
        f'"$").'
    )
  return ':'.join(filter(None, [library, existing]))


def _decode_address(hex_address: str) -> str:
  """Decodes a /proc/net/tcp{,6} address: 32-bit words in host byte order."""
  packed = b''.join(
      struct.pack('=I', int(hex_address[i : i + 8], 16))
      for i in range(0, len(hex_address), 8)
  )
  ip = ipaddress.ip_address(packed)
  if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
    return f'::ffff:{ip.ipv4_mapped}'  # Python < 3.13 prints ::ffff:7f00:1.
  return str(ip)


def is_loopback(address: str) -> bool:
  """True for 127.0.0.0/8, ::1 and ::ffff:127.x.x.x."""
  ip = ipaddress.ip_address(address)
  if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
    ip = ip.ipv4_mapped
  return ip.is_loopback


def _socket_inodes(pid: int) -> set[str]:
  fd_dir = f'/proc/{pid}/fd'
  inodes = set()
  for name in os.listdir(fd_dir):
    try:
      target = os.readlink(os.path.join(fd_dir, name))
    except FileNotFoundError:
      continue  # Closed meanwhile.
    if target.startswith('socket:['):
      inodes.add(target[len('socket:[') : -1])
  return inodes


def listening_sockets(pid: int) -> list[tuple[str, int]]:
  """(address, port) of each TCP socket of process `pid` in LISTEN state.

  Raises:
    WorkerConfinementError: If /proc cannot tell (no /proc, no access).
  """
  try:
    inodes = _socket_inodes(pid)
    found = []
    for table in ('tcp', 'tcp6'):
      path = f'/proc/{pid}/net/{table}'
      if table == 'tcp6' and not os.path.exists(path):
        continue  # IPv6 disabled.
      with open(path) as f:
        next(f)  # Header.
        for line in f:
          fields = line.split()
          if fields[3] == _TCP_LISTEN and fields[9] in inodes:
            address, port = fields[1].split(':')
            found.append((_decode_address(address), int(port, 16)))
    return found
  except OSError as e:
    raise _fail(
        f'Cannot read the listening sockets of process {pid} from '
        f'/proc ({e}), so its confinement to loopback cannot be '
        f'checked.'
    ) from None


def check_loopback_only(pid: int) -> None:
  """Raises unless process `pid` listens on TCP, and on loopback only.

  Raises:
    WorkerConfinementError: Naming the pid, port and address seen.
  """
  listeners = listening_sockets(pid)
  if not listeners:
    raise _fail(
        f'Process {pid} has no listening TCP socket in /proc/{pid}/'
        f'net/tcp or tcp6, so its confinement to loopback cannot be '
        f'checked.'
    )
  for address, port in listeners:
    if not is_loopback(address):
      raise _fail(
          f'TFF worker pid {pid} listens on port {port} at address '
          f'{address}, which is not loopback (the LD_PRELOAD shim did '
          f'not take effect).'
      )


def check_shim_loaded(pid: int, library: str) -> None:
  """Raises unless `library` (the shim) is mapped into process `pid`.

  A preloaded library's `accept4` comes before libc's for every dynamically
  linked call, so this proves that the worker refuses other users'
  connections.

  Raises:
    WorkerConfinementError: If /proc cannot tell, or the shim is not mapped.
  """
  try:
    with open(f'/proc/{pid}/maps') as f:
      mapped = {line.split(maxsplit=5)[-1].strip() for line in f}
  except OSError as e:
    raise _fail(
        f'Cannot read the memory map of process {pid} from /proc ({e}), so '
        f"whether it refuses other users' connections cannot be checked."
    ) from None
  if os.path.realpath(library) not in mapped:
    raise _fail(
        f'TFF worker pid {pid} did not load the LD_PRELOAD shim {library}, '
        f'so it would serve connections from other users.'
    )


def connect_host(address: str) -> str:
  """The host part of `host:port` reaching a socket listening on `address`.

  `::1` -> `[::1]`; `::ffff:127.0.0.1` (a v4-mapped listener, reached over
  IPv4) -> `127.0.0.1`; an IPv4 address is returned as is.
  """
  ip = ipaddress.ip_address(address)
  if isinstance(ip, ipaddress.IPv6Address):
    if ip.ipv4_mapped is not None:
      return str(ip.ipv4_mapped)
    return f'[{ip}]'
  return str(ip)
