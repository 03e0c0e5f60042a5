"""Where dataset files live, how they are verified, and how missing ones are downloaded.

A *data root* holds one folder per dataset (``mnist/``, ``fashion-mnist/``). The
root is ``--data-dir`` / ``root=`` if given, else ``$PLUGTORCH_DATA``, else the
user cache (``$XDG_CACHE_HOME/plugtorch`` or ``~/.cache/plugtorch``); Debian's
``/usr/share/datasets`` (``apt-get install dataset-fashion-mnist``) is searched
after it. Downloads go into the first root only.

Every file is checked against the published md5 of its ``.gz`` form, or of its
uncompressed content (which also accepts a re-compressed copy such as Debian's,
whose gzip header differs from the original).
"""
from __future__ import annotations

import gzip
import hashlib
import os
import sys
import urllib.error
import urllib.request
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..utils.atomic import atomic_write
from .idx import IDXFormatError, parse_idx

SYSTEM_ROOT = Path("/usr/share/datasets")
DOWNLOAD_TIMEOUT = 30.0  # seconds per connection attempt and per read


class ChecksumError(ValueError):
    """A dataset file whose md5 is not the published one."""


class DatasetNotFoundError(FileNotFoundError, RuntimeError):
    """Dataset files that are neither on disk nor downloadable; the message says where to put them.
    Also a RuntimeError, which is what torchvision raises, so ported handlers still catch it."""


@dataclass(frozen=True)
class Resource:
    """One dataset file: its name without ``.gz`` and the published md5 sums."""
    name: str
    gz_md5: str
    raw_md5: str


def user_cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "plugtorch"


