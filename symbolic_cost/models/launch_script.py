"""A launch script read without running it: the words of its training command line.

Training frameworks are started from shell scripts (Megatron-LM's ``examples/*/train_*.sh``):
variables, arrays of options, a ``torchrun ... pretrain_gpt.py ${ARGS[@]}`` line.  ``read_launch``
reads the part of shell those scripts use, statically (nothing is executed):

* ``NAME=value`` and ``export NAME=value``; ``${N:-default}`` and ``${NAME:-default}`` take the
  default when unset, ``${NAME:+word}`` the word when set (and not empty), nothing otherwise (the
  environment taken to leave it unset); ``$((A*B))`` is worked out exactly (``reader.read``); ``$(...)`` and the
  script's own arguments (``$1``) stay unknown, and all of them (``"$@"``) are none, the script
  read as run without them;
* arrays ``NAME=( ... )`` over several lines, ``NAME+=( ... )``; ``${NAME[@]}`` unquoted splits
  each element into words, as the shell does (of a string, it is the string); ``read`` sets its
  names to values the reader does not know;
* ``if``/``elif``/``else``/``fi`` whose tests compare known values (``==``, ``!=``, ``-z``,
  ``-n``, ``-v`` of a variable the script sets, ``-eq`` ..., joined by ``||`` and ``&&``), and
  ``case WORD in`` ... ``esac`` on a known word (its branches' patterns globbed as the shell
  does); ``if [ -z "$NAME" ]; then NAME=...`` of a variable the script never sets is read as
  ``NAME=${NAME:-...}`` is (noted; ``_default_idiom``); a block under a test that cannot be
  decided (a file test, an unknown value) may echo and exit, assign options that change no
  count (``inert``: logging around ``if [ -n "$WANDB_API_KEY" ]``, noted) and plain values, which
  become unknown (``_undecided_value``), but options of another kind, arrays or the launch inside
  it are refused;
* command groups ``{ ...; }``, on their own (they run) or after ``||``/``&&`` (as the test before
  them decides, or undecided: ``[ -e "$f" ] || { echo "missing $f"; exit 1; }``);
* ``eval ${run_cmd}``: a command kept in a variable runs as its words;
* a loop over the script's own arguments (``for A in "$@"``, ``while [[ $# -gt 0 ]]``, the option
  parsers of Megatron-LM's examples) is read as the script run without them: its body never runs,
  so the values the script sets stand (noted); a here-document (``cat <<EOF > config.json``) is
  data, not commands, unless a shell or ``sbatch`` runs it (``sbatch <<EOF``): then its lines are
  the script's, run in place;
* the launch: the one line naming the entry point (``pretrain_gpt.py``); the words before it are
  the launcher's (``torchrun --nproc_per_node 8 --nnodes 2``), those after it the program's.

A file without a launch line whose first word is an option is an arguments file: every word is
the program's; so are the words of the one variable that holds options in a script without a launch
line (``MODEL_ARGS``, Megatron-LM's model files for its post-training examples).  An unknown
value stays a marker (``UNKNOWN`` + its name) so that only an option that matters is refused for
it (``known``).
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from dataclasses import dataclass, field

from symbolic_cost.checks import InputError, file_text
from symbolic_cost.reader import read

UNKNOWN = "\x00"
"""Marks a value the script does not set (followed by the variable's name)."""

_VARIABLE = re.compile(r"\$\{(\w+)\[@\]\}|\$\{(\w+)(:?)\+([^}]*)\}|\$\{(\w+)(?::?-([^}]*))?\}|\$\(\((.*?)\)\)"
                       r"|\$\((.*?)\)|\$(\w+)")
_ASSIGN = re.compile(r"^(?:export\s+)?([A-Za-z_]\w*)(\+?)=(.*)$")
_ENV_PREFIX = re.compile(r"^((?:[A-Za-z_]\w*=[^\s'\"]*\s+)+)(\S.*)$")
"""Assignments before a command on its line (``CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun ...``): the
command's environment, not the script's variables."""
_OPENERS, _CLOSERS = {"for", "while", "until", "select"}, {"done", "esac"}
_ARGUMENT_FOR = re.compile(r'^for\s+\w+(?:\s+in\s+("\$[@*]"|\$[@*]))?\s*$')
"""``for A in "$@"`` (or ``$*``, or ``for A`` alone, which is the same loop)."""
_ARGUMENTS = re.compile(r'"\$[@*]"|"\$\{[@*](?::[1-9]\d*(?::\d+)?)?\}"|\$\{[@*](?::[1-9]\d*(?::\d+)?)?\}|\$[@*]')
"""The script's arguments all at once (``"$@"``, ``$*``), or a slice of them from the first on
(``${@:2}``; ``${@:0}`` holds the script's own name too): nothing, the script read as run without them."""
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
"""A here-document's start (``<<EOF``, ``<<-'EOF'``): the lines up to its delimiter are its data."""
_PATTERN = re.compile(r"^\(?\s*([^()]*?)\s*\)\s*(.*)$")
"""A ``case`` branch's patterns (``small|tiny)``, ``*)``) and what follows them on the line."""


@dataclass
class Launch:
    """What the script runs: the launcher's words, the entry point and the program's words, and
    ``notes`` on what the reader took without deciding (an inert assignment under an unknown test)."""

    launcher: list = field(default_factory=list)
    entry: str | None = None
    program: list = field(default_factory=list)
    notes: list = field(default_factory=list)


def known(text: str, option: str) -> str:
    """``text``, refused when it holds a value the script does not set."""
    if UNKNOWN in text:
        found = _UNKNOWN_NAME.match(text.split(UNKNOWN, 1)[1])
        name = found.group(0) if found and found.group(0) else "?"
        name = name if name.startswith("$") else f"${name}"
        raise InputError(f"{option} is {name}, whose value the script does not decide (an argument of the script, "
                         f"a command's output, or a value set under a test the reader cannot decide); write the "
                         f"value into the file", option)
    return text


_UNKNOWN_NAME = re.compile(r"\$\(\(.*?\)\)|\$\([^)]*\)|\w+")
"""What follows an unknown value's marker: the variable's name, or the command or arithmetic it
stands for (``$(date)``, ``$((A*B))``)."""

_QUOTED_ARRAY = re.compile(r'"\$\{(\w+)\[@\]\}"')
"""``"${NAME[@]}"``, quoted whole: a word for each element, none for an empty array."""

EXPANSION = 1_000_000
"""Most characters one line of a launch script may expand to (its values are a few kilobytes)."""


def split_words(text: str, comments: bool = False) -> list[str]:
    """``shlex.split(text, comments=comments)``, word for word and error for error (``shlex``'s message,
    as an ``InputError``, a ``ValueError``, where a quote or an escape is left open), in time linear in the text: ``shlex`` adds each
    character to its word as a new string, so a word of ``n`` characters took ``n**2 / 2`` copies (a
    launch script of one megabyte-long word ran 16 s, sixteen megabytes hours).  POSIX mode, words
    split at whitespace only, as ``shlex.split`` reads: single quotes keep everything, double quotes
    let a backslash escape ``"`` and ``\\`` (any other keeps its backslash), a backslash outside them
    escapes the next character, and with ``comments`` a ``#`` anywhere outside quotes ends the line.

    >>> split_words('a "b c" d # e', comments=True)
    ['a', 'b c', 'd']
    """
    words, word, i, n = [], [], 0, len(text)
    quoted = False           # the word so far held quotes: "" is a word of its own
    while i < n:
        char = text[i]
        if char in " \t\r\n":
            if word or quoted:
                words.append("".join(word))
            word, quoted = [], False
        elif comments and char == "#":
            end = text.find("\n", i)
            if word or quoted:
                words.append("".join(word))
            word, quoted = [], False
            i = n if end < 0 else end
        elif char == "\\":
            if i + 1 >= n:
                raise InputError("No escaped character", "text")
            word.append(text[i + 1])
            i += 1
        elif char == "'":
            end = text.find("'", i + 1)
            if end < 0:
                raise InputError("No closing quotation", "text")
            word.append(text[i + 1:end])
            quoted, i = True, end
        elif char == '"':
            i += 1
            quoted = True
            while True:
                if i >= n:
                    raise InputError("No closing quotation", "text")
                char = text[i]
                if char == '"':
                    break
                if char == "\\":
                    if i + 1 >= n:
                        raise InputError("No escaped character", "text")
                    escaped = text[i + 1]
                    word.append(escaped if escaped in '"\\' else "\\" + escaped)
                    i += 2
                    continue
                end = min((k for k in (text.find('"', i), text.find("\\", i)) if k >= 0), default=n)
                word.append(text[i:end])
                i = end
        else:
            word.append(char)
        i += 1
    if word or quoted:
        words.append("".join(word))
    return words


_INTEGER_TESTS = {"-eq": int.__eq__, "-ne": int.__ne__, "-lt": int.__lt__, "-le": int.__le__, "-gt": int.__gt__,
                  "-ge": int.__ge__}
"""The shell's integer comparisons of a test, as Python's."""


def _whole(word: str) -> bool:
    return word.lstrip("+-").isdigit()


class _Shell:
    def __init__(self, what: str):
        self.what, self.scalars, self.arrays, self.frames = what, {}, {}, []

    def value(self, name: str) -> str | None:
        if name in self.arrays:
            return " ".join(self.arrays[name][:1])
        return self.scalars.get(name)

    def expand(self, text: str, split_arrays: bool = True) -> str:
        """Variables put into ``text`` (arrays as their quoted elements, or words when unquoted),
        refused past ``EXPANSION`` characters: each value is counted before it is put in, so a
        variable doubled on every line (``A=$A$A``) stops at the line that passes it.  An unknown
        value is its marker and name, inside the word it stands in (``$DIR/logs``: one word, as the
        shell gives it; ``known`` finds the name)."""
        produced = [len(text)]
        # "${A[@]}" of an empty array is no word at all
        text = _QUOTED_ARRAY.sub(lambda m: "" if self.arrays.get(m.group(1)) == [] else m.group(0), text)

        def put(match):
            value = fill(match)
            produced[0] += len(value)
            if produced[0] > EXPANSION:
                raise InputError(f"{self.what}: a line expands past {EXPANSION:,} characters (a variable that "
                                 f"grows on every line?); a launch script's values are short", self.what)
            return value

        def fill(match):
            array, alternate, colon, word, name, default, arithmetic, command, plain = match.groups()
            if alternate is not None:       # ${NAME:+word}: the word where NAME is set (and not empty)
                value = self.value(alternate)
                return "" if value is None or (colon and value == "") else self.expand(word.strip('"').strip("'"))
            if array is not None and array not in self.arrays and array in self.scalars:
                name = array             # ${MODEL_ARGS[@]} of a string: the string, as bash gives it
            elif array is not None:
                elements = self.arrays.get(array, [])
                if match.start() > 0 and text[match.start() - 1] == '"':
                    # "${A[@]}": a word for each element, as bash gives them (the quotes close between)
                    return '" "'.join(e.replace("\\", "\\\\").replace('"', '\\"') for e in elements)
                return " ".join(elements) if split_arrays else " ".join(shlex.quote(e) for e in elements)
            if arithmetic is not None:
                return self.arithmetic(arithmetic)
            if command is not None:
                return f"{UNKNOWN}$({command.split()[0] if command.split() else ''})"
            name = name or plain
            value = self.value(name)
            if value is None or (value == "" and default is not None and ":-" in match.group(0)):
                if default is not None:
                    return self.expand(default.strip('"').strip("'"))
                return f"{UNKNOWN}{name}"
            return value
        return _VARIABLE.sub(put, _ARGUMENTS.sub("", text))

    def arithmetic(self, text: str) -> str:
        """``$(( ... ))`` worked out exactly; its variables as ``NAME``, ``$NAME`` or ``${NAME}``."""
        def named(match):
            name = match.group(1) or match.group(2)
            return self.value(name) or f"{UNKNOWN}{name}"
        expanded = re.sub(r"\$\{(\w+)\}|\$?\b([A-Za-z_]\w*)\b", named, text)
        if UNKNOWN in expanded:         # one word, as the shell gives it, named by what it computes
            return f"{UNKNOWN}$(({text.replace(' ', '')}))"
        try:
            value = read(expanded.strip(), argument=f"{self.what}: $(({text}))")
        except InputError:
            return f"{UNKNOWN}$(({text.replace(' ', '')}))"
        # the shell divides whole numbers, truncating: a fraction left is not worked out here
        return str(value) if getattr(value, "is_Integer", False) else f"{UNKNOWN}$(({text.replace(' ', '')}))"

    def active(self) -> bool | None:
        """True where statements run, False in a branch not taken, None under an undecided test."""
        states = [frame[0] for frame in self.frames]
        return False if False in states else None if None in states else True

    def unset_test(self, text: str) -> str | None:
        """The variable a test ``-z "$NAME"`` asks about, where it is the whole test and the script
        never sets ``NAME`` (the environment's, which the reader does not see); else None."""
        if re.search(r"\|\||&&", text):
            return None
        words = [w for w in _split(self.expand(re.sub(r"[\[\];]", " ", text)), self.what, comments=True)
                 if w != "then"]
        if len(words) != 2 or words[0] != "-z" or not words[1].startswith(UNKNOWN):
            return None
        name = words[1][len(UNKNOWN):].strip()
        return name if name.isidentifier() and name not in self.scalars and name not in self.arrays else None

    def test(self, text: str) -> bool | None:
        """A ``[[ ... ]]`` (or ``[ ... ]``) test of known values, or None: ``==``, ``!=``, ``-z``,
        ``-n``, ``-v`` of a variable the script sets, and the integer comparisons ``-eq``, ``-ne``,
        ``-lt``, ``-le``, ``-gt``, ``-ge``."""
        clauses = re.split(r"\|\||&&", text)
        joins = re.findall(r"\|\||&&", text)
        results = []
        for clause in clauses:
            words = _split(self.expand(clause.replace("[[", " ").replace("]]", " ").replace("[", " ")
                                       .replace("]", " ").replace(";", " ")), self.what, comments=True)
            words = [w for w in words if w != "then"]
            negate = bool(words) and words[0] == "!"
            words = words[1:] if negate else words
            if any(UNKNOWN in w for w in words):
                return None
            if len(words) == 3 and words[1] in ("==", "=", "!="):
                result = (words[0] == words[2]) == (words[1] != "!=")
            elif len(words) == 3 and words[1] in _INTEGER_TESTS and all(_whole(w) for w in words[::2]):
                result = _INTEGER_TESTS[words[1]](int(words[0]), int(words[2]))
            elif len(words) in (1, 2) and words[0] in ("-z", "-n"):
                result = (len(words) == 1 or words[1] == "") == (words[0] == "-z")
            elif len(words) == 2 and words[0] == "-v" and (words[1] in self.scalars or words[1] in self.arrays):
                result = True               # set by the script; one it leaves unset may be in the environment
            else:
                return None
            results.append(result != negate)
        value = results[0]
        for join, result in zip(joins, results[1:]):
            value = (value or result) if join == "||" else (value and result)
        return value


_SCRIPT_READERS = ("sbatch", "bash", "sh")
"""Commands that run a here-document as a script (``sbatch <<EOF`` submits it as a SLURM job)."""


def _runs_its_document(line: str, heredoc) -> bool:
    """Whether ``line`` feeds its here-document to a shell or to ``sbatch`` with its variables
    expanded (an unquoted delimiter): its lines are then the script's own, run in place."""
    before = line[:heredoc.start()].split()
    return not heredoc.group(1) and bool(before) and before[0].rsplit("/", 1)[-1] in _SCRIPT_READERS


def _statements(text: str):
    """(line number, logical line): continuation lines joined, a quoted string that spans lines
    (``GPT_ARGS="`` over several lines, Megatron-LM's examples until 2024) gathered up to its closing
    quote, arrays gathered up to their ``)``."""
    number, pending, start, quoted, document, script = 0, None, 0, None, None, None
    for number, line in _continued(text):
        stripped = line.strip()
        if document is not None:            # a here-document's data, up to its delimiter
            document = None if stripped == document else document
            continue
        if script is not None and stripped == script:
            script = None                   # the end of a script given to sbatch or a shell
            continue
        heredoc = _HEREDOC.search(_uncommented(stripped)) if "<<" in stripped and pending is None \
            and quoted is None else None
        if heredoc is not None and _runs_its_document(stripped, heredoc):
            script = heredoc.group(2)
        elif heredoc is not None:
            document = heredoc.group(2)
        if quoted is not None:              # inside a quote: the newline is a space between words
            quoted = (quoted[0], f"{quoted[1]} {stripped}")
            if open_quote(quoted[1]) is None:
                yield quoted
                quoted = None
            continue
        if pending is None and open_quote(stripped) is not None:
            quoted = (number, stripped)
            continue
        if pending is not None:
            pending += " " + _uncommented(stripped)
            if pending.rstrip().endswith(")"):
                yield start, pending
                pending = None
            continue
        match = _ASSIGN.match(stripped)
        if match and match.group(3).startswith("(") and not _uncommented(stripped).rstrip().endswith(")"):
            pending, start = _uncommented(stripped), number
            continue
        yield number, stripped
    if pending is not None:
        raise InputError(f"line {start}: the array is not closed with ')'", f"line {start}")
    if quoted is not None:
        raise InputError(f"line {quoted[0]}: the quote opened there is not closed", f"line {quoted[0]}")


def _continued(text: str) -> list[tuple[int, str]]:
    r"""``text``'s lines, each with the number of its first line in the file, its continuation
    lines joined (a ``\`` before the newline), except where the ``\`` ends a comment line
    (``#--data-path $DATA_PATH \``, as Megatron-LM's examples comment an option out): bash
    continues no comment, so the next line stays a line of its own.

    >>> _continued("A=1 \\\n  B=2\n#C \\\nD=4")
    [(1, 'A=1    B=2'), (3, '#C '), (4, 'D=4')]
    """
    joined, start = [], None
    for number, line in enumerate(text.replace("\r\n", "\n").split("\n"), 1):
        if line.lstrip().startswith("#") and line.endswith("\\"):
            line = line[:-1]
        if start is None:
            start, parts = number, []
        if line.endswith("\\"):
            parts.append(line[:-1] + " ")
            continue
        joined.append((start, "".join(parts) + line))
        start = None
    if start is not None:
        joined.append((start, "".join(parts)))
    return joined


def open_quote(line: str) -> str | None:
    r"""The quote a line leaves open (``"`` or ``'``), or ``None``: a ``\`` escapes the next
    character outside single quotes, and a ``#`` that starts a word outside quotes ends the line.

    >>> open_quote('A="'), open_quote('A="x" # it is'), open_quote("B='a\\'"), open_quote('C="a\\"')
    ('"', None, None, '"')
    """
    quote, escaped = None, False
    for i, char in enumerate(line):
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            break
    return quote


def _uncommented(line: str) -> str:
    """A line without its comment (a ``#`` that starts a word outside quotes)."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line


ENTRIES = ("pretrain_gpt.py", "pretrain_gpt_core.py", "pretrain_gpt2.py", "pretrain_bert.py", "pretrain_t5.py",
           "pretrain_t5_core.py")
"""Megatron-LM's GPT programs (today's, Megatron-Core's of 2023 and GPT-2's of 2019-2020), its BERT
and its T5."""


def read_launch(text: str, what: str, entries=ENTRIES, inert=None) -> Launch:
    """The launch of a script (or an arguments file) whose program is one of ``entries``.  ``inert``
    (words -> bool) says which assigned words change no count: such an assignment under a test the
    reader cannot decide (``if [ -n "$WANDB_API_KEY" ]`` around logging options) is taken, with a
    note, since either way the cost is the same."""
    shell, launches, notes = _Shell(what), [], []
    todo = list(_statements(file_text(text, "--megatron-args", what)))
    while todo:
        number, line = todo.pop(0)
        line = _uncommented(line)
        if _case_pattern(shell, line, number, todo):
            continue
        parts = _commands(line)
        if len(parts) > 1:                        # "A=1; B=2", "if [ ... ]; then": one command at a time
            todo[:0] = [(number, part) for part in parts]
            continue
        head = line.replace(";", " ").split()[0] if line.replace(";", " ").split() else ""
        if head == "case":
            _case(shell, line)
            continue
        ends_branch = line.endswith(";;")
        if ends_branch:
            line = line[:-2].rstrip()
            if shell.frames and len(shell.frames[-1]) == 4:
                shell.frames[-1][3] = True          # the next line is the next branch's patterns
        if head in ("if", "elif", "else"):
            _branch(shell, head, line)
            continue
        if _group(shell, line, number, todo):
            continue
        if head in ("fi", "}") or head in _CLOSERS:
            if shell.frames:
                shell.frames.pop()
            continue
        if head in _OPENERS or line.endswith("{"):
            over_arguments = shell.active() is not False and _over_arguments(shell, head, line)
            if over_arguments:
                notes.append(f"line {number}: the loop over the script's arguments is read as the script run "
                             f"without them: its body does not run, the values the script sets stand")
            shell.frames.append([False if over_arguments else None, None])
            continue
        if not head or head == "then" or shell.active() is False:
            continue
        if _read_into(shell, line):
            continue
        prefixed = _ENV_PREFIX.match(line)
        if prefixed and any(w.endswith(".py") for w in prefixed.group(2).split()):
            line = prefixed.group(2)        # NAME=value cmd: bash runs cmd with NAME set for it alone
        assignment = _ASSIGN.match(line)
        words = None if assignment else _inline_shell(_words(shell, line))
        launch = bool(words) and words[0] not in ("echo", "printf") and any(
            w.endswith(".py") and not any(c.isspace() for c in w)
            and (w.rsplit("/", 1)[-1] in entries or w.rsplit("/", 1)[-1].startswith("pretrain")) for w in words)
        if not (assignment or launch):
            continue
        where = f"{what}: line {number}"
        default = shell.active() is None and assignment is not None and _default_idiom(shell, assignment.group(1))
        if default:
            notes.append(f"line {number}: {assignment.group(1)} is given the value the script sets where it finds it "
                         f"unset ([ -z \"${assignment.group(1)}\" ]), as ${{{assignment.group(1)}:-default}} would be: "
                         f"set in the environment, it would keep that value")
        elif shell.active() is None and assignment and _undecided_value(shell, assignment):
            continue
        if shell.active() is None and not default and not (assignment and _inert(shell, assignment, inert)):
            raise InputError(f"{where}: {'the launch' if launch else 'an assignment'} sits under a test the reader "
                             f"cannot decide (a file test or an unknown value); write the launch plainly", what)
        if shell.active() is None and not default:
            notes.append(f"line {number}: {assignment.group(1)} is set under a test the reader cannot decide; its "
                         f"options change no count, so the cost is the same either way")
        if launch:
            launches.append((where, words))
            continue
        name, add, value = assignment.groups()
        if value.startswith("("):
            elements = _split(shell.expand(value[1:-1].strip(), split_arrays=False), what)
            held = shell.scalars.pop(name, None)      # NAME+=( ... ) on a string: its element 0, as bash keeps it
            before = shell.arrays.get(name, [] if held is None else [held])
            shell.arrays[name] = (before if add else []) + elements
        else:
            _assign(shell, name, " ".join(_words(shell, value) or [""]), add)
    if len(launches) > 1:
        raise InputError(f"{what}: more than one launch ({launches[0][0]}, {launches[1][0]}); keep one", what)
    if not launches:
        words = _words(shell, " ".join(_uncommented(line) for _, line in _statements(text))) or []
        if words and words[0].startswith("--"):
            return Launch(program=words)
        held = _held_options(shell, what)
        if held is not None:
            return Launch(program=held[1], notes=notes + [f"no launch line: the options {held[0]} holds read as the "
                                                          f"program's (a model's arguments)"])
        raise InputError(f"{what}: no line runs {' or '.join(entries)}, and it is not an arguments file (its "
                         f"first word is not an option)", what)
    where, words = launches[0]
    at = next(i for i, w in enumerate(words) if w.endswith(".py") and not any(c.isspace() for c in w))
    entry = known(words[at].rsplit("/", 1)[-1], "the script it runs")   # its folder may be the caller's; not its name
    if entry not in entries:
        raise InputError(f"{where}: runs {entry}; read are {', '.join(entries)}", what)
    launcher = words[:at][1:] if words[:at][:1] == ["eval"] else words[:at]   # eval ${run_cmd}: the command's words
    allocation = _allocation(text) if launcher[:1] == ["srun"] else []
    if allocation:              # srun's own counts, after them, still win
        launcher = ["srun", *allocation, *launcher[1:]]
        notes.append(f"srun starts the tasks of the job's #SBATCH allocation ({' '.join(allocation)}) unless it "
                     f"gives its own")
    return Launch(launcher=launcher, entry=entry, program=_command(words[at + 1:]), notes=notes)


_SBATCH_COUNT = re.compile(r"(?<!\S)(--nodes|--ntasks-per-node|--ntasks|-N|-n)(?:=|\s+)(\d+)(?!\S)")
"""A count of an ``#SBATCH`` directive: nodes, tasks, tasks a node (``--nodes=128``, ``-N 4``)."""


