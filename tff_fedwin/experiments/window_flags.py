"""The window flags of an experiment and how they fit together.

`--window_size`, `--window_mode`, `--window_start_round`,
`--window_read_every`, `--window_location`, `--window_sizes` and
`--window_part` (docs/design.md sec. 1); checked before any TFF work, every misfit reported,
each naming its flags. `config` is an `ExperimentConfig`.
"""

from typing import Any

from tff_fedwin import choices


def parse_window_sizes(config: Any) -> tuple[int, ...]:
  """`--window_sizes` '5,50,200' -> (5, 50, 200); '' -> ().

  Raises:
    ValueError: naming `--window_sizes`, unless a comma list of distinct
      integers 1..--total_rounds other than --window_size.
  """
  text = config.window_sizes.strip()
  if not text:
    return ()
  items = [item.strip() for item in text.split(',')]
  allowed = (
      f'a comma list of distinct integers 1-{config.total_rounds} '
      '(--total_rounds) other than --window_size '
      f'({config.window_size})'
  )
  sizes = tuple(
      int(item) for item in items if item.isdecimal() and item.isascii()
  )
  if (
      len(sizes) != len(items)
      or len(set(sizes)) != len(sizes)
      or config.window_size in sizes
      or not all(1 <= size <= config.total_rounds for size in sizes)
  ):
    raise ValueError(f'--window_sizes must be {allowed}; got {text!r}.')
  return sizes


def kept_by_program(config: Any) -> bool:
  """The window is surely kept by the program (`--window_sizes` needs it)."""
  return config.window_location == 'program' or (
      config.window_location == 'auto' and bool(config.window_sizes.strip())
  )


def _readable_hint(size: int, every: int) -> str:
  """The extra sizes a state window of W = `size`, E = `every` holds."""
  sizes = list(range(size - every, 0, -every))[::-1]
  if not sizes:
    return 'none with these flags'
  return ', '.join(map(str, sizes[:3])) + (', ...' if len(sizes) > 3 else '')


def _check_state_window_sizes(config: Any) -> None:
  """Extra sizes the state's window holds: W' < W, W - W' a multiple of E.

  The state keeps the last W models in ceil(W/E) segment sums; a window of
  W' is whole segments exactly then (docs/design.md sec. 1.11).
  """
  size, every = config.window_size, config.window_read_every
  for extra in parse_window_sizes(config):
    if extra > size or (size - extra) % every:
      raise ValueError(
          f'--window_sizes ({config.window_sizes}) with '
          f'--window_location=state must each be < --window_size ({size}) '
          f'with --window_size minus it a multiple of --window_read_every '
          f'({every}), i.e. {_readable_hint(size, every)}; got {extra}. Use '
          '--window_location=program for any sizes.'
      )


def check_window(config: Any, problems: Any) -> None:
  """The window flags fit the run (docs/design.md sec. 1).

  Args:
    config: An `ExperimentConfig` whose flags passed their own checks.
    problems: The `config.Problems` each misfit is added to.
  """
  if config.window_size > config.total_rounds:
    problems.add(
        f'--window_size ({config.window_size}) must be <= --total_rounds '
        f'({config.total_rounds}): the window model is active from round '
        'max(W, --window_start_round) on, so it would never be used.'
    )
  if config.window_start_round > config.total_rounds:
    problems.add(
        f'--window_start_round ({config.window_start_round}) must be <= '
        f'--total_rounds ({config.total_rounds}).'
    )
  if config.window_size == 0 and (
      config.window_mode != 'evaluate'
      or config.window_start_round
      or config.window_read_every != 1
      or config.window_location != 'auto'
      or config.window_sizes.strip()
      or config.window_part != 'all'
  ):
    problems.add(
        '--window_mode, --window_start_round, --window_read_every, '
        '--window_location, --window_sizes and --window_part need '
        '--window_size >= 1.'
    )
  if config.window_part != 'all' and config.window_mode == 'broadcast':
    problems.add(
        f'--window_part={config.window_part} needs --window_mode=evaluate: it '
        'evaluates the window on part of the model (WiMA Table 5), while '
        'under IMA the clients train from the whole window model.'
    )
  with problems.check():  # The state's sizes need the parsed list.
    parse_window_sizes(config)
    if config.window_location == 'state':
      _check_state_window_sizes(config)
  if config.window_read_every > 1 and (
      config.rounds_per_eval % config.window_read_every
      or config.total_rounds % config.window_read_every
  ):
    problems.add(
        f'--rounds_per_eval ({config.rounds_per_eval}) and --total_rounds '
        f'({config.total_rounds}) must be multiples of --window_read_every '
        f'({config.window_read_every}): the window model exists only at those '
        'rounds.'
    )
  if (
      config.algorithm in choices.CLIENT_STATE_FAMILY
      and config.window_read_every != 1
      and not kept_by_program(config)
  ):
    problems.add(
        '--window_read_every is not supported with --algorithm='
        f'{config.algorithm} and the window in the state (it keeps W slots); '
        'use --window_location=program.'
    )
  if config.window_mode == 'broadcast' and config.window_read_every != 1:
    problems.add('--window_read_every must be 1 with --window_mode=broadcast.')
