"""The server state kept in worker-side files between rounds.

Every `next` call of a TFF process sends its whole server state to the worker
and returns the new one, each way through TFF's value serialization in the
driver. With the state in files instead, the worker reads the state of round
t from files at the start of round t+1's call and writes the new one to files
at its end; only two paths cross TFF's value serialization, and the driver
reads the new state from the files (one copy per leaf) so that the runner
still returns it as numpy. A state the driver changed, or one
restored from a checkpoint, is written to the files first; the state last
returned is recognized by identity and not written again.

Why, and the measurements: docs/performance.md sec. 2.4.

The files are the tensor bundles (`tensor_bundles`: TensorFlow's checkpoint
format, each leaf's raw bytes and checksum) `<directory>/server_state.<a|b>`;
a call reads one and writes the other, so a call that fails leaves the state
it read intact. The driver and the worker must see the same directory: local
workers, or a shared file system.
"""

import os
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.algorithms import tensor_bundles


def _state_computations(state_type: tff.types.Type):
  """`(string -> S)` and `(<S, string> -> string)` over a prefix's bundle."""
  specs = tff.types.type_to_tf_tensor_specs(state_type)
  flat_specs = tf.nest.flatten(specs)

  @tff.tensorflow.computation(np.str_)
  def read_state(prefix):
    return tf.nest.pack_sequence_as(
        specs, tensor_bundles.restore(prefix, flat_specs)
    )

  @tff.tensorflow.computation(state_type, np.str_)
  def write_state(state, prefix):
    saved = tensor_bundles.save_op(prefix, tf.nest.flatten(state))
    with tf.control_dependencies([saved]):
      return tf.identity(prefix)

  return read_state, write_state


def build_resident_next(next_fn: tff.Computation) -> tff.Computation:
  """`next_fn` with the server state read from and written to files.

  For `next_fn` of type `(<S@SERVER, A_1, ..., A_k> -> <S@SERVER, R_1, ...,
  R_m>)` (a `LearningProcess`'s or `build_scaffold`'s `next`), returns
  `(<string@SERVER, string@SERVER, A_1, ..., A_k> -> <string@SERVER, R_1,
  ..., R_m>)`: the state read from the tensor bundle at `source`, one
  `next_fn`, the new state written as the bundle at `target`, and `target`
  returned once it is written. The same arithmetic as `next_fn`.

  Raises:
    ValueError: If `next_fn` does not take a SERVER-placed state first and
      return one first, or the state has a leaf that is not numeric or bool.
  """
  parameter = next_fn.type_signature.parameter
  result = next_fn.type_signature.result
  if not (
      isinstance(parameter, tff.StructType)
      and isinstance(result, tff.StructType)
      and isinstance(parameter[0], tff.FederatedType)
      and parameter[0].placement is tff.SERVER
      and parameter[0].is_equivalent_to(result[0])
  ):
    raise ValueError(
        '`next_fn` must take and return a SERVER-placed state first, got '
        f'{next_fn.type_signature}.'
    )
  state_type = parameter[0].member
  for spec in tf.nest.flatten(tff.types.type_to_tf_tensor_specs(state_type)):
    if not (spec.dtype.is_numeric or spec.dtype.is_bool):
      raise ValueError(
          f'The server state has a {spec.dtype.name} leaf; only numeric and '
          'bool leaves can be kept in files.'
      )
  read_state, write_state = _state_computations(state_type)
  prefix_type = tff.FederatedType(np.str_, tff.SERVER)
  num_args, num_results = len(parameter), len(result)

  @tff.federated_computation(
      tff.StructType(
          [prefix_type, prefix_type]
          + [parameter[i] for i in range(1, num_args)]
      )
  )
  def resident_next(arg):
    state = tff.federated_map(read_state, arg[0])
    output = next_fn(state, *[arg[i] for i in range(2, num_args + 1)])
    written = tff.federated_map(write_state, (output[0], arg[1]))
    return (written, *[output[i] for i in range(1, num_results)])

  return resident_next


class ResidentServerState:
  """The driver's side of a server state kept in files between rounds.

  `next(state, *args)` runs `build_resident_next(next_fn)`: it writes `state`
  to the files unless it is the state this object last returned (checked by
  identity; those are already in the files), then reads the new state back
  and returns `(new_state, R_1, ..., R_m)` as `next_fn` would: numpy, with
  the Python containers of the state's TFF type, read-only arrays and numpy
  scalars, the same bits.
  """

  def __init__(self, next_fn: tff.Computation, directory: str):
    """Builds the computation and creates `directory` (private to this user).

    Args:
      next_fn: As for `build_resident_next`.
      directory: Where the state's files live; the workers must see it.

    Raises:
      ValueError: As `build_resident_next`.
      PermissionError: If `directory` cannot be made private to this user.
    """
    self._next = build_resident_next(next_fn)
    state_type = next_fn.type_signature.parameter[0].member
    self._specs = tff.types.type_to_tf_tensor_specs(state_type)
    # Each leaf's dtype and shape, as zero-stride views (no leaf's memory).
    self._like = [
        np.broadcast_to(np.empty((), spec.dtype.as_numpy_dtype), spec.shape)
        for spec in tf.nest.flatten(self._specs)
    ]
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)  # Also an existing one; fails if not ours.
    self._prefixes = tuple(
        os.path.join(directory, f'server_state.{name}') for name in 'ab'
    )
    self._held = None  # The state last returned, in self._prefixes[self._at].
    self._at = 0

  def next(self, state: Any, *args: Any) -> tuple[Any, ...]:
    """`next_fn(state, *args)` with the state passed through the files.

    Raises:
      ValueError: If `state`'s leaves differ in number or shape from the
        state type's.
      RuntimeError: If the computation did not report the files written.
    """
    if state is not self._held:
      self._write(self._prefixes[self._at], state)
    source, target = self._prefixes[self._at], self._prefixes[1 - self._at]
    written, *rest = self._next(source, target, *args)
    if written != target.encode():  # TFF returns strings as bytes.
      raise RuntimeError(
          f'The worker reported the server state written to {written!r}, '
          f'not {target!r}.'
      )
    new_state = self._read(target)
    self._held, self._at = new_state, 1 - self._at
    return (new_state, *rest)

  def _write(self, prefix: str, state: Any) -> None:
    leaves = tf.nest.flatten(state)
    if len(leaves) != len(self._like):
      raise ValueError(
          f'The server state has {len(leaves)} leaves; its type has '
          f'{len(self._like)}.'
      )
    for j, (leaf, like) in enumerate(zip(leaves, self._like)):
      if np.shape(leaf) != like.shape:
        raise ValueError(
            f'Leaf {j} of the server state has shape {np.shape(leaf)}; its '
            f'type has {like.shape}.'
        )
    tensor_bundles.write(
        prefix,
        [
            np.asarray(leaf, like.dtype)
            for leaf, like in zip(leaves, self._like)
        ],
    )

  def _read(self, prefix: str) -> Any:
    leaves = tensor_bundles.read(prefix, self._like)
    for leaf in leaves:
      if isinstance(leaf, np.ndarray):
        leaf.flags.writeable = False
    return tf.nest.pack_sequence_as(self._specs, leaves)
