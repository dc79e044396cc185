"""The request of `sweep`: a sweep file (the body of POST /v1/sweeps as YAML or JSON), then the flags over it, and
the `--space` mini-syntax for a dimension of the search:

    float:LOW:HIGH[:log]           training.lr_scale=float:0.1:3:log
    int:LOW:HIGH[:STEP][:log]      training.warmup_steps=int:50:800:log, model.n_encoder_layers=int:2:6:2
    choice:A,B,...                 model.preset=choice:tiny,small (each value read as JSON, else as text)
    choice:[JSON list]             model.dropout=choice:[0.0, 0.1] (for values with commas)

A dimension's form and bounds are checked here against app.schemas.sweeps, so a typo is named before anything is
sent; whether its setting exists and what values the job takes are the API's to check (a 422 naming them).
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path
from typing import Any

# PyYAML is a dependency of optuna, itself a dependency of the base install (pyproject.toml: the API runs sweeps),
# so `import yaml` works wherever the client does, not only with the dev extras that name pyyaml.
import yaml
from pydantic import TypeAdapter, ValidationError

from app.client.jobs import parse_setting
from app.schemas.sweeps import Dimension

FORMS = "float:LOW:HIGH[:log], int:LOW:HIGH[:STEP][:log] or choice:A,B,..."
EXAMPLES = "training.lr_scale=float:0.1:3:log, model.preset=choice:tiny,small or training.warmup_steps=int:50:800:log"
SUFFIXES = (".yaml", ".yml", ".json")
# The flags of `sweep` and the field of the request (app.schemas.sweeps.SweepCreate) each one sets.
SWEEP_FLAGS = {
    "name": "name",
    "dataset": "job.dataset_id",
    "valid_dataset": "job.valid_dataset_id",
    "objective": "job.objective",
    "max_minutes": "job.training.max_minutes",
    "metric": "objective.metric",
    "direction": "objective.direction",
    "budget_minutes": "budget.minutes",
    "budget_trials": "budget.trials",
    "concurrent": "max_concurrent_trials",
    "sampler": "sampler",
    "pruner": "pruner",
    "seed": "seed",
}
_DIMENSION: TypeAdapter[Any] = TypeAdapter(Dimension)


class SpecError(ValueError):
    """A sweep file that cannot be read, or a dimension whose mini-syntax is wrong."""


class _Loader(yaml.SafeLoader):  # type: ignore[misc]
    """YAML 1.1 reads `1e-4` (no dot) as text; a learning rate written so is a number here, as in JSON."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