def _allocation(text: str) -> list:
    r"""The counts of the job's ``#SBATCH`` directives as ``srun`` words (``["--nodes=128",
    "--ntasks-per-node=8"]``): the allocation an ``srun`` without counts of its own runs on.

    >>> _allocation("#!/bin/bash\n#SBATCH <SLURM OPTIONS> --nodes=128 --exclusive --ntasks-per-node=8\nsrun x")
    ['--nodes=128', '--ntasks-per-node=8']
    >>> _allocation("#SBATCH -N 4 --job-name=n-1\n# SBATCH --ntasks=9\n")
    ['-N=4']
    """
    return [f"{name}={count}" for line in text.splitlines() if line.startswith("#SBATCH")
            for name, count in _SBATCH_COUNT.findall(line)]


_CONTROL = re.compile(r"\|&?|\|\||&&?|;|\d*>>?(&\d*)?\S*|&>>?\S*")
"""A pipe, a list operator or an output redirection (``| tee log``, ``2>&1``, ``>$LOG``, ``&>>log``):
where the program's words end.  (An input redirection is left alone: ``<Specify path>`` is how
published examples write a placeholder.)"""


_PROGRAM = re.compile(r"\.py(?=\s|$)")
"""Where a program's name ends in a command string (a pattern that never backtracks: a long word
costs its length)."""


