"""The checking engines behind `check`, `explore` and `matrix`: the explorer run on the
reference semantics (`check`), on anyone's model (`explore_check`), and on every mutant
(`matrix`), each judged property by property. Text rendering lives in `cli/`."""
