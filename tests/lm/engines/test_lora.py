"""PEFT adapters converted to GGUF LoRA: names, the rotary row order, and the same greedy text on both engines."""

import numpy as np
import pytest

from multihop.lm.backends import engine_lm, make_lm
from multihop.lm.engines import LlamaCppEngine
from multihop.lm.engines.lora import _lora_part, rotary_permute


def test_peft_weight_names_map_to_their_layer_and_part():
    assert _lora_part("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight") == (
        "model.layers.0.self_attn.q_proj", "lora_a")
    assert _lora_part("base_model.model.model.layers.11.mlp.down_proj.lora_B.weight") == (
        "model.layers.11.mlp.down_proj", "lora_b")
    with pytest.raises(ValueError, match="not a LoRA weight"):
        _lora_part("base_model.model.model.embed_tokens.lora_embedding_A")


def test_rotary_rows_interleave_the_halves_of_each_head():
    rows = np.arange(8).reshape(8, 1)  # two heads of four rows: halves (0 1)(2 3) and (4 5)(6 7)
    assert rotary_permute(rows, 2)[:, 0].tolist() == [0, 2, 1, 3, 4, 6, 5, 7]
    assert rotary_permute(np.arange(8).reshape(8, 1), 1)[:, 0].tolist() == [0, 4, 1, 5, 2, 6, 3, 7]


@pytest.mark.slow
def test_a_converted_student_writes_on_llama_cpp_what_it_writes_on_transformers(tmp_path, monkeypatch):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not built in this virtualenv")
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from multihop.data.paths import home
    from multihop.lm.backends import resolve_local

    models = home() / "models"  # the base model's conversions (HF folder, float32 GGUF) as set-up left them
    models.mkdir(parents=True, exist_ok=True)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "models").symlink_to(models, target_is_directory=True)
    monkeypatch.setenv("MULTIHOP_HOME", str(tmp_path / "home"))  # the adapter's conversion is cached there
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(resolve_local("smollm2"), dtype=torch.float32)
    student = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "k_proj", "v_proj",
                                                                                 "o_proj"]))
    for name, weight in student.named_parameters():
        if "lora_B" in name:  # PEFT starts B at zero: a trained student has moved it
            torch.nn.init.normal_(weight, std=0.02)
    student.save_pretrained(tmp_path / "adapter")
    def reply(engine, adapter=None):
        lm = make_lm("local:smollm2", engine=engine, adapter=adapter, cache=False, max_tokens=24)
        return lm("Name three colours.")[0]

    tuned = reply("transformers", tmp_path / "adapter")
    assert tuned != reply("transformers")  # the adapter changes the greedy text
    student = make_lm("local:smollm2", engine="llamacpp", adapter=tmp_path / "adapter", cache=False, max_tokens=24)
    split = student._engine_spec  # decodes from the shipped Q4_1 file: its own rounding; the float32 file alone
    float32 = engine_lm("local/student-float32", LlamaCppEngine(split.prompt_gguf, lora=split.lora), cache=False,
                        max_tokens=24)  # computes what transformers does
    assert float32("Name three colours.")[0] == tuned  # query and key rows in llama.cpp's rotary order
    assert student("Name three colours.")[0] != reply("llamacpp")  # the split engine runs the adapter, on both
    assert split._model.lora_path == split._model.prompts.lora_path == str(split.lora)  # of its contexts
    assert len(list((tmp_path / "home" / "lora-gguf").glob("*.gguf"))) == 1


def test_only_plain_lora_adapters_on_llama_models_convert(tmp_path):
    from multihop.lm import models
    from multihop.lm.engines.lora import gguf_lora

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_model.safetensors").write_bytes(b"")
    base = models.resolve("smollm2")
    (adapter / "adapter_config.json").write_text('{"lora_alpha": 8, "use_dora": true}')
    with pytest.raises(ValueError, match="only plain LoRA adapters"):
        gguf_lora(adapter, base, "0" * 64)
    (adapter / "adapter_config.json").write_text('{"r": 4}')
    with pytest.raises(ValueError, match="no lora_alpha"):
        gguf_lora(adapter, base, "0" * 64)