def _inline_shell(words: list | None) -> list | None:
    """``words`` with a command given as one string opened (``srun ... bash -c "$SETUP && python
    pretrain_gpt.py ..."``, ``docker exec ... sh -c "..."``): the word holding a ``.py`` program
    among other words, after ``-c`` or ``eval`` or after a ``&&`` or ``;`` of its own (not a message that
    names the program), is split into the words of its last command, in its place; so is the one
    string of ``eval "$cmd"``, which ``eval`` reads as words again.

    >>> _inline_shell(["eval", "torchrun --nproc_per_node 8 pretrain_gpt.py --bf16"])
    ['eval', 'torchrun', '--nproc_per_node', '8', 'pretrain_gpt.py', '--bf16']
    >>> _inline_shell(["srun", "-n", "8", "bash", "-c", "cd /w && python pretrain_gpt.py --bf16", "|", "tee", "x"])
    ['srun', '-n', '8', 'bash', '-c', 'python', 'pretrain_gpt.py', '--bf16', '|', 'tee', 'x']
    """
    if not words or any(w.endswith(".py") and not any(c.isspace() for c in w) for w in words):
        return words
    for i, word in enumerate(words):
        program = _PROGRAM.search(word) if any(c.isspace() for c in word) else None
        if program is not None:
            start = max(word.rfind("&&", 0, program.start()), word.rfind(";", 0, program.start()))
            if start < 0 and words[i - 1:i] not in (["-c"], ["eval"]):
                continue
            text = word[start + 1:].lstrip("&") if start >= 0 else word
            try:
                inner = split_words(text)
            except ValueError:
                inner = text.split()
            return words[:i] + inner + words[i + 1:]
    return words


