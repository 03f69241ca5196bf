"""``multihop data fetch``: download the official dataset files into ``MULTIHOP_DATA`` on an online machine.

Sources are the datasets' own releases (MuSiQue's Google Drive archive, HotpotQA's CMU mirror, 2WikiMultihopQA's
Dropbox archive). Files are downloaded to a temporary name and renamed when complete; offline, the command fails
with a message that says so and names the URL.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from tqdm.auto import tqdm

SOURCES = {
    "musique": [
        ("https://drive.usercontent.google.com/download?id=1tGdADlNjWFaHLeZZGShh2IRcpO6Lv24h&export=download&confirm=t",
         "musique/musique_v1.0.zip"),
    ],
    "hotpotqa": [
        ("http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_train_v1.1.json", "hotpotqa/train/hotpot_train_v1.1.json"),
        ("http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_dev_distractor_v1.json",
         "hotpotqa/dev/hotpot_dev_distractor_v1.json"),
    ],
    "2wiki": [
        ("https://www.dropbox.com/s/ms2m13252h6xubs/data_ids_april7.zip?dl=1", "2wikimultihopqa/data_ids_april7.zip"),
    ],
}


class OfflineError(RuntimeError):
    """The machine cannot reach the dataset's server."""


def download(url: str, target: Path, timeout: float = 30.0) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.part")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, open(tmp, "wb") as out:
            total = int(response.headers.get("Content-Length") or 0) or None
            with tqdm(total=total, unit="B", unit_scale=True, desc=target.name) as bar:
                while block := response.read(1 << 20):
                    out.write(block)
                    bar.update(len(block))
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        tmp.unlink(missing_ok=True)
        raise OfflineError(f"cannot download {url} ({exc}); this machine looks offline — copy the files into "
                           f"MULTIHOP_DATA by hand (see the README)") from None
    os.replace(tmp, target)
    return target


def fetch(root: Path, datasets: list[str]) -> list[Path]:
    """Download (and unzip) the official files of ``datasets`` under ``root``; files already there are kept."""
    fetched = []
    for name in datasets:
        if name not in SOURCES:
            raise KeyError(f"unknown dataset {name!r}; choose from {', '.join(SOURCES)}")
        for url, relative in SOURCES[name]:
            target = root / relative
            if not target.exists():
                download(url, target)
            if target.suffix == ".zip":
                with zipfile.ZipFile(target) as zf:
                    zf.extractall(target.parent)
            fetched.append(target)
    return fetched
