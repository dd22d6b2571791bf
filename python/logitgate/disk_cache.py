"""The on-disk cache of compiled grammars (``Compiler(cache_dir=...)``): a directory of files,
one per compiled grammar, that outlives the process, so that a restarted server compiles
nothing it compiled before.

What a file holds: an :class:`Entry` (the core's automaton image, from
``_core.CompiledGrammar.save_image``, laid out and bounds-checked by
cpp/core/automaton_image.cc; the grammar's program and rule names; a little metadata) inside
an envelope written here::

    magic b"LGCACHE\\0" | u32 envelope version | 32-byte key | u64 contents length | 32-byte
    BLAKE2b of the contents | contents

(little-endian). The file is named after its key. The compiler keys a compile of a text or
JSON input (a schema, a regex, a grammar, a structural tag) by that input, its options and
the limits, so that a hit skips the frontends as well as the core; a compile of an IR grammar
by its program. Both keys also hash the vocabulary's fingerprint, the library version and
both format versions: a file is found only by the compile it answers, and a new version of
anything looks for new names (old files age out through eviction). Loading checks the
envelope and the entry here and the image in C++; any failure raises
:class:`~logitgate.CacheFileError`, which the compiler counts and treats as a miss.

Several processes may share a directory: a file is written under a temporary name and renamed
into place (readers see a whole file or none), a file removed while another process reads it
stays readable to that process, and a file that vanishes between listing and reading is a miss.
The directory's size is bounded: after a write that may take it past ``max_bytes``, the
writer lists it and removes the least recently used files (a hit refreshes a file's
modification time) until it holds at most nine tenths of the bound. Each process counts its
own writes since its last listing, and lists again at least every :data:`RESCAN_WRITES`
writes; with several writers the directory can exceed the bound by what the others wrote
since their last listings.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import CacheFileError

__all__ = ["DEFAULT_DISK_CACHE_BYTES", "ENVELOPE_VERSION", "DiskCache", "Entry"]

DEFAULT_DISK_CACHE_BYTES = 1024 * 1024 * 1024
"""The default bound on the bytes a cache directory holds."""

ENVELOPE_VERSION = 1
"""Bumped whenever the envelope's layout changes."""

MAGIC = b"LGCACHE\0"
_HEADER = struct.Struct("<8sI32sQ32s")
SUFFIX = ".lgc"
_TEMP_PREFIX = ".tmp-"
RESCAN_WRITES = 100
"""A writer lists the directory (and evicts) at least every this many writes."""
_STALE_TEMP_SECONDS = 3600.0  # a temporary file this old was left by a writer that died


def checksum(image: bytes | memoryview) -> bytes:
    return hashlib.blake2b(image, digest_size=32).digest()


def pack(key: bytes, image: bytes) -> bytes:
    """The file's bytes: the envelope around ``image``."""
    return _HEADER.pack(MAGIC, ENVELOPE_VERSION, key, len(image), checksum(image)) + image


def unpack(key: bytes, data: bytes) -> memoryview:
    """The contents inside a file's bytes (a view, not a copy: files can be tens of MiB),
    after checking the envelope; raises :class:`~logitgate.CacheFileError` naming what is
    wrong."""
    if len(data) < _HEADER.size:
        if not MAGIC.startswith(data[: len(MAGIC)]):
            raise CacheFileError("not a logitgate cache file", code="cache-foreign")
        raise CacheFileError(f"cache file of {len(data)} bytes is shorter than its header", code="cache-truncated")
    magic, version, file_key, length, digest = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise CacheFileError("not a logitgate cache file", code="cache-foreign")
    if version != ENVELOPE_VERSION:
        raise CacheFileError(
            f"cache file of envelope version {version}, this library reads {ENVELOPE_VERSION}", code="cache-version"
        )
    if file_key != key:
        raise CacheFileError("cache file of another entry", code="cache-key")
    image = memoryview(data)[_HEADER.size :]
    if len(image) < length:
        raise CacheFileError(f"cache file holds {len(image)} of its {length} image bytes", code="cache-truncated")
    if len(image) > length:
        raise CacheFileError("cache file has bytes after its image", code="cache-inconsistent")
    if checksum(image) != digest:
        raise CacheFileError("cache file's checksum does not match its image", code="cache-checksum")
    return image


@dataclass(frozen=True)
class Entry:
    """What a cache file holds for one compile: the core's automaton image, and what the
    compiler needs to answer without the frontends: the program and its rule names (the IR
    is rebuilt from them when asked for), the memory cache's key of the program (``digest``),
    and a JSON Schema's dropped constraints and rule pointers."""

    digest: str
    names: list[str]
    program: bytes
    image: bytes
    dropped: tuple[str, ...] = ()
    pointers: dict[str, str] = field(default_factory=dict)


_LENGTH = struct.Struct("<Q")