def _command(words: list) -> list:
    """The program's words up to the first pipe, list operator or output redirection
    (``eval "$run_cmd |& tee $LOG"`` runs the program's output into ``tee``).

    >>> _command(["--optimizer", "adam", "|&", "tee", "log"]), _command(["--bf16", "2>&1", ">", "x"])
    (['--optimizer', 'adam'], ['--bf16'])
    """
    end = next((i for i, w in enumerate(words) if _CONTROL.fullmatch(w)), len(words))
    return words[:end]


def _over_arguments(shell: _Shell, head: str, line: str) -> bool:
    """Whether a loop runs only over the script's own arguments, so that, given none, its body never
    runs: ``for A in "$@"`` (``$*``, or ``for A`` alone), or a ``while`` whose test of ``$#`` is false
    at 0 (``while [[ $# -gt 0 ]]``, ``while (( $# ))``).

    >>> shell = _Shell("x")
    >>> _over_arguments(shell, "for", 'for ARGUMENT in "$@"'), _over_arguments(shell, "while", "while [[ $# -gt 0 ]]")
    (True, True)
    >>> _over_arguments(shell, "for", "for F in a b"), _over_arguments(shell, "while", "while [[ $# -ge 0 ]]")
    (False, False)
    """
    if head == "for":
        return bool(_ARGUMENT_FOR.match(line.strip()))
    test = line.strip()[len("while"):].strip()
    if head != "while" or "$#" not in test:
        return False
    test = test.replace('"$#"', "0").replace("$#", "0")
    if re.fullmatch(r"\(\(\s*0\s*(?:(?:>|!=)\s*0\s*)?\)\)", test):
        return True
    return test.startswith("[") and shell.test(test) is False


