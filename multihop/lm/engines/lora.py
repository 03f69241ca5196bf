"""PEFT LoRA adapters converted to llama.cpp's GGUF LoRA format, so a distilled student runs on the llama.cpp engine.

What llama.cpp's own ``convert_lora_to_gguf.py`` does, for the Llama architecture our students use (that script
ships in llama.cpp's source tree, not in any package that installs here; the ``gguf`` package provides the writer
and the tensor names): every ``lora_A``/``lora_B`` pair of a target layer becomes ``<gguf tensor>.lora_a`` /
``.lora_b`` (stored as PEFT has them: ``A`` is ``r × in``, ``B`` is ``out × r``), with ``adapter.lora.alpha`` set so
that llama.cpp scales by ``alpha / r`` as PEFT does. The GGUF conversion of a Llama model permutes the rows of the
query and key projections for its rotary layout, so their ``B`` rows are permuted the same way; other architectures
are refused. A converted adapter is cached under ``MULTIHOP_HOME/lora-gguf`` keyed by the checksums of the adapter's
weights and configuration, of the base model, and by :data:`CONVERSION`.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from multihop.data.folders import sha256_file
from multihop.data.paths import home

ROTARY_PROJECTIONS = {"q_proj": "head_count", "k_proj": "head_count_kv"}  # rows permuted by the GGUF conversion
ARCHITECTURES = ("llama",)  # those whose GGUF conversion is the one reproduced here
CONVERSION = 1  # this conversion's version: part of the cache key, so a fix never reuses an old file


def gguf_lora(adapter: Path, base_gguf: Path, base_sha256: str) -> Path:
    """The GGUF LoRA of the PEFT ``adapter`` folder for the model in ``base_gguf``, converted once and cached."""
    digest = hashlib.sha256(f"conversion {CONVERSION}\n".encode())
    digest.update(sha256_file(adapter / "adapter_model.safetensors").encode())
    digest.update((adapter / "adapter_config.json").read_bytes())
    config = json.loads((adapter / "adapter_config.json").read_text())
    target = home() / "lora-gguf" / f"{digest.hexdigest()[:16]}-{base_sha256[:12]}.gguf"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            _convert(adapter / "adapter_model.safetensors", config, base_gguf, tmp)
            tmp.replace(target)
        finally:
            tmp.unlink(missing_ok=True)
    return target


def _convert(weights: Path, config: dict, base_gguf: Path, out: Path) -> None:
    import gguf
    from safetensors.numpy import load_file

    if config.get("use_rslora") or config.get("use_dora") or config.get("alpha_pattern") or config.get("rank_pattern"):
        raise ValueError("only plain LoRA adapters convert to GGUF (this one uses rsLoRA, DoRA or per-layer ranks)")
    if "lora_alpha" not in config:
        raise ValueError("the adapter's adapter_config.json has no lora_alpha")
    base = gguf.GGUFReader(base_gguf)
    arch = _field(base, "general.architecture")
    if arch not in ARCHITECTURES:
        raise ValueError(f"LoRA adapters convert to GGUF for {', '.join(ARCHITECTURES)} models; {base_gguf.name} is "
                         f"{arch} (run the student with engine='transformers')")
    heads = {key: int(_field(base, f"{arch}.attention.{key}")) for key in set(ROTARY_PROJECTIONS.values())}
    model_arch = next(key for key, value in gguf.MODEL_ARCH_NAMES.items() if value == arch)
    names = gguf.get_tensor_name_map(model_arch, int(_field(base, f"{arch}.block_count")))
    writer = gguf.GGUFWriter(str(out), arch)
    writer.add_string(gguf.Keys.General.TYPE, gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(config["lora_alpha"]))
    for name, tensor in sorted(load_file(str(weights)).items()):
        layer, kind = _lora_part(name)
        gguf_name = names.get_name(layer + ".weight", try_suffixes=(".weight",))
        if gguf_name is None:
            raise ValueError(f"{name}: no llama.cpp tensor for {layer}")
        projection = layer.rsplit(".", 1)[-1]
        if kind == "lora_b" and projection in ROTARY_PROJECTIONS:
            tensor = rotary_permute(tensor, heads[ROTARY_PROJECTIONS[projection]])
        writer.add_tensor(f"{gguf_name}.{kind}", tensor.astype("float32"))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _lora_part(name: str) -> tuple[str, str]:
    """``base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight`` → (``model.layers.0.self_attn.q_proj``,
    ``lora_a``)."""
    stem = name.removeprefix("base_model.model.").removesuffix(".weight")
    layer, _, part = stem.rpartition(".")
    if part not in ("lora_A", "lora_B"):
        raise ValueError(f"{name}: not a LoRA weight (embedding or bias adapters do not convert)")
    return layer, part.lower()


def rotary_permute(rows, n_head: int):
    """The row order llama.cpp's GGUF conversion gives a query or key projection: within each head, the two halves of
    the rotary dimensions interleaved."""
    return rows.reshape(n_head, 2, rows.shape[0] // n_head // 2, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)


def _field(reader, key: str):
    field = reader.get_field(key)
    if field is None:
        raise ValueError(f"the base GGUF has no {key}")
    return field.contents()
