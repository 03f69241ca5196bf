"""``multihop data fetch``: download the official dataset files into ``MULTIHOP_DATA`` on an online machine, each
checked against its sha256.

Sources are the datasets' own releases (MuSiQue's Google Drive archive, HotpotQA's CMU mirror, 2WikiMultihopQA's
Dropbox archive), over HTTPS. Every :class:`Source` carries the sha256 of its file: a download is hashed as it
arrives and installed (renamed from its temporary name, a zip then unpacked) only when its sum is the one recorded;
another sum deletes it and fails (:class:`ChecksumError`). A source whose sum this release does not record yet
(``sha256=None``) installs nothing unverified: its download is kept aside as ``.<name>.unverified`` and the command
fails printing the sum it has (:class:`UnverifiedDownload`), to be checked against the dataset's release and given
back with ``--sha256 NAME=SUM`` (:func:`fetch`'s ``sha256``), which then installs the file kept aside without
downloading it again. A file already in place is kept, and checked when a sum is known. Offline, the command fails
with a message that says so and names the URL (:class:`OfflineError`).

Questions can also be read straight from a Hugging Face Hub dataset at a pinned revision
(``multihop.load_dataset("hf://org/name@<commit>")``, :mod:`multihop.data.loaders`).
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm


@dataclass(frozen=True)
class Source:
    """One file of a dataset's release: where it is, where it goes under the data folder, and its sha256 (None: not
    recorded yet, so a download is installed only with a sum the user gives)."""

    url: str
    relative: str
    sha256: str | None

    @property
    def name(self) -> str:
        """The file's name, as ``--sha256 NAME=SUM`` names it."""
        return Path(self.relative).name


SOURCES = {
    "musique": [
        Source("https://drive.usercontent.google.com/download?id=1tGdADlNjWFaHLeZZGShh2IRcpO6Lv24h&export=download"
               "&confirm=t", "musique/musique_v1.0.zip", sha256=None),
    ],
    "hotpotqa": [
        Source("https://curtis.ml.cmu.edu/datasets/hotpot/hotpot_train_v1.1.json",
               "hotpotqa/train/hotpot_train_v1.1.json", sha256=None),
        Source("https://curtis.ml.cmu.edu/datasets/hotpot/hotpot_dev_distractor_v1.json",
               "hotpotqa/dev/hotpot_dev_distractor_v1.json", sha256=None),
    ],
    "2wiki": [
        Source("https://www.dropbox.com/s/ms2m13252h6xubs/data_ids_april7.zip?dl=1",
               "2wikimultihopqa/data_ids_april7.zip", sha256=None),
    ],
}


class OfflineError(RuntimeError):
    """The machine cannot reach the dataset's server."""


class ChecksumError(RuntimeError):
    """A file whose sha256 is not the one recorded (or given)."""


class UnverifiedDownload(RuntimeError):
    """A download with no sha256 to check it against: kept aside, not installed."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while block := stream.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def download(url: str, target: Path, timeout: float = 30.0) -> str:
    """Download ``url`` to ``target`` (through a temporary name, so an interrupted download leaves nothing there);
    returns the file's sha256, computed as it arrives."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.part")
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, open(tmp, "wb") as out:
            total = int(response.headers.get("Content-Length") or 0) or None
            with tqdm(total=total, unit="B", unit_scale=True, desc=target.name) as bar:
                while block := response.read(1 << 20):
                    out.write(block)
                    digest.update(block)
                    bar.update(len(block))
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        tmp.unlink(missing_ok=True)
        raise OfflineError(f"cannot download {url} ({exc}); this machine looks offline — copy the files into "
                           f"MULTIHOP_DATA by hand (see the README)") from None
    os.replace(tmp, target)
    return digest.hexdigest()


def fetch_source(source: Source, root: Path, expected: str | None) -> Path:
    """Install ``source`` under ``root``, checked against ``expected`` (the sum given, else the one recorded); returns
    its path. A file already there is kept (and checked when a sum is known); without a sum the download is kept
    aside and :class:`UnverifiedDownload` says its sum."""
    target = root / source.relative
    expected = (expected or source.sha256 or "").lower() or None
    if target.exists():
        if expected and (found := sha256_of(target)) != expected:
            raise ChecksumError(f"{target}: sha256 {found}, not {expected} (the release's): delete the file to "
                                "download it again")
        return target
    aside = target.with_name(f".{target.name}.unverified")
    if aside.exists() and expected:  # downloaded before without a sum, now given one
        found = sha256_of(aside)
    else:
        found = download(source.url, aside)
    if expected is None:
        raise UnverifiedDownload(
            f"{source.url}: no sha256 is recorded for {source.name}; the download's is {found} (kept as {aside}): "
            f"check it against the dataset's release and rerun with --sha256 {source.name}={found}")
    if found != expected:
        aside.unlink(missing_ok=True)
        raise ChecksumError(f"{source.url}: the download's sha256 is {found}, not {expected}: not installed (a "
                            "changed or damaged file; the server may have served an error page)")
    os.replace(aside, target)
    return target


def fetch(root: Path, datasets: list[str], sha256: Mapping[str, str] | None = None) -> list[Path]:
    """Download (and unzip) the official files of ``datasets`` under ``root``, each checked against its sha256:
    ``sha256`` (file name → sum, ``--sha256 NAME=SUM``) where given, else the one :data:`SOURCES` records; files
    already there are kept."""
    given = dict(sha256 or {})
    known = {source.name for sources in SOURCES.values() for source in sources}
    unknown = sorted(set(given) - known)
    if unknown:
        raise ValueError(f"--sha256 names no file of the datasets: {', '.join(unknown)}; the files are "
                         f"{', '.join(sorted(known))}")
    fetched = []
    for name in datasets:
        if name not in SOURCES:
            raise KeyError(f"unknown dataset {name!r}; choose from {', '.join(SOURCES)}")
        for source in SOURCES[name]:
            target = fetch_source(source, root, given.get(source.name))
            if target.suffix == ".zip":
                with zipfile.ZipFile(target) as zf:
                    zf.extractall(target.parent)
            fetched.append(target)
    return fetched
