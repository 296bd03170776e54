"""Which distribution provides a Python module: the evidence that tells a missing package from a missing file.

Two sources, in order: the distributions installed where FailAtlas runs (`importlib.metadata
.packages_distributions()`, every top-level module of every installed package), then `KNOWN_PACKAGES`, a fixed map
of import names of common research-code dependencies to the PyPI distribution that provides them (each checked to
exist on PyPI when it was written; most differ from their import name, which is why a map is needed at all). A
module neither names is not known to come from a package index: callers say so rather than guess.
"""

from __future__ import annotations

import functools

KNOWN_PACKAGES: dict[str, str] = {
    # import name -> distribution on PyPI
    "accelerate": "accelerate", "albumentations": "albumentations", "apex": "apex", "bs4": "beautifulsoup4",
    "catboost": "catboost", "cv2": "opencv-python", "datasets": "datasets", "deepspeed": "deepspeed",
    "dgl": "dgl", "diffusers": "diffusers", "einops": "einops", "evaluate": "evaluate", "faiss": "faiss-cpu",
    "fairseq": "fairseq", "flash_attn": "flash-attn", "gensim": "gensim", "gym": "gym", "gymnasium": "gymnasium",
    "h5py": "h5py", "hdbscan": "hdbscan", "huggingface_hub": "huggingface-hub", "hydra": "hydra-core",
    "imageio": "imageio", "jax": "jax", "jsonlines": "jsonlines", "keras": "keras", "lightgbm": "lightgbm",
    "lightning": "lightning", "matplotlib": "matplotlib", "mmcv": "mmcv", "networkx": "networkx", "nltk": "nltk",
    "numba": "numba", "numpy": "numpy", "omegaconf": "omegaconf", "openai": "openai", "optuna": "optuna",
    "pandas": "pandas", "peft": "peft", "PIL": "Pillow", "pytorch_lightning": "pytorch-lightning",
    "rdkit": "rdkit", "scipy": "scipy", "seaborn": "seaborn", "sentence_transformers": "sentence-transformers",
    "sentencepiece": "sentencepiece", "skimage": "scikit-image", "sklearn": "scikit-learn",
    "sklearn_extra": "scikit-learn-extra", "spacy": "spacy", "statsmodels": "statsmodels",
    "tensorboard": "tensorboard", "tensorflow": "tensorflow", "tiktoken": "tiktoken", "timm": "timm",
    "tokenizers": "tokenizers", "torch": "torch", "torch_geometric": "torch-geometric",
    "torchaudio": "torchaudio", "torchmetrics": "torchmetrics", "torchvision": "torchvision", "tqdm": "tqdm",
    "transformers": "transformers", "trl": "trl", "umap": "umap-learn", "vllm": "vllm", "wandb": "wandb",
    "xgboost": "xgboost", "yaml": "PyYAML",
}


@functools.cache
def _installed() -> dict[str, list[str]]:
    import importlib.metadata

    try:
        return dict(importlib.metadata.packages_distributions())
    except Exception:  # noqa: BLE001 - a broken installed distribution must not stop mining; the map still answers
        return {}


def package_of(module: str) -> str | None:
    """The distribution that provides `module` (its top-level name is what counts), or None when no evidence says
    a package index provides it."""
    top = module.split(".")[0]
    if not top.isidentifier():
        return None
    installed = _installed().get(top)
    if installed:
        return installed[0]
    return KNOWN_PACKAGES.get(top)
