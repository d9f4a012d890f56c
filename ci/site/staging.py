"""Atomic publish: a render writes into a staging folder beside the output folder and the finished
site replaces the old one in one rename, so the folder a host serves or a workflow uploads always
holds one whole render, the previous one or the new one.

Before (2026-12-05), a render wrote into the output folder as it went: out of disk it left pages
and no index.html, a store that could not be read left an empty folder, and a render killed midway
left old and new pages mixed, which the workflow then published.

How:

- The staging folder starts as a copy of the current site made of hard links (the same files, no
  bytes copied), so the incremental render finds every page, the manifest and the bookkeeping where
  it always did and skips what is unchanged. A render never writes into an existing file: a page,
  the manifest and each bookkeeping file are written to a new temporary file and renamed over the
  old name (`ci.site.writer`), which replaces the link in the staging folder and leaves the
  published file as it is. Stale temporary files (`.<name>.tmp`) are not carried over, since they
  would be opened for writing.
- Once the render is complete, the staging folder and the output folder are exchanged in one
  `renameat2(RENAME_EXCHANGE)` on Linux (two renames elsewhere, with a moment without the folder),
  and the old site, now in the staging folder's place, is deleted.
- On any failure the staging folder is deleted and the output folder is not touched. A render
  killed outright (SIGKILL) leaves its staging folder; the next render into the same folder deletes
  it. Each render holds an advisory lock on its staging folder, so a folder still being rendered
  into by another process is never mistaken for a leftover.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no advisory locks, so leftovers of killed renders are not told apart and stay
    fcntl = None  # type: ignore[assignment]

_STAGING = "staging"  # a staging folder's name: .<out name>.staging-<random>
_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


def site_folder(out_dir: Path) -> Path:
    """The folder a render publishes into: `out_dir` with symlinks resolved (a symlinked output folder
    is published into where it points, and stays a symlink).

    Raises:
        ValueError: it exists and is not a folder, or it is a mount point (a folder that cannot be
            renamed: render into a folder inside it).
    """
    out = out_dir.resolve()
    if out.exists() and not out.is_dir():
        raise ValueError(f"output path {str(out_dir)!r} exists and is not a folder")
    if out.is_dir() and os.path.ismount(out):
        raise ValueError(f"output folder {str(out_dir)!r} is a mount point: a render is staged beside the folder and "
                         "renamed into its place, which a mount point cannot be; render into a folder inside it")
    return out


@contextlib.contextmanager
def staged(out: Path) -> Iterator[Path]:
    """A staging folder beside `out` holding the current site (hard links), to render into; when the
    block completes, it becomes `out` and the old site is deleted; when it raises, it is deleted and
    `out` is untouched.

    Args:
        out: the output folder (`site_folder`); it need not exist, its parent is created.

    Yields:
        The staging folder.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(out)
    stage = out.with_name(f".{out.name}.{_STAGING}-{secrets.token_hex(6)}")
    try:
        stage.mkdir()
    except OSError as exc:
        raise OSError(exc.errno, "the site is rendered into a folder beside the output folder and swapped in when "
                                 f"complete; that folder cannot be made in {str(out.parent)!r}: {exc.strerror}",
                      str(stage)) from None
    lock = os.open(stage, os.O_RDONLY) if fcntl is not None else None
    try:
        if lock is not None:  # ours: `remove_leftovers` of another render skips it
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        published = False
        try:
            if out.is_dir():
                shutil.copymode(out, stage)
                _link_tree(out, stage)
            yield stage
            old = _swap(stage, out)
            published = True
        finally:
            if not published:
                shutil.rmtree(stage, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if lock is not None:
            os.close(lock)


def remove_leftovers(out: Path) -> list[Path]:
    """Delete the staging folders of renders into `out` that were killed (no process holds their lock).

    Returns:
        The folders deleted.
    """
    prefix = f".{out.name}.{_STAGING}-"
    gone: list[Path] = []
    if fcntl is None:
        return gone
    try:
        entries = list(os.scandir(out.parent))
    except OSError:
        return gone
    for entry in entries:
        if not entry.name.startswith(prefix) or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            fd = os.open(entry.path, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a render in progress
            os.close(fd)
            continue
        try:
            shutil.rmtree(entry.path, ignore_errors=True)
            gone.append(Path(entry.path))
        finally:
            os.close(fd)
    return gone


def _link_tree(src: Path, dst: Path) -> None:
    """Recreate the folder tree under `src` in the (empty) folder `dst`: folders made, files hard-linked
    (copied where the file system refuses a link), symlinks recreated as they are; stale temporary files
    of an interrupted write, sockets and pipes left out."""
    for entry in os.scandir(src):
        target = dst / entry.name
        if entry.is_symlink():
            os.symlink(os.readlink(entry.path), target)
        elif entry.is_dir():
            target.mkdir()
            shutil.copymode(entry.path, target)
            _link_tree(Path(entry.path), target)
        elif entry.is_file() and not (entry.name.startswith(".") and entry.name.endswith(".tmp")):
            try:
                os.link(entry.path, target, follow_symlinks=False)
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.EMLINK, errno.EXDEV, errno.ENOTSUP, errno.EACCES):
                    raise
                shutil.copy2(entry.path, target, follow_symlinks=False)


def _swap(stage: Path, out: Path) -> Path | None:
    """Put the folder `stage` at `out`; returns where the previous `out` went (to delete), or None."""
    if not os.path.lexists(out):
        os.rename(stage, out)
        return None
    if _exchange(stage, out):
        return stage
    aside = stage.with_name(stage.name + "-old")
    os.rename(out, aside)
    try:
        os.rename(stage, out)
    except OSError:
        os.rename(aside, out)  # the old site back where it was
        raise
    return aside



def _exchange(a: Path, b: Path) -> bool:
    """Exchange two paths in one step (Linux `renameat2(RENAME_EXCHANGE)`, glibc 2.28+); False where
    the system or the file system does not offer it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))
