"""Tests of the tables file and runs CSV shared by all experiments."""

import csv

import pytest

from tff_fedwin.reporting import results_files

_FIELDS = ['experiment', 'row', 'seed']


def _section(name, body):
  return f'### {name}\n\n{body}\n'


def _read_csv(path):
  with open(path, newline='') as f:
    return list(csv.DictReader(f))


def test_merge_sections_replaces_its_experiments_and_keeps_the_others(
    tmp_path,
):
  path = str(tmp_path / 'tables.md')
  results_files.merge_sections(
      path,
      {'a': _section('a', 'old a'), 'b': _section('b', 'old b')},
      order=['a', 'b', 'c'],
  )
  results_files.merge_sections(
      path,
      {'c': _section('c', 'new c'), 'a': _section('a', 'new a')},
      order=['a', 'b', 'c'],
  )
  with open(path) as f:
    text = f.read()
  assert text == ('### a\n\nnew a\n\n### b\n\nold b\n\n### c\n\nnew c\n')
  assert results_files.read_sections(path) == {
      'a': '### a\n\nnew a\n\n',
      'b': '### b\n\nold b\n\n',
      'c': '### c\n\nnew c\n',
  }


def test_merge_sections_puts_unordered_experiments_last_in_file_order(
    tmp_path,
):
  path = str(tmp_path / 'tables.md')
  results_files.merge_sections(
      path, {'x': _section('x', '1'), 'y': _section('y', '2')}, order=[]
  )
  results_files.merge_sections(path, {'a': _section('a', '3')}, order=['a'])
  assert list(results_files.read_sections(path)) == ['a', 'x', 'y']


def test_merge_sections_refuses_a_section_without_its_heading(tmp_path):
  with pytest.raises(ValueError, match="section of 'a' must start"):
    results_files.merge_sections(
        str(tmp_path / 't.md'), {'a': _section('b', '')}, order=['a']
    )


def test_read_sections_of_a_missing_file_is_empty(tmp_path):
  assert not results_files.read_sections(str(tmp_path / 'none.md'))


def test_merge_run_records_replaces_the_experiments_lines(tmp_path):
  path = str(tmp_path / 'runs.csv')
  results_files.merge_run_records(
      path,
      [
          dict(experiment='a', row='r1', seed='0'),
          dict(experiment='b', row='r2', seed='0'),
          dict(experiment='a', row='r1', seed='1'),
      ],
      ['a', 'b'],
      _FIELDS,
  )
  # Re-running `a` with one seed drops both old `a` lines; `c` had none.
  results_files.merge_run_records(
      path, [dict(experiment='a', row='r3', seed='2')], ['a', 'c'], _FIELDS
  )
  assert _read_csv(path) == [
      dict(experiment='b', row='r2', seed='0'),
      dict(experiment='a', row='r3', seed='2'),
  ]


def test_merge_run_records_rewrites_old_columns_to_the_new_ones(tmp_path):
  path = tmp_path / 'runs.csv'
  path.write_text('experiment,row,dropped\nb,r2,x\n')
  results_files.merge_run_records(
      str(path), [dict(experiment='a', row='r', seed='0')], ['a'], _FIELDS
  )
  assert _read_csv(path) == [
      dict(experiment='b', row='r2', seed=''),
      dict(experiment='a', row='r', seed='0'),
  ]
