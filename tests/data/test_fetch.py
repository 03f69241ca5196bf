"""``multihop data fetch`` installs a download only when its sha256 is the one recorded or given: a fake server stands
in for ``urllib.request.urlopen`` (no test reaches the network)."""

import hashlib
import io
import zipfile

import pytest

import multihop.data.fetch as fetch
from multihop.cli import app
from multihop.cli.errors import run
from multihop.data.fetch import ChecksumError, Source, UnverifiedDownload


class FakeServer:
    """Serves ``files`` (url → bytes) and counts the requests."""

    def __init__(self, files):
        self.files, self.requests = files, []

    def __call__(self, url, timeout=None):
        self.requests.append(url)
        body = self.files[url]
        response = io.BytesIO(body)
        response.headers = {"Content-Length": str(len(body))}
        return response


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def archive() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("data/dev.json", "[]")
    return buffer.getvalue()


URL, ZIP_URL = "https://example.org/set.json", "https://example.org/set.zip"
BODY = b'[{"_id": "1"}]'


@pytest.fixture
def server(monkeypatch):
    fake = FakeServer({URL: BODY, ZIP_URL: archive()})
    monkeypatch.setattr(fetch.urllib.request, "urlopen", fake)
    return fake


def sources(monkeypatch, json_sum, zip_sum=None):
    monkeypatch.setattr(fetch, "SOURCES", {"set": [Source(URL, "set/dev/set.json", json_sum)],
                                           "zipped": [Source(ZIP_URL, "zipped/set.zip", zip_sum)]})


def test_a_download_with_its_recorded_sum_is_installed_and_unzipped(server, monkeypatch, tmp_path):
    sources(monkeypatch, sha(BODY), sha(archive()))
    assert fetch.fetch(tmp_path, ["set", "zipped"]) == [tmp_path / "set/dev/set.json", tmp_path / "zipped/set.zip"]
    assert (tmp_path / "set/dev/set.json").read_bytes() == BODY and (tmp_path / "zipped/data/dev.json").exists()
    assert fetch.fetch(tmp_path, ["set"]) and server.requests == [URL, ZIP_URL]  # a file in place is kept


def test_another_sum_installs_nothing(server, monkeypatch, tmp_path):
    sources(monkeypatch, "0" * 64)
    with pytest.raises(ChecksumError, match=f"the download's sha256 is {sha(BODY)}, not 0000"):
        fetch.fetch(tmp_path, ["set"])
    assert not [path for path in tmp_path.rglob("*") if path.is_file()]


def test_without_a_recorded_sum_the_download_waits_aside_for_one(server, monkeypatch, tmp_path):
    sources(monkeypatch, None)
    with pytest.raises(UnverifiedDownload, match=f"rerun with --sha256 set.json={sha(BODY)}"):
        fetch.fetch(tmp_path, ["set"])
    assert not (tmp_path / "set/dev/set.json").exists() and (tmp_path / "set/dev/.set.json.unverified").exists()
    assert fetch.fetch(tmp_path, ["set"], {"set.json": sha(BODY)}) == [tmp_path / "set/dev/set.json"]
    assert server.requests == [URL]  # the file kept aside is installed, not downloaded again


def test_a_file_in_place_is_checked_when_its_sum_is_known(server, monkeypatch, tmp_path):
    sources(monkeypatch, sha(BODY))
    (tmp_path / "set/dev").mkdir(parents=True)
    (tmp_path / "set/dev/set.json").write_bytes(b"changed")
    with pytest.raises(ChecksumError, match="delete the file to download it again"):
        fetch.fetch(tmp_path, ["set"])
    with pytest.raises(ValueError, match="--sha256 names no file of the datasets: other.json"):
        fetch.fetch(tmp_path, ["set"], {"other.json": sha(BODY)})


def test_every_release_is_fetched_over_https_and_recorded_or_waits_for_a_sum():
    for source in (source for sources in fetch.SOURCES.values() for source in sources):
        assert source.url.startswith("https://"), source.url
        assert source.sha256 is None or len(source.sha256) == 64, source


def test_the_command_takes_sums_and_says_what_is_unverified(server, monkeypatch, tmp_path, capsys):
    sources(monkeypatch, None)
    assert run(app, ["data", "fetch", "set", "--root", str(tmp_path)]) == 1
    assert f"--sha256 set.json={sha(BODY)}" in capsys.readouterr().err
    assert run(app, ["data", "fetch", "set", "--root", str(tmp_path), "--sha256", "set.json=abc"]) == 2
    assert "write NAME=SUM" in capsys.readouterr().err
    assert run(app, ["data", "fetch", "set", "--root", str(tmp_path), "--sha256", f"set.json={sha(BODY)}"]) == 0
    assert (tmp_path / "set/dev/set.json").read_bytes() == BODY