def _commands(line: str) -> list[str]:
    """The commands of a line split at its ``;`` outside quotes and ``$(( ))``, and after a ``then``,
    ``else`` or ``do`` that starts one; a ``;;`` (the end of a ``case`` branch) stays on the command it
    ends."""
    parts, start, quote, depth, i = [], 0, None, 0, 0
    while i < len(line):
        char = line[i]
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth = max(0, depth - 1)
        elif char == ";" and depth == 0:
            cut = i + 2 if line[i + 1:i + 2] == ";" else i          # ";;" stays on the branch it ends
            parts.append(line[start:cut].strip())
            i = start = max(cut, i + 1)
            continue
        i += 1
    parts.append(line[start:].strip())
    split = []                              # "then PP=1", "else PP=2": the keyword, then its command
    for part in parts:
        keyword, _, rest = part.partition(" ")
        split += [keyword, rest.strip()] if keyword in ("then", "else", "do") and rest.strip() else [part]
    return [part for part in split if part]


_MODEL_WORDS = frozenset(("--num-layers", "--hidden-size", "--encoder-num-layers"))
"""Options that only a model's arguments hold."""


def _held_options(shell: _Shell, what: str) -> tuple[str, list] | None:
    """``(name, words)`` of the one variable of a script without a launch whose value is a model's
    options (``MODEL_ARGS="--num-layers 27 ..."``, as Megatron-LM's ``post_training/modelopt/conf``
    files give a model), or None; two such variables are refused, naming them.  A launcher's
    options (``DISTRIBUTED_ARGS="--nproc_per_node 8 ..."`` of a script that runs another program)
    are not a model's."""
    held = {}
    for name, value in shell.scalars.items():
        words = _words(shell, value) if UNKNOWN not in value else None
        if words and words[0].startswith("--") and any(w.split("=")[0] in _MODEL_WORDS for w in words):
            held[name] = words
    if len(held) > 1:
        raise InputError(f"{what}: no launch line, and {' and '.join(held)} both hold options; give the program's "
                         f"arguments in one file", what)
    return next(iter(held.items()), None)


