"""Resume checkpoints load tensors and plain values only: a pickled object in an output folder is refused."""

import pytest
import torch

from multihop.checkpoints import load_checkpoint


class Payload:
    """Stands for what a tampered checkpoint would carry: an object whose unpickling runs code."""

    def __reduce__(self):
        return (print, ("a tampered checkpoint ran code",))


def test_tensors_and_plain_values_load(tmp_path):
    path = tmp_path / "state.pt"
    torch.save({"step": 3, "history": [0.5, 0.25], "config": {"layers": (1, 2)}, "w": torch.ones(2)}, path)
    state = load_checkpoint(path)
    assert state["step"] == 3 and state["config"]["layers"] == (1, 2) and state["w"].tolist() == [1.0, 1.0]


def test_a_checkpoint_holding_a_pickled_object_is_refused(tmp_path):
    path = tmp_path / "state.pt"
    torch.save({"step": 3, "payload": Payload()}, path)
    with pytest.raises(ValueError, match=r"state.pt is not a checkpoint of tensors and plain values .*remove it"):
        load_checkpoint(path)
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="remove it to start over"):
        load_checkpoint(path)
