"""Reading a checkpoint of any VoxCPM release in the official layout (a directory or a Hugging Face repo
id) and loading its weights into modules, failing fast with a report of missing, unexpected and
mis-shaped keys. PyTorch is imported by what reads weights or resolves a device, not with this module:
finding a checkpoint and reading its config.json need none of it."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from polyvox.models.dtypes import DTYPE_NAMES, torch_dtype
from polyvox.runtime.startup import Progress, StartupError, stage

if TYPE_CHECKING:
    import torch
    from torch import nn

LM_FILES = ("model.safetensors", "pytorch_model.bin")
VAE_FILES = ("audiovae.safetensors", "audiovae.pth")
VAE_PREFIX = "audio_vae."
_SHOWN = 20
_LAYOUT = "config.json, tokenizer.json, model.safetensors and audiovae.pth (or .safetensors)"
REFETCH_HINT = "download the checkpoint again (hf download openbmb/VoxCPM2 --local-dir DIR)"
# How long the Hub may take to answer the one probe made before a download: huggingface_hub retries a
# Hub it cannot reach for ~25 s; this says at once that it cannot be reached.
HUB_PROBE_TIMEOUT_S = 5.0


class CheckpointError(StartupError):
    """A checkpoint that cannot be found, read, or does not fit the model it is loaded into; the
    message says which file or tensor and what to do."""


@dataclass
class KeyReport:
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    mismatched: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.missing or self.unexpected or self.mismatched)

    def __str__(self) -> str:
        parts = []
        for title, keys in (
            ("missing keys", self.missing),
            ("unexpected keys", self.unexpected),
            ("mis-shaped keys", self.mismatched),
        ):
            if keys:
                shown = ", ".join(keys[:_SHOWN]) + (
                    f", ... and {len(keys) - _SHOWN} more" if len(keys) > _SHOWN else ""
                )
                parts.append(f"{len(keys)} {title}: {shown}")
        return "; ".join(parts) + (
            "; the weights do not match config.json (another model size, or a damaged or edited file): "
            f"use the config.json that came with them, or {REFETCH_HINT}"
        )


def compare_keys(module: nn.Module, state: Mapping[str, torch.Tensor]) -> KeyReport:
    expected = module.state_dict()
    report = KeyReport(
        missing=sorted(expected.keys() - state.keys()),
        unexpected=sorted(state.keys() - expected.keys()),
    )
    for key in sorted(expected.keys() & state.keys()):
        want, got = tuple(expected[key].shape), tuple(state[key].shape)
        if want != got:
            report.mismatched.append(f"{key} (checkpoint {list(got)}, model {list(want)})")
    return report


def load_weights(module: nn.Module, state: Mapping[str, torch.Tensor], source: str) -> None:
    """Copy `state` into `module` (converting dtype and device); CheckpointError if the keys do not fit."""
    report = compare_keys(module, state)
    if report:
        raise CheckpointError(f"{source} does not fit {type(module).__name__}: {report}")
    module.load_state_dict(state, strict=True)


def local_checkpoint(path_or_repo: str | os.PathLike) -> Path | None:
    """The checkpoint's directory when it is here already (a directory, or a Hugging Face repo id in the
    local cache); None for a repo id still to download; CheckpointError for a path that is neither."""
    path = Path(path_or_repo).expanduser()
    if path.is_dir():
        return path
    text = str(path_or_repo)
    if path.exists() or text.startswith((".", "/", "~")) or text.count("/") != 1:
        raise CheckpointError(
            f"checkpoint directory {text!r} does not exist (and is not a Hugging Face repo id); "
            "pass --model an existing directory holding " + _LAYOUT + ", or a repo id such as openbmb/VoxCPM2"
        )
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo_id=text, local_files_only=True))
    except (LocalEntryNotFoundError, OSError, ValueError):
        return None


@contextlib.contextmanager
def _hub_errors(repo: str) -> Iterator[None]:
    """Hugging Face Hub failures as a CheckpointError saying what to do."""
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        yield
    except LocalEntryNotFoundError as exc:
        offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
        hint = "HF_HUB_OFFLINE is set" if offline else "the Hub could not be reached"
        raise CheckpointError(
            f"checkpoint {repo!r} is not a local directory, nor in the local Hugging Face cache, and {hint}; "
            f"download it first (`hf download {repo}`) or pass a local directory"
        ) from exc
    except (HfHubHTTPError, OSError, ValueError) as exc:
        raise CheckpointError(
            f"could not fetch checkpoint {repo!r} from the Hugging Face Hub: {exc}"
        ) from exc


def _require_hub(repo: str) -> None:
    """CheckpointError at once when the Hugging Face Hub cannot be reached (no network, DNS, a firewall),
    saying how to run offline; any answer at all (even 404 or 401) leaves the download to say more.
    Skipped under HF_HUB_OFFLINE, where huggingface_hub itself asks nothing of the network."""
    import httpx
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return
    try:
        httpx.head(f"{constants.ENDPOINT}/api/models/{repo}", timeout=HUB_PROBE_TIMEOUT_S)
    except httpx.TransportError as exc:
        raise CheckpointError(
            f"checkpoint {repo!r} is not a local directory, nor in the local Hugging Face cache, and the "
            f"Hugging Face Hub ({constants.ENDPOINT}) cannot be reached ({type(exc).__name__}: {exc}); "
            f"to run offline, download it where the Hub can be reached (`hf download {repo}`, into the "
            "cache HF_HOME names) and set HF_HUB_OFFLINE=1, or pass --model a local directory"
        ) from exc


def fetch_config(repo: str) -> Path:
    """config.json of a repo id not downloaded yet (a small file): enough to check the settings before
    the whole checkpoint downloads."""
    from huggingface_hub import hf_hub_download

    _require_hub(repo)
    with _hub_errors(repo):
        return Path(hf_hub_download(repo_id=repo, filename="config.json"))


def download_checkpoint(repo: str) -> Path:
    """The whole checkpoint of a repo id, with huggingface_hub's own progress bars on the terminal."""
    from huggingface_hub import snapshot_download

    _require_hub(repo)
    with stage(f"download {repo}"), _hub_errors(repo):
        return Path(snapshot_download(repo_id=repo))


