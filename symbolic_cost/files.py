"""Files the library reads and writes, checked before use: a regular file of bounded size to
read (``input_file``), a new file or a writable folder to write (``output_file``,
``output_folder``); each refusal is an ``InputError`` naming the argument."""

from __future__ import annotations

import os
from pathlib import Path

from symbolic_cost.checks import InputError, shown


def _path(path, name: str) -> Path:   # '' is no name (pathlib would read it as the current folder)
    if not isinstance(path, (str, Path)) or not str(path).strip():
        raise InputError(f"{name} needs a file or folder name, got {shown(path)}", name)
    return Path(path)


def input_file(path, name: str, limit: int = 2**24) -> str:
    """The text of a regular file (not a folder, a FIFO or a device) of at most ``limit`` bytes."""
    path = _path(path, name)
    try:
        wrong = "does not exist" if not path.exists() else "is a folder" if path.is_dir() else "is not a regular " \
            "file" if not path.is_file() else f"has more than {limit:,} bytes" if path.stat().st_size > limit else ""
        if wrong:
            raise InputError(f"{name} {str(path)!r} {wrong}", name)
        with path.open("rb") as file:
            return file.read(limit).decode()
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{name}: cannot read {str(path)!r} ({type(error).__name__})", name) from None


def output_file(path, name: str, overwrite: bool = False, suffixes=None) -> Path:
    """A file to write: in a folder that exists and may be written, not a folder, ending in one of
    ``suffixes``, and new unless ``overwrite``; never a symbolic link (one whose target is missing
    counted as no file, and the write went to wherever it points)."""
    path = _path(path, name)
    if path.is_symlink():
        raise InputError(f"{name} {str(path)!r} is a symbolic link: writing would go where it points; give the "
                         f"file itself", name)
    if suffixes and path.suffix not in suffixes:
        raise InputError(f"{name} must end in {' or '.join(suffixes)}, got {path.name!r}", name)
    if path.is_dir():
        raise InputError(f"{name} {str(path)!r} is a folder; give a file name", name)
    if not path.parent.is_dir() or not os.access(path.parent, os.W_OK):
        raise InputError(f"{name}: no folder {str(path.parent)!r} to write {path.name!r} into that may be written", name)
    if path.exists() and not overwrite:
        raise InputError(f"{name} {str(path)!r} exists; remove it or ask to overwrite it", name)
    return path


def report_file(path) -> Path:
    """A report's file (``symbolic-cost report`` and ``reproduce`` write theirs over the last
    ones), never a symbolic link: the write would go where it points, outside the folder asked for.

    >>> report_file("reports/validation.md").name
    'validation.md'
    """
    path = Path(path)
    if path.is_symlink():
        raise InputError(f"{str(path)!r} is a symbolic link: writing the report would go where it points; remove it",
                         "reports")
    return path


def output_folder(path, name: str) -> Path:
    """A folder to write into: an existing folder, or a new one inside an existing folder."""
    path = _path(path, name)
    if path.exists() and not path.is_dir():
        raise InputError(f"{name} {str(path)!r} is a file, not a folder", name)
    if not path.exists() and not path.parent.is_dir():
        raise InputError(f"{name}: no folder {str(path.parent)!r} to create {path.name!r} in", name)
    return path
