"""The schedule kinds by name: each a tagged config section and a builder.

Contract: `SCHEDULES` maps `schedule.kind` to a `ScheduleKind`; it feeds config validation
(`read_schedule`: the kind's own keys, and a key of another kind named as such), the builders
(`make_scheduler`) and the tests. Adding a schedule is one module defining a config dataclass
(subclassing `LimitsConfig`, made of `eqdsl.fields.option`s) and a builder, plus one
`register_schedule` line (or an entry point in the `eqdsl.schedules` group).
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable

from eqdsl.diagnostics import EqdslError
from eqdsl.fields import Reader, names, one_of, read_fields
from eqdsl.registry import Registry
from eqdsl.schedule.mcts import MctsConfig, build_mcts
from eqdsl.schedule.pulsed import PulsedConfig, build_pulsed
from eqdsl.schedule.runner import LimitsConfig, ScheduleContext, Scheduler
from eqdsl.schedule.saturate import SaturateConfig, build_saturate


@dataclass(frozen=True)
class ScheduleKind:
    name: str
    config: type[LimitsConfig]
    build: Callable[[Any, ScheduleContext], Scheduler]
    summary: str


SCHEDULES: Registry[ScheduleKind] = Registry("schedule kind", "eqdsl.schedules")
DEFAULT_KIND = "saturate"


def register_schedule(kind: ScheduleKind) -> None:
    SCHEDULES.register(kind)


def schedule_names() -> list[str]:
    return SCHEDULES.names()


def read_schedule(data: Any) -> LimitsConfig:
    """The `schedule:` section: `kind` picks the config class; every other key is that kind's."""
    reader = Reader(data if data is not None else {}, "schedule")
    kind = reader.get("kind", DEFAULT_KIND, one_of(schedule_names), lambda: "one of " + names(schedule_names)())
    config = read_fields(SCHEDULES[kind].config, reader)
    for key in reader.unknown():
        if key in SCHEDULES[kind].config.elsewhere:
            raise EqdslError.one(f"`{key}` is not a schedule key: {SCHEDULES[kind].config.elsewhere[key]}",
                                 path=f"schedule.{key}")
        owners = [k for k in schedule_names() if key in {f.name for f in fields(SCHEDULES[k].config)}]
        if owners:
            raise EqdslError.one(f"`{key}` applies to {' or '.join(f'`kind: {k}`' for k in owners)} only; "
                                 f"got kind {kind!r}", path=f"schedule.{key}")
    reader.finish()
    return config


def make_scheduler(config: LimitsConfig, context: ScheduleContext) -> Scheduler:
    return SCHEDULES[type(config).kind].build(config, context)  # type: ignore[attr-defined]


register_schedule(ScheduleKind("saturate", SaturateConfig, build_saturate,
                               "every rule each iteration until saturation or a limit (TENSAT)"))
register_schedule(ScheduleKind("pulsed", PulsedConfig, build_pulsed,
                               "short explorations separated by extraction and rebuilding (Q-gym)"))
register_schedule(ScheduleKind("mcts", MctsConfig, build_mcts,
                               "Monte Carlo tree search over rule applications (PACT 2024)"))