def resolve_checkpoint(path_or_repo: str | os.PathLike) -> Path:
    """A local checkpoint directory, or a Hugging Face repo id found in the cache or downloaded by
    `snapshot_download`, which honours HF_HUB_OFFLINE and HF_HOME."""
    return local_checkpoint(path_or_repo) or download_checkpoint(str(path_or_repo))


def read_config(directory: Path) -> dict[str, Any]:
    path = directory / "config.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise CheckpointError(
            f"{directory} has no config.json, so it is not a VoxCPM2 checkpoint directory (one holds "
            f"{_LAYOUT}); pass --model the directory that holds them"
        ) from exc
    except json.JSONDecodeError as exc:
        raise CheckpointError(
            f"{path} is not valid JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}; {REFETCH_HINT}"
        ) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path} cannot be read: {exc}") from exc


def _first(directory: Path, names: tuple[str, ...]) -> Path | None:
    return next((directory / n for n in names if (directory / n).is_file()), None)


def read_state(path: Path) -> dict[str, torch.Tensor]:
    """CPU tensors of a .safetensors file or a torch pickle (state possibly under "state_dict")."""
    import torch

    try:
        if path.suffix == ".safetensors":
            return _read_safetensors(path)
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated or foreign files raise many different types
        raise CheckpointError(
            f"{path} could not be read ({type(exc).__name__}: {exc}): the file is damaged or incomplete; "
            + REFETCH_HINT
        ) from exc
    if isinstance(state, Mapping) and isinstance(state.get("state_dict"), Mapping):
        state = state["state_dict"]
    if not isinstance(state, Mapping) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"{path} does not hold a state dict of tensors; {REFETCH_HINT}")
    return dict(state)


def _read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors import safe_open

    state = {}
    with safe_open(str(path), framework="pt", device="cpu") as file:
        names = list(file.keys())
        progress = Progress(f"read {path.name}", len(names), "tensors")
        for name in names:
            state[name] = file.get_tensor(name)
            progress.advance()
    return state


