"""Clients' examples in one tensor bundle, each dataset built in the worker.

`BundleClientData`'s `serializable_dataset_fn` reads a client's examples from
a tensor bundle by name (`RestoreV2`), so its `dataset_computation` (TFF's
idiom for sending only client ids) holds no data, at any population size
(docs/performance.md sec. 2.4, 'The clients' data by id'). The workers must
see `prefix` (local workers, or a shared file system).

Layout of the bundle at `prefix` (`tensor_bundles`: TensorFlow's checkpoint
format; one data shard per chunk the driver wrote): tensor
`'<j>/<client id>'` holds leaf j (in `tf.nest.flatten` order of the element
structure) of all the client's examples, stacked: `[n_k, *shape_j]`. A
client with no examples has `[0, *shape_j]` tensors.
"""

import glob
import os
import shutil
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import checks
from tff_fedwin.algorithms import tensor_bundles

# The default `chunk_bytes` of `write_client_data_bundle`.
_CHUNK_BYTES = 256 * 2**20
# Examples per batch when the driver reads a client's dataset (one batch for
# most clients; `np.iinfo(np.int64).max` aborted the process on one of the
# tasks' data, 2026-11-28).
_READ_BATCH = 2**16


def _stacked_specs(element_spec: Any) -> list[tf.TensorSpec]:
  """Each leaf's `TensorSpec` with a leading examples axis of any size.

  Raises:
    ValueError: If a leaf is not a `tf.TensorSpec` with a fully defined shape.
  """
  specs = []
  for j, spec in enumerate(tf.nest.flatten(element_spec)):
    if not (isinstance(spec, tf.TensorSpec) and spec.shape.is_fully_defined()):
      raise ValueError(
          'A client data bundle needs examples whose leaves are dense '
          f'tensors of fully defined shape; leaf {j} is {spec!r}.'
      )
    specs.append(tf.TensorSpec([None, *spec.shape], spec.dtype))
  return specs


class BundleClientData(tff.simulation.datasets.ClientData):
  """A `ClientData` read from the bundle `write_client_data_bundle` wrote.

  Each client's dataset is `tf.data.Dataset.from_tensor_slices` of its
  stacked leaves, packed as `element_type_structure`: the examples of the
  `ClientData` written, in the same order.
  """

  def __init__(self, prefix: str, client_ids: Sequence[str], element_spec: Any):
    self._prefix = prefix
    self._client_ids = list(client_ids)
    self._element_spec = element_spec
    self._specs = _stacked_specs(element_spec)

  @property
  def prefix(self) -> str:
    """The bundle's absolute path prefix."""
    return self._prefix

  @property
  def client_ids(self) -> list[str]:
    return self._client_ids

  @property
  def element_type_structure(self) -> Any:
    return self._element_spec

  @property
  def serializable_dataset_fn(self):
    """`client id (str or string tensor) -> tf.data.Dataset`, read by name."""

    def dataset_fn(client_id):
      # Leaf j is `'<j>/<client id>'`, as `_write_chunks` names it.
      prefixes = [f'{j}/' for j in range(len(self._specs))]
      names = tf.stack([tf.strings.join([p, client_id]) for p in prefixes])
      leaves = tensor_bundles.restore(self._prefix, self._specs, names)
      return tf.data.Dataset.from_tensor_slices(
          tf.nest.pack_sequence_as(self._element_spec, leaves)
      )

    return dataset_fn


def builds_datasets_from_ids(
    client_data: tff.simulation.datasets.ClientData,
) -> bool:
  """Whether `client_data.dataset_computation` holds none of its examples.

  True for a `BundleClientData` (reads by name), TFF's `SqlClientData` (a
  database query per id) and a `ClientData` whose class sets
  `DATASETS_FROM_IDS = True` (its examples computed from the id in the
  graph, e.g. the benchmarks' `SyntheticPopulation`): their
  `dataset_computation` runs in the workers as it is, at any population
  size. Any other `ClientData` may trace its examples into that computation
  as constants (TFF's in-memory ones do; a graph is limited to 2 GB), so it
  is written as a bundle first (`write_client_data_bundle`).
  """
  return isinstance(
      client_data,
      (BundleClientData, tff.simulation.datasets.SqlClientData),
  ) or bool(getattr(type(client_data), 'DATASETS_FROM_IDS', False))


