"""``--repo ID``: a Hugging Face model folder from huggingface_hub's local cache, or downloaded."""
from __future__ import annotations

from .config import ModelInputError

DEFAULT_REPO = "unsloth/Llama-3.2-1B-Instruct"
# Only what the example reads: no PyTorch .bin/.pth files, no original/ consolidated weights.
WANTED_FILES = ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                "model.safetensors", "model.safetensors.index.json", "model-*.safetensors"]


def _how_to(repo_id: str) -> str:
    return (f"download it yourself (`huggingface-cli download {repo_id} config.json "
            f"tokenizer.json model.safetensors --local-dir DIR`, or the files from "
            f"https://huggingface.co/{repo_id}) and pass --model-dir DIR; --tiny-random and "
            "--random-weights need no download")


def resolve_repo(repo_id: str) -> str:
    """The local folder of ``repo_id``: the cached snapshot when it is complete enough to load,
    otherwise a download (about 2.5 GB for Llama-3.2-1B). Raises ModelInputError saying how to
    get the files when huggingface_hub is missing or the network is not reachable."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise ModelInputError(f"--repo {repo_id} needs the huggingface_hub package (pip install "
                              f"huggingface_hub); or {_how_to(repo_id)}") from None
    try:
        return snapshot_download(repo_id, allow_patterns=WANTED_FILES, local_files_only=True)
    except Exception:  # not cached (the exception type differs between huggingface_hub versions)
        pass
    try:
        return snapshot_download(repo_id, allow_patterns=WANTED_FILES)
    except Exception as e:
        raise ModelInputError(f"cannot get {repo_id} from the Hugging Face Hub "
                              f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
                              f"{_how_to(repo_id)}") from None