def read_shapes(path: Path) -> dict[str, torch.Tensor] | None:
    """Meta tensors shaped as a .safetensors file's, from its header alone (no weights are read); None
    for a torch pickle, which has no header to read (it is checked as it loads)."""
    if path.suffix != ".safetensors":
        return None
    import torch
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt", device="cpu") as file:
            names = list(file.keys())  # a safe_open handle is not iterable
            return {name: torch.empty(file.get_slice(name).get_shape(), device="meta") for name in names}
    except Exception as exc:  # truncated or foreign files raise many different types
        raise CheckpointError(
            f"{path} could not be read ({type(exc).__name__}: {exc}): the file is damaged or incomplete; "
            + REFETCH_HINT
        ) from exc


def weight_files(directory: Path) -> tuple[Path, Path | None]:
    """(LM file, separate AudioVAE file or None); CheckpointError when there are no LM weights."""
    lm_path = _first(directory, LM_FILES)
    if lm_path is None:
        raise CheckpointError(
            f"{directory} has no model weights (expected one of {', '.join(LM_FILES)}); {REFETCH_HINT}"
        )
    return lm_path, _first(directory, VAE_FILES)


def read_weights(directory: Path) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], str, str]:
    """(LM state, AudioVAE state, LM source, VAE source). Official files may carry the VAE inside the LM
    file under `audio_vae.`; a separate audiovae file takes precedence, as in the official loader."""
    lm_path, vae_path = weight_files(directory)
    lm_state = read_state(lm_path)
    vae_state = {k.removeprefix(VAE_PREFIX): v for k, v in lm_state.items() if k.startswith(VAE_PREFIX)}
    lm_state = {k: v for k, v in lm_state.items() if not k.startswith(VAE_PREFIX)}
    if vae_path is not None:
        vae_state.update(read_state(vae_path))
    elif not vae_state:
        raise CheckpointError(
            f"{directory} has no AudioVAE weights (expected one of {', '.join(VAE_FILES)}); {REFETCH_HINT}"
        )
    return lm_state, vae_state, str(lm_path), str(vae_path or lm_path)


def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """`auto` is CUDA when PyTorch sees a GPU, else the CPU; CheckpointError for a device it cannot use."""
    import torch

    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError:
        raise CheckpointError(f"unknown device {device!r}; use auto, cpu, cuda or cuda:N") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise CheckpointError(
            f"device {device!r} was asked for, but PyTorch sees no CUDA GPU here "
            f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'no'}); "
            "use --device cpu, or auto"
        )
    if resolved.type == "cuda" and (resolved.index or 0) >= torch.cuda.device_count():
        raise CheckpointError(
            f"device {device!r} was asked for, but PyTorch sees {torch.cuda.device_count()} CUDA GPU(s) "
            "(numbered from 0; CUDA_VISIBLE_DEVICES may hide some)"
        )
    return resolved


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """The LM dtype: `auto` is bfloat16 on CUDA and float32 elsewhere."""
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    return torch_dtype(dtype_name(dtype, str(device)))


def device_name(device: str | None = "auto") -> str:
    """The device `device` means, by name (`cpu`, `cuda:1`): the CPU by its name alone; `auto` and CUDA
    devices are PyTorch's to say (whether it sees a GPU, how many), which imports it. CheckpointError for
    one it cannot use."""
    if device == "cpu":
        return "cpu"
    return str(resolve_device(device))


def dtype_name(dtype: str | None, device: str) -> str:
    """The precision `dtype` means on `device`: `auto` is bfloat16 on CUDA and float32 elsewhere.
    CheckpointError for a name it does not know."""
    if dtype in (None, "auto"):
        return "bfloat16" if device.startswith("cuda") else "float32"
    if dtype not in DTYPE_NAMES:
        raise CheckpointError(f"unknown dtype {dtype!r} (use bfloat16, float16 or float32)")
    return DTYPE_NAMES[dtype]