def pack_entry(entry: Entry) -> bytes:
    """``u64 meta length | meta (JSON) | u64 program length | program | image``."""
    meta = json.dumps(
        {"digest": entry.digest, "names": entry.names, "dropped": list(entry.dropped), "pointers": entry.pointers},
        ensure_ascii=False,
    ).encode("utf-8", "surrogatepass")
    return b"".join((_LENGTH.pack(len(meta)), meta, _LENGTH.pack(len(entry.program)), entry.program, entry.image))


def unpack_entry(blob: bytes | memoryview) -> Entry:
    """The entry of a file's (checksummed) contents; CacheFileError ``cache-inconsistent``
    when its parts do not fit together."""

    def bad(what: str) -> CacheFileError:
        return CacheFileError(f"cache entry: {what}", code="cache-inconsistent")

    view = memoryview(blob)
    if len(view) < _LENGTH.size:
        raise bad("no metadata")
    (n_meta,) = _LENGTH.unpack_from(view)
    at = _LENGTH.size + n_meta
    if at + _LENGTH.size > len(view):
        raise bad("metadata runs past the entry")
    (n_program,) = _LENGTH.unpack_from(view, at)
    start = at + _LENGTH.size
    if n_program % 4 or start + n_program > len(view):
        raise bad("program runs past the entry")
    try:
        meta = json.loads(bytes(view[_LENGTH.size : at]).decode("utf-8", "surrogatepass"))
    except ValueError:
        raise bad("metadata is not JSON") from None
    digest, names = meta.get("digest"), meta.get("names")
    dropped, pointers = meta.get("dropped"), meta.get("pointers")
    if not (
        isinstance(digest, str)
        and isinstance(names, list)
        and all(isinstance(n, str) for n in names)
        and isinstance(dropped, list)
        and all(isinstance(d, str) for d in dropped)
        and isinstance(pointers, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in pointers.items())
    ):
        raise bad("metadata of the wrong shape")
    return Entry(
        digest,
        names,
        bytes(view[start : start + n_program]),
        bytes(view[start + n_program :]),
        tuple(dropped),
        pointers,
    )


class DiskCache:
    """One cache directory, bounded to ``max_bytes`` (see the module's docstring). Thread-safe;
    processes may share the directory."""

    def __init__(self, directory: str | os.PathLike[str], max_bytes: int = DEFAULT_DISK_CACHE_BYTES) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._written = 0  # bytes written since the last listing
        self._writes = 0  # files written since the last listing
        self._listed_bytes: int | None = None  # what the last listing found (None: not listed yet)

    def path(self, key: bytes) -> Path:
        return self.directory / (key.hex() + SUFFIX)

    def load(self, key: bytes) -> memoryview | None:
        """The contents stored under ``key``, or None when there is none; a file that is there
        but unusable raises :class:`~logitgate.CacheFileError` (and is removed)."""
        path = self.path(key)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        try:
            image = unpack(key, data)
        except CacheFileError:
            self.remove(key)
            raise
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: evicted last
        return image

    def remove(self, key: bytes) -> None:
        with contextlib.suppress(OSError):
            self.path(key).unlink()

    def store(self, key: bytes, image: bytes) -> None:
        """Writes ``image`` under ``key`` atomically, then evicts if the directory may have
        outgrown its bound. Raises OSError when the file cannot be written."""
        data = pack(key, image)
        if len(data) > self.max_bytes:
            return  # never kept: it would evict everything and still not fit
        fd, temp = _temp_file(self.directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(temp, self.path(key))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        with self._lock:
            self._written += len(data)
            self._writes += 1
            listed = self._listed_bytes
            due = listed is None or listed + self._written > self.max_bytes or self._writes >= RESCAN_WRITES
            if due:
                self._evict_locked()

    def size_bytes(self) -> int:
        """Bytes of the cache files in the directory now (a listing)."""
        return sum(size for _, size, _ in self._entries())

    def _entries(self) -> list[tuple[Path, int, float]]:
        """(path, size, modification time) of each cache file; removes stale temporary files."""
        out: list[tuple[Path, int, float]] = []
        now = time.time()
        with os.scandir(self.directory) as it:
            for entry in it:
                try:
                    st = entry.stat()
                except OSError:
                    continue  # removed meanwhile
                if entry.name.endswith(SUFFIX) and not entry.name.startswith(_TEMP_PREFIX):
                    out.append((Path(entry.path), st.st_size, st.st_mtime))
                elif entry.name.startswith(_TEMP_PREFIX) and now - st.st_mtime > _STALE_TEMP_SECONDS:
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
        return out

    def _evict_locked(self) -> None:
        entries = self._entries()
        total = sum(size for _, size, _ in entries)
        if total > self.max_bytes:
            target = self.max_bytes * 9 // 10
            for path, size, _ in sorted(entries, key=lambda e: e[2]):
                if total <= target:
                    break
                with contextlib.suppress(OSError):
                    path.unlink()
                total -= size
        self._listed_bytes = total
        self._written = self._writes = 0


def _temp_file(directory: Path) -> tuple[int, str]:
    """A new temporary file in ``directory`` (the rename into place stays on one file system)."""
    return tempfile.mkstemp(prefix=f"{_TEMP_PREFIX}{os.getpid()}-", suffix=".part", dir=directory)
