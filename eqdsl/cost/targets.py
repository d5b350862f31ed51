"""Hardware targets: YAML files giving values to a language's `param`s (read by its cost rules).

Contract: `load_target(ref, base)` reads a shipped target by name (`t4`, `a100`, `h100`, `cpu`) or a
`.yaml` path; `bind_target(language, target)` returns the values of exactly the params the
language declares (a param declared with a default may be left out: it gets the default), or
raises `EqdslError` naming the missing or unknown param (with the file). Values are ints ≥ 0.
A language without params needs no target.

Target file:
    name: T4
    description: free text (where the numbers come from)
    params: {gflops: 8141, gbps: 320, launch_ns: 5000}
    runtime_rules: [conv-relu]   # optional: rules whose rewrite the runtime makes itself (its
                                 # fusions), so a run prices its input as the runtime runs it
    layouts: {min_channels: 16, channel_multiple: 4, blocked: [conv2d], follow: [relu]}  # optional:
                                 # the runtime's blocked layout (eqdsl.cost.layouts)
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from eqdsl import ir
from eqdsl.cost.layouts import Layouts, read_layouts
from eqdsl.diagnostics import EqdslError
from eqdsl.fields import load_yaml


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    params: dict[str, int]
    source: str
    runtime_rules: tuple[str, ...] = ()  # rewrites the target's runtime makes itself before it runs
    layouts: Layouts | None = None  # the runtime's blocked layout: reorders priced in predictions


def shipped_targets() -> list[str]:
    folder = resources.files("eqdsl.targets")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


def target_path(ref: str, base: Path | None) -> Path:
    """The target file `ref` names: a .yaml path (relative to `base`) or a shipped target."""
    candidate = (base / ref) if base is not None and not Path(ref).is_absolute() else Path(ref)
    if candidate.suffix in (".yaml", ".yml"):
        if not candidate.is_file():
            raise EqdslError.one(f"target file not found: {candidate}", path="target")
        return candidate
    shipped = resources.files("eqdsl.targets").joinpath(ref.lower() + ".yaml")
    if not shipped.is_file():
        raise EqdslError.one(f"unknown target {ref!r}; expected a .yaml path or one of: "
                             f"{', '.join(shipped_targets())}", path="target")
    return Path(str(shipped))


def load_target(ref: str, base: Path | None = None) -> Target:
    path = target_path(ref, base)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise EqdslError.one(f"cannot read target {path}: {err}") from None
    data = load_yaml(text, str(path))
    where = f"{path}: "
    if not isinstance(data, dict) or not isinstance(data.get("params"), dict):
        raise EqdslError.one("expected a mapping with `params: {name: int, ...}`", path=f"{where}params")
    params = {}
    for key, value in data["params"].items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise EqdslError.one(f"expected an int ≥ 0, got {value!r}", path=f"{where}params.{key}")
        params[str(key)] = value
    rules = data.get("runtime_rules", [])
    if not isinstance(rules, list) or not all(isinstance(r, str) and r for r in rules):
        raise EqdslError.one(f"expected a list of rule names, got {rules!r}", path=f"{where}runtime_rules")
    return Target(str(data.get("name", path.stem)), str(data.get("description", "")), params, str(path), tuple(rules),
                  read_layouts(data.get("layouts"), f"{where}layouts"))


def bind_target(language: ir.Language, target: Target | None, setting: str = "target") -> dict[str, int]:
    """The values of the params `language` declares, from `target`; without one, an error that
    names how the user gives it: `setting` is a YAML key or a `--flag`."""
    if not language.params:
        return {}
    declared = ", ".join(language.params)
    if target is None:
        how = f"pass {setting} with" if setting.startswith("--") else f"set `{setting}:` to"
        raise EqdslError.one(f"the cost rules of '{language.name}' read target params ({declared}); "
                             f"{how} one of {', '.join(shipped_targets())} or a .yaml file",
                             path=setting)
    missing = [p for p, d in language.params.items() if p not in target.params and d.default is None]
    unknown = [p for p in target.params if p not in language.params]
    if missing:
        raise EqdslError.one(f"target {target.name} gives no value for param '{missing[0]}' "
                             f"(the language declares {declared})", path=f"{target.source}: params")
    if unknown:
        raise EqdslError.one(f"unknown param '{unknown[0]}' (the language declares {declared})",
                             path=f"{target.source}: params.{unknown[0]}")
    return {p: target.params[p] if p in target.params else _default(d) for p, d in language.params.items()}


def _default(param: ir.TargetParam) -> int:
    assert param.default is not None, "bind_target refuses a missing param without a default first"
    return param.default
