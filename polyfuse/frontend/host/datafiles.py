"""Input files the host reads with ``fscanf``, read as the program reads them.

A host run with its own command line (``--args``) opens its input files relative to the
directory it runs in; when such a file is there, the counts and sizes it holds are known, as
the command line's are, and the model is the program on that input.  :func:`scan` is C's
``fscanf`` on the file's text from a position: the values converted, the position after them,
or None where the text does not match (then the values are unknown, as for a file that is not
there)."""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Optional, Union

#: a conversion of a scanf format: ``%[*][width][length]kind``
_CONVERSION = re.compile(r"%(\*?)(\d*)(hh|h|ll|l|L|j|z|t)?([diuoxXfeEgGaAscn%])")
_INT = {"d": r"[-+]?\d+", "i": r"[-+]?(?:0[xX][0-9a-fA-F]+|0[0-7]*|[1-9]\d*)",
        "u": r"[-+]?\d+", "o": r"[-+]?[0-7]+", "x": r"[-+]?(?:0[xX])?[0-9a-fA-F]+",
        "X": r"[-+]?(?:0[xX])?[0-9a-fA-F]+"}
_FLOAT = r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|inf(?:inity)?|nan)"

Scanned = Union[int, float, str]


def text_of(path: str) -> Optional[str]:
    """A data file's text (None when it cannot be read as text), read again when the file
    changed (a notebook edits the input deck and analyses the host once more)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return _text_of(path, st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=16)
def _text_of(path: str, mtime_ns: int, size: int) -> Optional[str]:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def scan(text: str, pos: int, fmt: str) -> Optional[tuple[list[Scanned], int]]:
    """``fscanf(f, fmt, ...)`` from ``pos``: the values of the assigned conversions and the
    position after them; None when the input does not match before the format ends."""
    values: list[Scanned] = []
    i = 0
    while i < len(fmt):
        c = fmt[i]
        if c.isspace():
            while pos < len(text) and text[pos].isspace():
                pos += 1
            i += 1
            continue
        m = _CONVERSION.match(fmt, i)
        if c != "%" or m is None:
            if pos >= len(text) or text[pos] != c:
                return None
            pos += 1
            i += 1
            continue
        i = m.end()
        skip, width, kind = m.group(1), m.group(2), m.group(4)
        if kind == "%":
            if pos >= len(text) or text[pos] != "%":
                return None
            pos += 1
            continue
        if kind == "n":
            return None
        if kind != "c":
            while pos < len(text) and text[pos].isspace():
                pos += 1
        end = len(text) if not width else pos + int(width)
        field = text[pos:end]
        if kind == "c":
            got = field[:int(width or 1)]
            if len(got) < int(width or 1):
                return None
            value: Scanned = ord(got) if len(got) == 1 else got
        elif kind == "s":
            got = re.match(r"\S+", field)
            if got is None:
                return None
            got, value = got.group(), got.group()
        else:
            pattern = _INT.get(kind, _FLOAT)
            got = re.match(pattern, field, re.IGNORECASE)
            if got is None:
                return None
            got = got.group()
            value = int(got, {"o": 8, "x": 16, "X": 16, "i": 0}.get(kind, 10)) \
                if kind in _INT else float(got)
        pos += len(got)
        if not skip:
            values.append(value)
    return values, pos