_READ = re.compile(r"^(?:[A-Za-z_]\w*=\S*\s+)*read\s+(.*)$")
"""``read`` (after any ``IFS=,`` of its own): the names it sets, then where it reads from."""


def _read_into(shell: _Shell, line: str) -> bool:
    """A ``read`` (``IFS=',' read -r TP PP <<< "$CONFIG"``) sets its names to what it reads, which
    the reader does not follow: each becomes unknown, so an option that needs one is refused."""
    match = _READ.match(line)
    if match is None:
        return False
    words = match.group(1).split("<", 1)[0].split()
    taking = {"-a", "-d", "-i", "-n", "-N", "-p", "-t", "-u"}      # options that take the next word
    names = [w for i, w in enumerate(words)
             if re.fullmatch(r"[A-Za-z_]\w*", w) and (i == 0 or words[i - 1] not in taking)]
    for name in names + [w for i, w in enumerate(words) if i and words[i - 1] == "-a"]:
        shell.arrays.pop(name, None)
        shell.scalars[name] = f"{UNKNOWN}{name}"
    return True


def _default_idiom(shell: _Shell, name: str) -> bool:
    """Whether ``NAME=...`` sits in ``if [ -z "$NAME" ]; then`` (the innermost frame, every other
    one running) of a variable the script never sets before: the shell's spelling of
    ``NAME=${NAME:-...}``, read as that is, the environment taken to leave ``NAME`` unset."""
    inner, outer = shell.frames[-1] if shell.frames else None, shell.frames[:-1]
    return (inner is not None and len(inner) == 3 and inner[0] is None and inner[2] == name
            and all(frame[0] is True for frame in outer))


