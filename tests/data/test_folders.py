"""Saved folders list their files with sizes and sha256 and check them when loaded: a missing or changed file is
named in one line."""

import json

import pytest

from multihop.data.folders import INVENTORY, ChecksumMismatchError, sha256_file, verify_inventory, write_inventory
from multihop.programs import SingleStepRAG, load, save
from multihop.retrievers import load_retriever


def test_the_inventory_lists_every_file_but_hidden_ones(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.json").write_text("{}")
    (tmp_path / "sub" / "b.bin").write_bytes(b"\x00" * 10)
    (tmp_path / ".multihop.lock").write_text("")
    files = write_inventory(tmp_path)
    assert files == {"a.json": {"size": 2, "sha256": sha256_file(tmp_path / "a.json")},
                     "sub/b.bin": {"size": 10, "sha256": sha256_file(tmp_path / "sub" / "b.bin")}}
    assert json.loads((tmp_path / INVENTORY).read_text()) == files
    verify_inventory(tmp_path)  # as saved: no error


def test_a_file_deleted_from_a_saved_index_is_named(small_retriever, tmp_path):
    small_retriever.save(tmp_path / "idx")
    assert "index.faiss" in json.loads((tmp_path / "idx" / INVENTORY).read_text())
    (tmp_path / "idx" / "index.faiss").unlink()
    with pytest.raises(FileNotFoundError, match=r"idx: index.faiss is missing \(listed in files.json\)"):
        load_retriever(tmp_path / "idx")


def test_a_changed_program_file_is_named(static_retriever, tmp_path):
    save(SingleStepRAG(retriever=static_retriever, k=2), tmp_path / "prog")
    state = tmp_path / "prog" / "program.json"
    state.write_text(state.read_text().replace("{", "{ ", 1))
    with pytest.raises(ChecksumMismatchError, match=r"prog: program.json changed since the folder was saved"):
        load(tmp_path / "prog", retriever=static_retriever)


def test_a_verified_folder_is_not_hashed_again_until_a_file_changes(tmp_path, monkeypatch):
    import multihop.data.folders

    (tmp_path / "weights.bin").write_bytes(b"\x01" * 64)
    write_inventory(tmp_path)
    hashed = []
    real = multihop.data.folders.sha256_file
    monkeypatch.setattr(multihop.data.folders, "sha256_file", lambda path: hashed.append(path.name) or real(path))
    verify_inventory(tmp_path)
    assert "weights.bin" in hashed
    hashed.clear()
    verify_inventory(tmp_path)
    assert "weights.bin" not in hashed  # unchanged since it was found as listed
    (tmp_path / "weights.bin").write_bytes(b"\x02" * 64)  # same size, new content and time
    with pytest.raises(ChecksumMismatchError, match="weights.bin changed since the folder was saved"):
        verify_inventory(tmp_path)