def load_file(file: Path) -> dict[str, Any]:
    """The sweep file's mapping; SpecError naming the file and what is wrong with it."""
    if file.suffix.lower() not in SUFFIXES:
        raise SpecError(f"{file}: a sweep file ends in {', '.join(SUFFIXES)}, got {file.suffix or 'no suffix'!r}")
    try:
        text = file.read_text()
    except OSError as exc:
        raise SpecError(f"{file}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text) if file.suffix.lower() == ".json" else yaml.load(text, Loader=_Loader)
    except (ValueError, yaml.YAMLError) as exc:
        raise SpecError(f"{file}: not valid {'JSON' if file.suffix.lower() == '.json' else 'YAML'}: {exc}") from exc
    if not isinstance(data, dict):
        raise SpecError(
            f"{file}: expected a mapping of the sweep's fields (name, job, space, budget, ...), "
            f"got {type(data).__name__}"
        )
    return data


def _number(name: str, spec: str, which: str, text: str, kind: str) -> float | int:
    try:
        value: float | int = int(text) if kind == "int" else float(text)
    except ValueError:
        kind_of = "an integer" if kind == "int" else "a number"
        raise SpecError(f"{name}={spec}: {which} {text!r} is not {kind_of}") from None
    if not math.isfinite(value):
        raise SpecError(f"{name}={spec}: {which} {text!r} is not a finite number")
    return value


def _range(name: str, spec: str, kind: str, parts: list[str]) -> dict[str, Any]:
    usage = "float:LOW:HIGH[:log]" if kind == "float" else "int:LOW:HIGH[:STEP][:log]"
    if len(parts) < 2:
        raise SpecError(f"{name}={spec}: expected {usage}")
    dim: dict[str, Any] = {
        "type": kind,
        "low": _number(name, spec, "low", parts[0], kind),
        "high": _number(name, spec, "high", parts[1], kind),
    }
    for option in parts[2:]:
        if option == "log" and "log" not in dim:
            dim["log"] = True
        elif kind == "int" and "step" not in dim and re.fullmatch(r"[0-9]+", option):
            dim["step"] = int(option)
        else:
            raise SpecError(f"{name}={spec}: unexpected {option!r}; expected {usage}")
    return dim


def _choices(name: str, spec: str, text: str) -> dict[str, Any]:
    if text.lstrip().startswith("["):
        try:
            values = json.loads(text)
        except ValueError as exc:
            raise SpecError(f"{name}={spec}: the list is not valid JSON: {exc}") from exc
    else:
        items = text.split(",")
        if not all(item.strip() for item in items):
            raise SpecError(f"{name}={spec}: an empty value; expected choice:A,B,... (e.g. choice:tiny,small)")
        values = []
        for item in (item.strip() for item in items):
            try:
                values.append(json.loads(item))
            except ValueError:
                values.append(item)
    for value in values if isinstance(values, list) else []:
        if value is None or isinstance(value, dict | list):
            raise SpecError(f"{name}={spec}: {json.dumps(value)} is no choice: a value is text, a number or a bool")
    return {"type": "choice", "values": values}


def parse_dimension(name: str, spec: str) -> dict[str, Any]:
    """The dimension (as POST /v1/sweeps takes it) of the mini-syntax `spec` for the setting `name`; SpecError
    naming both and the forms there are."""
    kind, colon, rest = spec.partition(":")
    if not colon or kind not in ("float", "int", "choice"):
        raise SpecError(f"{name}={spec}: a dimension is {FORMS}")
    dim = _choices(name, spec, rest) if kind == "choice" else _range(name, spec, kind, rest.split(":"))
    try:
        _DIMENSION.validate_python(dim)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"][1:])  # past the dimension's type
        message = str(error["msg"]).removeprefix("Value error, ")
        raise SpecError(f"{name}={spec}: {where + ': ' if where else ''}{message}") from exc
    return dim


def parse_space(assignment: str) -> tuple[str, dict[str, Any]]:
    """`SETTING=TYPE:...` (a --space flag) as (setting, dimension)."""
    name, equals, spec = assignment.partition("=")
    if not equals or not name:
        raise SpecError(f"{assignment!r}: expected SETTING=TYPE:..., e.g. {EXAMPLES}")
    return name, parse_dimension(name, spec)


def _put(body: dict[str, Any], key: str, value: Any) -> None:
    """`body[a][b][c] = value` for the key `a.b.c`, making the sections the file left out; SpecError where the
    file gave a section as something other than a mapping."""
    *sections, name = key.split(".")
    for depth, section in enumerate(sections):
        inner = body.setdefault(section, {})
        if not isinstance(inner, dict):
            where = ".".join(sections[: depth + 1])
            raise SpecError(f"{where} is {inner!r}, not a mapping: cannot set {key}")
        body = inner
    body[name] = value


def sweep_body(args: argparse.Namespace) -> dict[str, Any]:
    """The POST /v1/sweeps request: the file's fields (a dimension there may be a mini-syntax string), then the
    flags over them, then `--set` (fixed job fields, checked as `submit` checks them) and `--space` (one dimension
    each, replacing the file's of that setting); a later flag wins. The trials' objective is translation where
    neither gives one, as with `submit`. SpecError or SettingError names a bad value."""
    body = load_file(Path(args.file)) if args.file else {}
    space = body.get("space")
    if isinstance(space, dict):
        body["space"] = {k: parse_dimension(k, v) if isinstance(v, str) else v for k, v in space.items()}
    for flag, key in SWEEP_FLAGS.items():
        value = getattr(args, flag)
        if value is not None:
            _put(body, key, value)
    for assignment in args.set or []:
        key, value = parse_setting(assignment)
        _put(body, f"job.{key}", value)
    if isinstance(body.get("job"), dict):
        body["job"].setdefault("objective", "translation")  # as `submit`'s default
    for assignment in args.space or []:
        name, dim = parse_space(assignment)
        space = body.setdefault("space", {})
        if not isinstance(space, dict):
            raise SpecError(f"space is {space!r}, not a mapping: cannot add {name}")
        space[name] = dim  # not _put: a setting's name has dots
    for point in getattr(args, "first_trial", None) or []:
        body.setdefault("first_trials", []).append(parse_point(point))
    return body


def parse_point(text: str) -> dict[str, Any]:
    """`SETTING=VALUE,SETTING=VALUE` (a --first-trial flag) as {setting: value}, each value read as `--set` reads
    it (the job's field decides: 0.1 a number, true a bool)."""
    point: dict[str, Any] = {}
    for assignment in text.split(","):
        name, value = parse_setting(assignment.strip())
        point[name] = value  # not _put: a setting's name has dots
    return point