def _undecided_value(shell: _Shell, assignment) -> bool:
    """A variable set to a plain value (no option, not an array) under a test the reader cannot
    decide (``if ! [ -d "$TOKENIZER" ]; then export HF_TOKEN=...``, ``ROOT=$(realpath ..)``,
    ``PATTERN+="$A$B"``) has a value the reader does not know: it becomes unknown, and only an
    option that needs it is refused (``known``).  Option words or an array keep the refusal: which
    options run would be unknown.  A command's or arithmetic's text (``$(grep -v ..)``) is not the
    value's words, so its dashes are not options."""
    name, add, value = assignment.groups()
    if value.startswith("(") or any(w.startswith("-") for w in _substituted(value).replace('"', " ").split()):
        return False
    shell.scalars[name] = f"{UNKNOWN}{name}"
    return True


def _substituted(value: str) -> str:
    """``value`` with each ``$( .. )`` and ``$(( .. ))`` (nested ones too) cut to ``$``."""
    out, depth = [], 0
    for i, char in enumerate(value):
        if char == "(" and (value[i - 1:i] == "$" or depth):
            depth += 1
        elif char == ")" and depth:
            depth -= 1
        elif not depth:
            out.append(char)
    return "".join(out)


def _inert(shell: _Shell, assignment, inert) -> bool:
    """Whether an assignment's value is words that change no count (``inert``; of
    ``X="$X --profile"``, the words it adds).  An unknown word
    may stand only as an option's value (``--load "$LOAD_PATH"``): where it stood for an option,
    which options run would be unknown."""
    if inert is None:
        return False
    name, value = assignment.group(1), assignment.group(3)
    value = re.sub(rf'^(")?\$(?:{name}\b|\{{{name}\}})', r"\1", value)   # X="$X --profile": what it adds
    words = (_split(shell.expand(value[1:-1].strip(), split_arrays=False), shell.what) if value.startswith("(")
             else " ".join(_words(shell, value) or ()).split())        # a scalar's one word, as it splits
    return bool(words) and not any(
        UNKNOWN in w and (i == 0 or not words[i - 1].startswith("-") or w.startswith("-"))
        for i, w in enumerate(words)) and inert(words)


