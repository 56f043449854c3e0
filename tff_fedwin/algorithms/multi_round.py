"""Several rounds of a learning process in one TFF call.

Each `next` call returns the whole server state to Python and sends it back;
running E rounds in one computation pays that round trip once per E rounds
(docs/performance.md, 'Several rounds per call'). With `window_read_every=E` the
window model is exact at the end of every call.
"""

import tensorflow_federated as tff

from tff_fedwin import checks


def build_multi_round_process(
    process: tff.learning.templates.LearningProcess, rounds_per_call: int
) -> tff.learning.templates.LearningProcess:
  """Wraps `process` so that one `next` call runs `rounds_per_call` rounds.

  The returned `tff.learning.templates.LearningProcess` has

  * `initialize`, `get_model_weights`, `set_model_weights` (and hparams) of
    `process`;
  * `next`: `(<S@SERVER, {<D*, ..., D*>}@CLIENTS> ->
    <state=S@SERVER, metrics=<M, ..., M>@SERVER>)`: client slot j receives a
    tuple of `rounds_per_call` datasets, its data for each round in order (the
    client behind slot j may differ per round). The result is bit-identical to
    calling `process.next` `rounds_per_call` times (the same TF graphs run
    inside one computation); `metrics[r]` are round r's metrics.

  Every round of a call must have the same number of client slots.

  Args:
    process: A `tff.learning.templates.LearningProcess`.
    rounds_per_call: E >= 1.

  Raises:
    TypeError: If `process` is not a `LearningProcess`.
    ValueError: If `rounds_per_call` is not an integer >= 1.
  """
  if not isinstance(process, tff.learning.templates.LearningProcess):
    raise TypeError(
        '`process` must be a tff.learning.templates.LearningProcess, got '
        f'{type(process).__name__}.'
    )
  rounds_per_call = checks.check_int(
      'rounds_per_call', rounds_per_call, minimum=1
  )
  state_type, data_type = process.next.type_signature.parameter
  rounds_data_type = tff.FederatedType(
      tff.StructWithPythonType([data_type.member] * rounds_per_call, tuple),
      tff.CLIENTS,
  )

  @tff.federated_computation(state_type, rounds_data_type)
  def next_fn(state, rounds_data):
    metrics = []
    for r in range(rounds_per_call):
      output = process.next(state, rounds_data[r])
      state = output.state
      metrics.append(output.metrics)
    return tff.learning.templates.LearningProcessOutput(
        state=state, metrics=tff.federated_zip(tuple(metrics))
    )

  return tff.learning.templates.LearningProcess(
      process.initialize,
      next_fn,
      process.get_model_weights,
      process.set_model_weights,
      get_hparams_fn=process.get_hparams,
      set_hparams_fn=process.set_hparams,
  )