def data_roots(data_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """The roots searched, in order; the first is where downloads go."""
    if data_dir is not None:
        primary = Path(data_dir)
    elif os.environ.get("PLUGTORCH_DATA"):
        primary = Path(os.environ["PLUGTORCH_DATA"])
    else:
        primary = user_cache_root()
    primary = primary.expanduser()
    return [primary] if primary == SYSTEM_ROOT else [primary, SYSTEM_ROOT]


def _md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def verified_content(data: bytes, res: Resource, origin: str) -> bytes:
    """The uncompressed IDX bytes of a file's ``data``, once its checksum has been verified."""
    is_gz = data[:2] == b"\x1f\x8b"
    if is_gz and _md5(data) == res.gz_md5:
        return gzip.decompress(data)
    if is_gz:
        try:
            raw = gzip.decompress(data)
        except (EOFError, OSError, zlib.error) as e:
            raise IDXFormatError(
                f"{origin} is a truncated or corrupt gzip file ({len(data):,} bytes; {e}). "
                "Delete it and download it again, or replace it with a good copy.") from None
    else:
        raw = data
    if _md5(raw) != res.raw_md5:
        parse_idx(raw, origin)  # a structural problem (truncation) gets its own, clearer message
        raise ChecksumError(
            f"{origin} does not match the published checksum of {res.name}: md5 "
            f"{_md5(data)}, expected {res.gz_md5} for the .gz file or {res.raw_md5} for the "
            "uncompressed file. It is corrupt or a different file; delete it and download it "
            "again, or replace it with a good copy.")
    return raw


def _folders(folder: str | Sequence[str]) -> list[str]:
    return [folder] if isinstance(folder, str) else list(folder)


def find_file(res: Resource, folder: str | Sequence[str], roots: list[Path]) -> Path | None:
    """The first copy of ``res`` under a root; ``folder`` may be a list of layouts to try."""
    for root in roots:
        for sub in _folders(folder):
            for candidate in (root / sub / (res.name + ".gz"), root / sub / res.name):
                if candidate.is_file():
                    return candidate
    return None


def download(res: Resource, dest_dir: Path, mirrors: Sequence[str], timeout: float = DOWNLOAD_TIMEOUT,
             unreachable: set[str] | None = None) -> tuple[Path | None, list[str]]:
    """Fetch ``res.name + '.gz'`` from the first mirror that serves a verified copy.

    Returns ``(path, errors)``: the file written atomically into ``dest_dir``, or
    None and one line per mirror saying why it failed. Mirrors that could not be
    reached are added to ``unreachable`` and skipped on later calls, so an offline
    machine waits for each timeout once, not once per file.
    """
    errors: list[str] = []
    unreachable = set() if unreachable is None else unreachable
    for mirror in mirrors:
        url = mirror.rstrip("/") + "/" + res.name + ".gz"
        if mirror in unreachable:
            errors.append(f"{url}: skipped, the mirror was unreachable")
            continue
        print(f"downloading {url}", file=sys.stderr, flush=True)
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                data = response.read()
        except (urllib.error.URLError, OSError) as e:
            if not isinstance(e, urllib.error.HTTPError):  # an HTTP error is an answer
                unreachable.add(mirror)
            errors.append(f"{url}: {getattr(e, 'reason', None) or e}")
            continue
        try:
            verified_content(data, res, url)
        except ValueError as e:
            errors.append(f"{url}: {e}")
            continue
        dest_dir.mkdir(parents=True, exist_ok=True)
        path = dest_dir / (res.name + ".gz")
        with atomic_write(path) as f:
            f.write(data)
        return path, errors
    return None, errors


def load_files(title: str, folder: str | Sequence[str], resources: Sequence[Resource],
               data_dir: str | os.PathLike[str] | None = None, download_missing: bool = False,
               mirrors: Sequence[str] = (), system_package: str | None = None,
               companions: Sequence[Resource] = ()) -> dict[str, bytes]:
    """Locate (or download) each resource and return its verified, uncompressed IDX bytes.

    ``folder`` is the dataset's folder under a root, or a list of them (the first is where
    downloads go). ``companions`` are the dataset's other files (the other split): when
    something is missing, those missing too are listed in the same error, so a user fixes
    the data once instead of once per split.
    """
    roots = data_roots(data_dir)
    home = roots[0] / _folders(folder)[0]
    found: dict[str, Path] = {}
    missing: list[Resource] = []
    failures: list[str] = []
    unreachable: set[str] = set()
    for res in resources:
        path = find_file(res, folder, roots)
        if path is None and download_missing:
            path, errors = download(res, home, mirrors, unreachable=unreachable)
            failures += errors
        if path is None:
            missing.append(res)
        else:
            found[res.name] = path
    if missing:
        missing += [res for res in companions if find_file(res, folder, roots) is None]
        raise DatasetNotFoundError(_missing_message(title, folder, roots, missing, mirrors,
                                                    download_missing, failures, system_package))
    return {res.name: verified_content(found[res.name].read_bytes(), res, str(found[res.name]))
            for res in resources}


def _missing_message(title, folder, roots, missing, mirrors, tried, failures, system_package):
    folders = _folders(folder)
    lines = [f"{title} files not found. Looked in:"]
    lines += [f"  {root / sub}/" for root in roots for sub in folders]
    if tried:
        lines.append("Downloading them failed:" if failures else "No download mirror is configured.")
        lines += [f"  {f}" for f in failures]
    else:
        lines.append("Downloading was not requested (pass download=True, or run `plugtorch train`, "
                     "which downloads).")
    lines.append(f"Place these files (gzip-compressed, or uncompressed without .gz) in "
                 f"{roots[0] / folders[0]}/:")
    lines += [f"  {res.name}.gz  (md5 {res.gz_md5})" for res in missing]
    if mirrors:
        lines.append(f"They are published at {mirrors[0]}")
    lines.append("Or point --data-dir (or the PLUGTORCH_DATA environment variable) at a data root "
                 f"that holds {folders[0]}/ (a clone of plugtorch has MNIST in data/mnist/: "
                 "--data-dir data).")
    if system_package:
        lines.append(f"On Debian or Ubuntu: apt-get install {system_package} (installs its files "
                     f"under {SYSTEM_ROOT}/, which is searched too).")
    return "\n".join(lines)
