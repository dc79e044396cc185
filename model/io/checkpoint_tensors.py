"""Model and optimizer state as safetensors bytes (no pickle anywhere): tied tensors stored once with their other
names in the metadata; optimizer tensors as "state.{index}.{key}" with groups, numbers and parameter names as JSON
metadata, so a resumed optimizer is checked to index the same parameters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save
from torch import Tensor, nn

from model.io.checkpoint_files import CheckpointError


def _dedup(state: dict[str, Tensor]) -> tuple[dict[str, Tensor], dict[str, str]]:
    """(tensors to store, {alias: stored name}); safetensors refuses tensors that share memory.

    Names that view exactly the same memory (tied embeddings) become aliases of the first name; a tensor that
    overlaps another one in any other way is copied, so it is stored on its own.
    """
    tensors: dict[str, Tensor] = {}
    aliases: dict[str, str] = {}
    seen: dict[tuple[int, int | torch.SymInt, tuple[int, ...], tuple[int, ...], torch.dtype, torch.device], str] = {}
    storages: set[int] = set()
    for name, t in state.items():
        t = t.detach()
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride(), t.dtype, t.device)
        if key in seen:
            aliases[name] = seen[key]
            continue
        ptr = t.untyped_storage().data_ptr()
        shared = ptr in storages and t.numel() > 0
        storages.add(ptr)
        seen[key] = name
        tensors[name] = (t.clone() if shared else t).to("cpu").contiguous()
    return tensors, aliases


def encode_model(model: nn.Module) -> bytes:
    tensors, aliases = _dedup(model.state_dict())
    return st_save(tensors, metadata={"format": "pt", "aliases": json.dumps(aliases, sort_keys=True)})


def decode_model(data: bytes, where: Path) -> dict[str, Tensor]:
    tensors, metadata = _safetensors(data, where)
    aliases = json.loads(metadata.get("aliases", "{}"))
    for alias, name in aliases.items():
        tensors[alias] = tensors[name]
    return tensors


def _param_names(model: nn.Module, optimizer: torch.optim.Optimizer) -> list[str]:
    """Name of every parameter in the optimizer's order (its state_dict indexes them 0, 1, ...)."""
    names = {id(p): n for n, p in model.named_parameters()}  # named_parameters lists a tied weight once
    out = []
    for group in optimizer.param_groups:
        for p in group["params"]:
            if id(p) not in names:
                raise ValueError("the optimizer holds a parameter that is not in the model")
            out.append(names[id(p)])
    return out


def encode_optimizer(model: nn.Module, optimizer: torch.optim.Optimizer) -> bytes:
    """Optimizer tensors as "state.{index}.{key}"; numbers, groups and parameter names as JSON metadata."""
    sd = optimizer.state_dict()
    tensors: dict[str, Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for index, per_param in sd["state"].items():
        for key, value in per_param.items():
            if isinstance(value, Tensor):
                tensors[f"state.{index}.{key}"] = value.detach().to("cpu").contiguous()
            else:
                scalars.setdefault(str(index), {})[key] = value
    metadata = {
        "param_groups": json.dumps(sd["param_groups"]),
        "scalars": json.dumps(scalars),
        "param_names": json.dumps(_param_names(model, optimizer)),
        "optimizer": type(optimizer).__name__,
    }
    return st_save(tensors, metadata=metadata)


def decode_optimizer(data: bytes, where: Path) -> dict[str, Any]:
    tensors, metadata = _safetensors(data, where)
    try:
        state: dict[int, dict[str, Any]] = {}
        for key, value in tensors.items():
            _, index, name = key.split(".", 2)
            state.setdefault(int(index), {})[name] = value
        for index, values in json.loads(metadata["scalars"]).items():
            state.setdefault(int(index), {}).update(values)
        groups = json.loads(metadata["param_groups"])
        for group in groups:
            if "betas" in group:
                group["betas"] = tuple(group["betas"])
        return {
            "state": state,
            "param_groups": groups,
            "param_names": json.loads(metadata["param_names"]),
            "optimizer": metadata.get("optimizer"),
        }
    except (KeyError, ValueError) as e:
        raise CheckpointError(f"{where}: malformed optimizer metadata ({e})") from e


def load_optimizer_state(optimizer: torch.optim.Optimizer, model: nn.Module, state: dict[str, Any]) -> None:
    """Load what load_checkpoint returned as optimizer_state, after checking it indexes the same parameters."""
    expected = _param_names(model, optimizer)
    if state["param_names"] != expected:
        raise CheckpointError(
            f"optimizer state is for parameters {state['param_names'][:3]}... "
            f"but this model's optimizer holds {expected[:3]}..."
        )
    if state.get("optimizer") not in (None, type(optimizer).__name__):
        raise CheckpointError(f"optimizer state is for {state['optimizer']}, not {type(optimizer).__name__}")
    optimizer.load_state_dict({"state": state["state"], "param_groups": state["param_groups"]})


def _safetensors(data: bytes, where: Path) -> tuple[dict[str, Tensor], dict[str, str]]:
    """Parse safetensors bytes; anything else (a pickle, say) is refused, never executed."""
    try:
        tensors = st_load(data)
        n = int.from_bytes(data[:8], "little")
        header = json.loads(data[8 : 8 + n])
    except (SafetensorError, ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{where} is not a valid safetensors file: {e}") from e
    return tensors, header.get("__metadata__", {}) or {}
