"""Incremental output: a page is rendered only when its inputs changed, and written only when its
bytes changed, so an unchanged page keeps its mtime and a static host re-uploads nothing.

A manifest in the output folder records, per page, a fingerprint of its inputs and a hash of
its bytes. The fingerprint of every page also covers the templates and this package's code, so
a new dashboard version re-renders everything.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

MANIFEST = ".dashboard-manifest.json"
# State kept for the next render (`PageWriter.blob`), beside the manifest that holds its digests.
CACHE_DIR = ".dashboard-cache"
_MANIFEST_VERSION = 1


def constant(text: str) -> Callable[[], str]:
    """`PageWriter.page`'s `produce` for a file whose text is already made."""
    return lambda: text


def fingerprint(*parts: object) -> str:
    """A stable hash of `repr(parts)`: records are frozen dataclasses, tuples, str and floats,
    whose reprs are deterministic across processes (unlike `hash()` of a str)."""
    return hashlib.blake2b(repr(parts).encode(), digest_size=16).hexdigest()


@dataclass
class PagePart:
    """Pages emitted apart (`PageWriter.part`): manifest entries by path, and the counts."""

    entries: dict[str, dict[str, object]]
    written: int
    unchanged: int
    bytes_written: int


class PageWriter:
    """Writes pages under `out_dir`, skipping unchanged ones, and removes pages it wrote before
    that this render no longer produces (never any other file)."""

    def __init__(self, out_dir: Path, salt: str) -> None:
        self.out_dir = out_dir
        self.salt = salt
        self.written = 0
        self.unchanged = 0
        self.removed = 0
        self.bytes_written = 0
        self._old: dict[str, dict[str, object]] = {}
        self._new: dict[str, dict[str, object]] = {}
        self._old_blobs: dict[str, dict[str, object]] = {}
        self._blobs: dict[str, tuple[dict[str, object], bytes]] = {}
        self._read_blobs: set[str] = set()
        # A fingerprint of everything the site was rendered from, saved with the manifest: when the
        # next render's is the same, nothing needs rendering at all (`keep_all`).
        self.state = ""
        self.previous_state = ""
        path = out_dir / MANIFEST
        if path.is_file():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                data = {}  # a damaged manifest only costs a full re-render
            if isinstance(data, dict) and data.get("version") == _MANIFEST_VERSION:
                pages = data.get("pages")
                if isinstance(pages, dict):
                    self._old = {k: v for k, v in pages.items() if isinstance(k, str) and isinstance(v, dict)}
                state = data.get("state")
                self.previous_state = state if isinstance(state, str) else ""
                blobs = data.get("blobs")
                if isinstance(blobs, dict):
                    self._old_blobs = {k: v for k, v in blobs.items() if isinstance(k, str) and isinstance(v, dict)}

    def previous_blob(self, name: str, key: str) -> bytes | None:
        """The bytes the previous render kept as `blob(name, key, ...)`, when it was kept with this
        `key` and the file still holds exactly those bytes (a digest in the manifest); else None.

        Args:
            name: a plain file name (no folders) under the cache folder.
            key: what the kept state must have been computed with (code version, options).
        """
        old = self._old_blobs.get(name)
        if old is None or old.get("key") != key or not _plain(name):
            return None
        try:
            data = (self.out_dir / CACHE_DIR / name).read_bytes()
        except OSError:
            return None
        if len(data) != old.get("size") or hashlib.blake2b(data, digest_size=16).hexdigest() != old.get("digest"):
            return None
        self._read_blobs.add(name)
        return data

    def blob(self, name: str, key: str, data: bytes) -> None:
        """Keep `data` for the next render (`previous_blob`), written by `finish` with its digest.

        Args:
            name: a plain file name (no folders) under the cache folder.
            key: what it was computed with.
            data: the bytes.
        """
        if not _plain(name):
            raise ValueError(f"cache name must be a plain file name, got {name!r}")
        entry = {"key": key, "digest": hashlib.blake2b(data, digest_size=16).hexdigest(), "size": len(data)}
        self._blobs[name] = (entry, data)

    def previous(self, rel: str) -> tuple[object, str] | None:
        """The note (`page`'s `note`) and text of page `rel` as the previous render of this code
        and these options wrote it, when the file on disk still holds exactly those bytes; else None.

        Args:
            rel: path under the output folder, with "/" separators.
        """
        old = self._old.get(rel)
        if old is None or "note" not in old or old.get("salt") != fingerprint(self.salt):
            return None
        try:
            data = (self.out_dir / rel).read_bytes()
        except OSError:
            return None
        if len(data) != old.get("size") or hashlib.blake2b(data, digest_size=16).hexdigest() != old.get("output"):
            return None
        return old["note"], data.decode("utf-8")

    def page(self, rel: str, inputs: object, produce: Callable[[], str], note: object = None) -> None:
        """Emit page `rel` (a relative path): `produce()` is called only when `inputs` changed.

        Args:
            rel: path under the output folder, with "/" separators.
            inputs: everything the page depends on besides the code and templates (repr-able).
            produce: renders the page's text.
            note: JSON-able facts about the text that the next render may read back (`previous`).
        """
        if rel in self._new:
            raise ValueError(f"page {rel!r} emitted twice in one render")
        fp = fingerprint(self.salt, inputs)
        target = self.out_dir / rel
        old = self._old.get(rel)
        if old is not None and old.get("input") == fp and _size(target) == old.get("size"):
            self._new[rel] = old
            self.unchanged += 1
            return
        data = produce().encode("utf-8")
        digest = hashlib.blake2b(data, digest_size=16).hexdigest()
        self._new[rel] = {"input": fp, "output": digest, "size": len(data)}
        if note is not None:
            self._new[rel].update(note=note, salt=fingerprint(self.salt))
        if old is not None and old.get("output") == digest and _size(target) == len(data):
            self.unchanged += 1
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)  # readers of a served site never see half a page
        self.written += 1
        self.bytes_written += len(data)

    @contextlib.contextmanager
    def part(self) -> Iterator[PagePart]:
        """Collect the pages emitted inside the block apart (a forked worker's share of a render), for
        `merge` in the writer it was forked from: their manifest entries and counts."""
        before = (self._new, self.written, self.unchanged, self.bytes_written)
        self._new, self.written, self.unchanged, self.bytes_written = {}, 0, 0, 0
        got = PagePart({}, 0, 0, 0)
        try:
            yield got
        finally:
            got.entries.update(self._new)
            got.written, got.unchanged, got.bytes_written = self.written, self.unchanged, self.bytes_written
            self._new, self.written, self.unchanged, self.bytes_written = before

    def merge(self, part: PagePart) -> None:
        """Take in the pages a worker emitted (`part`), as if emitted here."""
        twice = part.entries.keys() & self._new.keys()
        if twice:
            raise ValueError(f"page {sorted(twice)[0]!r} emitted twice in one render")
        self._new.update(part.entries)
        self.written += part.written
        self.unchanged += part.unchanged
        self.bytes_written += part.bytes_written

    def keep_all(self) -> bool:
        """Keep every page of the previous render as it is, when each is still on disk with the
        size it was written with (a damaged or deleted page needs a real render).

        Returns:
            True when all pages were kept (the render is done), False when one was missing or changed.
        """
        for rel, old in self._old.items():
            if ".." in Path(rel).parts or Path(rel).is_absolute() or _size(self.out_dir / rel) != old.get("size"):
                return False
        self._new = dict(self._old)
        self.unchanged = len(self._new)
        return True

    def pages(self) -> list[str]:
        """The pages of this render so far (relative paths, sorted)."""
        return sorted(self._new)

    def finish(self) -> None:
        """Delete pages of a previous render that were not emitted now, then save the manifest.

        The manifest is a file in the output folder, so anyone who can write there can write it: an
        entry is deleted only when it names, relatively, a regular file that really lies inside the
        output folder (no absolute path, no `..`, no symlinked folder leading out, not a symlink).
        Any other entry is dropped from the manifest and nothing is deleted for it.
        """
        root = self.out_dir.resolve()
        for rel in sorted(self._old.keys() - self._new.keys()):
            target = _inside(root, rel)
            if target is not None:
                target.unlink()
                self.removed += 1
        cache = self.out_dir / CACHE_DIR
        for name, (entry, data) in sorted(self._blobs.items()):
            if name in self._read_blobs and self._old_blobs.get(name) == entry:
                continue  # read back this render, digest checked: the same bytes are there
            cache.mkdir(exist_ok=True)
            tmp = cache / f".{name}.tmp"
            tmp.write_bytes(data)
            os.replace(tmp, cache / name)
        for name in sorted(self._old_blobs.keys() - self._blobs.keys()):
            target = _inside(root, f"{CACHE_DIR}/{name}") if _plain(name) else None
            if target is not None:
                target.unlink()
        tmp = self.out_dir / f".{MANIFEST}.tmp"
        manifest = {"version": _MANIFEST_VERSION, "pages": self._new, "state": self.state,
                    "blobs": {name: entry for name, (entry, _) in self._blobs.items()}}
        tmp.write_text(json.dumps(manifest, sort_keys=True), "utf-8")
        os.replace(tmp, self.out_dir / MANIFEST)


def _inside(root: Path, rel: object) -> Path | None:
    """The regular file `rel` names inside the resolved folder `root`, or None when `rel` is not a
    plain relative path, leads outside `root` (through `..` or a symlinked folder), or names a
    symlink, a folder or nothing."""
    if not isinstance(rel, str) or not rel or "\x00" in rel or "\\" in rel:
        return None
    parts = Path(rel).parts
    if Path(rel).is_absolute() or not parts or any(p in ("", ".", "..") for p in parts):
        return None
    target = root.joinpath(*parts)
    try:
        if not target.parent.resolve(strict=True).is_relative_to(root) or not stat.S_ISREG(target.lstat().st_mode):
            return None
    except (OSError, RuntimeError):  # missing, unreadable, or a symlink loop
        return None
    return target


def _plain(name: str) -> bool:
    """Whether `name` is a plain file name: no folder, not hidden, nothing odd."""
    return bool(name) and name == Path(name).name and not name.startswith(".") and "\\" not in name \
        and "\x00" not in name


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None