def _case(shell: _Shell, line: str) -> None:
    """``case WORD in``: a frame ``[runs, a branch ran, the word (None: unknown), expecting patterns]``."""
    match = re.match(r"^case\s+(.*?)\s+in\s*$", line)
    if match is None:
        raise InputError(f"{shell.what}: {line!r}: a case the reader does not read (write 'case WORD in' on a line "
                         f"of its own)", shell.what)
    words = _words(shell, match.group(1))
    subject = words[0] if words and len(words) == 1 and UNKNOWN not in words[0] else None
    shell.frames.append([False, False, subject, True])


def _case_pattern(shell: _Shell, line: str, number: int, todo: list) -> bool:
    """A ``case`` branch's patterns, where the frame expects them: the branch runs when a pattern
    matches the word (shell globbing) and no earlier branch ran; unknown when the word is.  What
    follows the ``)`` on the line is read next."""
    if not shell.frames or len(shell.frames[-1]) != 4 or not shell.frames[-1][3] or line.strip() == "esac":
        return False
    match = _PATTERN.match(line.strip())
    if match is None:
        return False
    frame = shell.frames[-1]
    subject, ran = frame[2], frame[1]
    if subject is None:
        runs = None
    else:
        runs = not ran and any(fnmatch.fnmatchcase(subject, p.strip()) for p in match.group(1).split("|"))
    frame[0], frame[1], frame[3] = runs, (ran or runs) if runs is not None else ran, False
    rest = match.group(2).strip()
    if rest:
        todo.insert(0, (number, rest))
    return True


def _split(text: str, what: str, comments: bool = False) -> list:
    """The shell's words of ``text``; a quote left open is refused, naming the text."""
    try:
        return split_words(text, comments=comments)
    except ValueError:
        raise InputError(f"{what}: a quote in {text.strip()[:60]!r} is not closed", what) from None


def _assign(shell: _Shell, name: str, value: str, add: str) -> None:
    """``NAME=value`` or ``NAME+=value`` (``add``) of a string, as bash assigns it: ``+=`` appends to the
    string there (``OPTS+=" --bf16"``: the options before kept); on an array it sets (or extends) its
    element 0 and keeps the others (``ARGS="${ARGS[@]} --mock-data"``: ``$ARGS`` is then that string,
    ``"${ARGS[@]}"`` it and the old elements after it)."""
    if name in shell.arrays:
        elements = shell.arrays[name]
        first = (elements[0] if elements else "") + value if add else value
        shell.arrays[name] = [first, *elements[1:]]
    else:
        shell.scalars[name] = shell.scalars.get(name, "") + value if add else value


def _words(shell: _Shell, text: str) -> list | None:
    """The words of ``text`` with its variables put in (None where the shell's quoting is beyond shlex)."""
    expanded = shell.expand(text)           # an expansion past its bound is refused, not taken for quoting
    try:
        return split_words(expanded)
    except ValueError:
        return None


_GROUP = re.compile(r"^(?:(?P<test>.*?)\s*(?P<join>\|\||&&)\s*)?\{(?:\s+(?P<rest>.*))?$")
"""A command group opened on this line: ``{ ...``, or ``TEST || { ...`` / ``TEST && { ...`` (its
``}`` closes it on a later command)."""


def _group(shell: _Shell, line: str, number: int, todo: list) -> bool:
    """Open a command group ``{ ... }`` as a frame, as ``if`` opens one: a group on its own always
    runs; after ``||`` it runs where the test before it fails, after ``&&`` where it holds
    (``[ -e "$f" ] || { echo "missing $f"; exit 1; }``: undecided, a file test).  The command
    after the ``{`` is read next."""
    group = _GROUP.match(line)
    if group is None:
        return False
    decided = shell.test(group["test"]) if group["join"] else True
    runs = decided if group["join"] in (None, "&&") or decided is None else not decided
    shell.frames.append([runs, runs])
    if group["rest"]:
        todo.insert(0, (number, group["rest"]))
    return True


def _branch(shell: _Shell, head: str, line: str) -> None:
    """``if``/``elif``/``else``: each frame is [this branch runs, an earlier branch ran] (None:
    undecided), and for ``if [ -z "$NAME" ]`` of a variable the script never sets, ``NAME``
    (``_default_idiom``)."""
    condition = line.split(None, 1)[1] if len(line.split(None, 1)) > 1 else ""
    condition = re.sub(r";?\s*then\s*$", "", condition)
    decided = shell.test(condition) if head != "else" else True
    if head == "if":
        unset = shell.unset_test(condition) if decided is None else None
        shell.frames.append([decided, decided] + ([unset] if unset else []))
        return
    if not shell.frames:
        raise InputError(f"{shell.what}: {head} without if", shell.what)
    ran = shell.frames[-1][1]
    runs = False if ran is True or decided is False else None if None in (ran, decided) else True
    ran = True if True in (ran, decided) else None if None in (ran, decided) else False
    shell.frames[-1] = [runs, ran]
