"""Small files that would grow without end are refused before they grow (issue 66): a YAML whose
aliases nest, a launch script whose variable doubles on every line, and a pipeline layout whose
repeats ask for billions of stages.  Each ends in exit status 2 with one line naming the flag,
and the sizes in the messages are counted here by hand."""

import pytest

from symbolic_cost.cli import main


def refused(capsys, *words) -> str:
    assert main(list(words)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_a_yaml_whose_aliases_nest_is_refused_by_its_expanded_size(tmp_path, capsys):
    # nine scalars, then eight levels of nine aliases to the level below
    lines = ["a0: &a0 [" + ", ".join(["x"] * 9) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    bomb = tmp_path / "accelerate.yaml"
    bomb.write_text("\n".join(lines) + "\n")
    sizes = [1 + 9]                          # a0: its sequence and nine scalars
    for _ in range(8):
        sizes.append(1 + 9 * sizes[-1])      # a_i: its sequence and nine copies of a_(i-1)
    expanded = 1 + 9 + sum(sizes)            # the mapping, its nine keys, its nine values
    for flag in ("--accelerate", "--nemo-recipe"):
        words = ["summary", "--preset", "gpt2", flag, str(bomb)] if flag == "--accelerate" else \
            ["summary", flag, str(bomb)]
        err = refused(capsys, *words)
        assert f"expands to {expanded:,} nodes through its aliases (at most 100,000)" in err and flag in err


def test_a_launch_script_doubling_a_variable_stops_at_the_line_that_passes_the_bound(tmp_path, capsys):
    script = tmp_path / "train.sh"
    script.write_text("A=xx\n" + "A=$A$A\n" * 34 + "torchrun pretrain_gpt.py --num-layers $A\n")
    err = refused(capsys, "summary", "--megatron-args", str(script))
    assert "a line expands past 1,000,000 characters" in err


def test_a_long_word_beside_a_launch_is_read_in_one_pass():
    """A word of 500,000 characters among others (a message, a command string) is looked through
    once for a program's name: a pattern that backtracked over it would take minutes."""
    from symbolic_cost.models.launch_script import read_launch
    long = "x" * 500_000
    text = f'log "{long} y && z"\nbash -c "{long} && python pretrain_gpt.py --num-layers 2"\n'
    assert read_launch(text, "s").program == ["--num-layers", "2"]


def test_a_launch_script_doubling_an_array_is_refused_too(tmp_path, capsys):
    script = tmp_path / "train.sh"
    script.write_text("A=(xx)\n" + 'A=(${A[@]} ${A[@]})\n' * 34 + "torchrun pretrain_gpt.py --num-layers 2\n")
    err = refused(capsys, "summary", "--megatron-args", str(script))
    assert "a line expands past 1,000,000 characters" in err


@pytest.mark.parametrize("layout, length", [("(t|)*1000000000", 2 * 10**9), ("(t*1000|)*10000", 10 * 10**6 + 10**4)])
def test_a_pipeline_layout_is_refused_by_the_length_it_would_expand_to(layout, length, capsys):
    err = refused(capsys, "summary", "--preset", "gpt2", "--set", "p=2", "--pipeline-layout", layout)
    assert f"expands to {length:,} characters (at most 1,000,000)" in err
