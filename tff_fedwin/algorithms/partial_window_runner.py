"""The window over part of the model (WiMA Table 5).

WiMA asks which part of the network its window helps (WiMA sec. 5, "WIMA
outputs better features", Table 5): it evaluates the model whose classifier
(the last linear layer) is the window's and whose feature extractor is the
round's global model, and the converse. `PartialWindowRunner` wraps any
runner with a window in evaluate mode and hands the loop that mixed model as
the window model (docs/design.md, "The window over part of the model").
"""

import collections
from collections.abc import Mapping, Sequence
from typing import Any

import tensorflow_federated as tff

from tff_fedwin import choices
from tff_fedwin import round_runner

ModelWeights = tff.learning.models.ModelWeights
# 'all' is the whole window model, no wrapper.
WINDOW_PARTS = choices.WINDOW_PARTS


def classifier_variable_count(variable_names: Sequence[str]) -> int:
  """How many trailing trainable variables form the last layer.

  Keras names a layer's variables `<layer>/<variable>:0` (nested layers add
  scopes, e.g. `lstm/lstm_cell/kernel:0`); the last layer is the scope of the
  last trainable variable, and its variables are the trailing ones of that
  scope (a Dense layer's kernel and bias: 2).

  Args:
    variable_names: The names of a model's trainable variables, in order.

  Returns:
    k >= 1: the classifier is the last k trainable variables.

  Raises:
    ValueError: If the names carry no layer scope, or the last layer holds
      every trainable variable (nothing would be the feature extractor).
  """
  names = list(variable_names)
  if not names or '/' not in names[-1]:
    raise ValueError(
        'The classifier is the last layer, found by the layer scope of the '
        "trainable variables' names (`<layer>/kernel:0`); got "
        f'{names[-3:]!r}. Pass the count of its variables instead.'
    )
  scope = names[-1].rsplit('/', 1)[0]
  count = 0
  for name in reversed(names):
    if name.rsplit('/', 1)[0] != scope:
      break
    count += 1
  if count == len(names):
    raise ValueError(
        f'Every trainable variable is in the last layer ({scope!r}): the '
        'model has no feature extractor to tell from its classifier.'
    )
  return count


def mix_model_weights(
    window: ModelWeights, global_: ModelWeights, part: str, classifier: int
) -> ModelWeights:
  """The model with `part` from `window` and the rest from `global_`.

  Args:
    window: The window model m^t.
    global_: The global model w^t, of the same structure.
    part: `'classifier'` (the last `classifier` trainable variables from
      m^t, everything else from w^t) or `'features'` (every other trainable
      variable and the non-trainable ones, e.g. batch-norm statistics, from
      m^t; the classifier from w^t).
    classifier: k, the count of the classifier's trainable variables.

  Returns:
    `ModelWeights` with lists of the chosen arrays.
  """
  if part not in ('classifier', 'features'):
    raise ValueError(
        f"`part` must be 'classifier' or 'features'; got {part!r}."
    )
  split = len(global_.trainable) - classifier
  if part == 'classifier':
    head, body = window, global_
  else:
    head, body = global_, window
  return ModelWeights(
      trainable=list(body.trainable[:split]) + list(head.trainable[split:]),
      non_trainable=list(body.non_trainable),
  )


class PartialWindowRunner(round_runner.ForwardingRunner):
  """A runner whose window model is the window on part of the model only.

  `window_model_weights(state)` (and each extra window's model) is
  `mix_model_weights(m^t, w^t, part, classifier)`; before the window is
  active the wrapped runner returns w^t, which the mix leaves as it is. The
  process is unchanged: evaluate mode only (under IMA the clients would
  train from the whole window model, which is not what WiMA Table 5 asks).
  """

  def __init__(
      self, runner: round_runner.RoundRunner, part: str, classifier: int
  ):
    """Wraps `runner`.

    Args:
      runner: A `RoundRunner` of a process with a window in evaluate mode.
      part: `'classifier'` or `'features'` (`WINDOW_PARTS` but `'all'`).
      classifier: k >= 1, the last layer's count of trainable variables
        (`classifier_variable_count`).
    """
    super().__init__(runner)
    if part not in WINDOW_PARTS or part == 'all':
      raise ValueError(
          f"`part` must be 'classifier' or 'features'; got {part!r}."
      )
    if not isinstance(classifier, int) or classifier < 1:
      raise ValueError(f'`classifier` must be an int >= 1; got {classifier!r}.')
    self._part = part
    self._classifier = classifier

  def _mix(self, window: ModelWeights, state: Any) -> ModelWeights:
    return mix_model_weights(
        window,
        self.inner.global_model_weights(state),
        self._part,
        self._classifier,
    )

  def window_model_weights(self, state: Any) -> ModelWeights:
    return self._mix(self.inner.window_model_weights(state), state)

  def extra_window_models(self, state: Any) -> Mapping[str, ModelWeights]:
    """Each extra window's model mixed as the window model is."""
    return collections.OrderedDict(
        (name, self._mix(model, state) if name.startswith('window_') else model)
        for name, model in self.inner.extra_window_models(state).items()
    )
