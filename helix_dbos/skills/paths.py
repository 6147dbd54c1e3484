"""The lexical guard on skill resource paths, and line ranges (pure: no file system).

``read_skill_file`` takes a path from the model, which may be wrong or adversarial. Every provider
gets this check before it is asked for a file: a path must be relative, use ``/`` separators and
stay below the skill's folder without ``..``. The filesystem provider then also resolves symlinks
and refuses a target outside the folder (a lexical check cannot see those).
"""

from __future__ import annotations

from pathlib import PurePosixPath, PureWindowsPath

MAX_RESOURCE_PATH_LENGTH = 1024


def resource_path_problem(path: object) -> str | None:
    """Why ``path`` may not name a skill resource, or ``None`` when it may."""
    if not isinstance(path, str) or not path.strip():
        return "the path must be a non-empty string"
    if len(path) > MAX_RESOURCE_PATH_LENGTH:
        return f"the path is longer than {MAX_RESOURCE_PATH_LENGTH} characters"
    if "\x00" in path:
        return "the path contains a NUL character"
    if "\\" in path:
        return "use '/' as the path separator"
    if path.startswith("/") or PureWindowsPath(path).drive or PurePosixPath(path).is_absolute():
        return "absolute paths are refused: give a path relative to the skill's folder"
    parts = PurePosixPath(path).parts
    if ".." in parts:
        return "'..' is refused: the path must stay inside the skill's folder"
    if not parts or all(part == "." for part in parts):
        return "the path names the skill's folder itself, not a file"
    return None


def normalize_resource_path(path: str) -> str:
    """The canonical form of an accepted path (``./references//a.md`` -> ``references/a.md``)."""
    return PurePosixPath(*[p for p in PurePosixPath(path).parts if p != "."]).as_posix()


def slice_lines(text: str, start_line: int | None = None, end_line: int | None = None) -> str:
    """Lines ``start_line..end_line`` of ``text`` (1-indexed, inclusive; either end open).

    A range past the end returns what exists (possibly nothing); ``end_line < start_line`` is a
    mistake the caller reports, so it raises ``ValueError``.
    """
    if start_line is None and end_line is None:
        return text
    if (start_line is not None and start_line < 1) or (end_line is not None and end_line < 1):
        raise ValueError("line numbers start at 1")
    if start_line is not None and end_line is not None and end_line < start_line:
        raise ValueError(f"endLine {end_line} is before startLine {start_line}")
    lines = text.splitlines(keepends=True)
    first = (start_line or 1) - 1
    last = end_line if end_line is not None else len(lines)
    return "".join(lines[first:last])


__all__ = ["MAX_RESOURCE_PATH_LENGTH", "normalize_resource_path", "resource_path_problem", "slice_lines"]