def _stacked_leaves(dataset: tf.data.Dataset, specs) -> list[np.ndarray]:
  """All of `dataset`'s examples, each leaf stacked (`[0, ...]` if empty)."""
  batches = [
      [np.asarray(leaf) for leaf in tf.nest.flatten(batch)]
      for batch in dataset.batch(_READ_BATCH).as_numpy_iterator()
  ]
  if not batches:
    return [np.zeros([0, *s.shape[1:]], s.dtype.as_numpy_dtype) for s in specs]
  return [np.concatenate(leaves) for leaves in zip(*batches)]


def _write_chunks(
    client_data, parts_dir: str, specs, chunk_bytes: int
) -> list[str]:
  """Writes the clients' tensors as bundles of about `chunk_bytes` each."""
  prefixes, names, arrays, size = [], [], [], 0

  def flush():
    prefixes.append(os.path.join(parts_dir, f'part{len(prefixes)}'))
    tensor_bundles.write(prefixes[-1], arrays, names)
    names.clear()
    arrays.clear()

  for client_id in client_data.client_ids:
    dataset = client_data.serializable_dataset_fn(client_id)
    for j, leaf in enumerate(_stacked_leaves(dataset, specs)):
      names.append(f'{j}/{client_id}')
      arrays.append(leaf)
      size += leaf.nbytes
    if size >= chunk_bytes:
      flush()
      size = 0
  if names or not prefixes:
    flush()
  return prefixes


def _bundle_files(prefix: str) -> list[str]:
  """The index and data shards (one per chunk) of the bundle at `prefix`."""
  return glob.glob(glob.escape(prefix) + '.index') + glob.glob(
      glob.escape(prefix) + '.data-*-of-*'
  )


def write_client_data_bundle(
    client_data: tff.simulation.datasets.ClientData,
    prefix: str,
    *,
    chunk_bytes: int = _CHUNK_BYTES,
) -> BundleClientData:
  """Writes every client's examples of `client_data` as the bundle at `prefix`.

  Each client's dataset is `client_data.serializable_dataset_fn(client_id)`
  (TFF's `create_tf_dataset_for_client` without its scan of the id list),
  read once in the driver; the bundle replaces any at `prefix`.

  Args:
    client_data: A `tff.simulation.datasets.ClientData` of single examples
      whose leaves are dense tensors of fully defined shape (e.g.
      `tff_fedwin.data.client_data_from_partition`'s), with string ids.
    prefix: The bundle's path prefix (`<prefix>.index`, `<prefix>.data-*`,
      files 0600); made absolute. The workers must see it.
    chunk_bytes: The driver gathers clients until their tensors hold this
      many bytes, writes them as one bundle, and merges the bundles at the
      end, so it holds about this much of the examples at once (>= 1).

  Returns:
    The `BundleClientData` over the bundle: the same ids, element structure
    and examples.

  Raises:
    ValueError: If `client_data` is not a `ClientData`, a leaf of its
      elements is not a dense tensor of fully defined shape, it has no
      clients, or `chunk_bytes` is not an int >= 1.
  """
  if not isinstance(client_data, tff.simulation.datasets.ClientData):
    raise ValueError(
        '`client_data` must be a tff.simulation.datasets.ClientData, got '
        f'{type(client_data).__name__}.'
    )
  if not client_data.client_ids:
    raise ValueError('`client_data` has no clients.')
  checks.check_int('chunk_bytes', chunk_bytes, minimum=1)
  element_spec = client_data.element_type_structure
  specs = _stacked_specs(element_spec)
  prefix = os.path.abspath(prefix)
  parts_dir = prefix + '.parts'
  shutil.rmtree(parts_dir, ignore_errors=True)
  for path in _bundle_files(prefix):  # A replaced bundle may have more shards.
    os.remove(path)
  os.makedirs(parts_dir, mode=0o700)
  try:
    parts = _write_chunks(client_data, parts_dir, specs, chunk_bytes)
    tf.raw_ops.MergeV2Checkpoints(
        checkpoint_prefixes=parts,
        destination_prefix=prefix,
        delete_old_dirs=False,
    )
  finally:
    shutil.rmtree(parts_dir, ignore_errors=True)
  for path in _bundle_files(prefix):
    os.chmod(path, 0o600)
  return BundleClientData(prefix, client_data.client_ids, element_spec)
