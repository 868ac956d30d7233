"""A task's ``resources`` (SkyPilot's fields): where and on what it runs.

``disk_size`` (GiB, whole), ``cpus`` and ``memory`` (GiB) take SkyPilot's forms (``256``,
``"256GB"``, ``"4+"``, ``"16GB"``); a ``+`` (at least) is read as the number itself.
``cloud`` takes each cloud and each store's name (``s3`` is read as ``aws``); ``infra`` with
a cloud alone is read as ``cloud``, ``ephemeral_storage`` (SkyPilot's old name) as
``disk_size``. Fields SkyPilot has that the local provider cannot give (``accelerators``,
``region``, ``autostop``, ...) are refused with the reason, never as unknown.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    model_validator,
)

from skycore.storage.entry_spec import lower, refused, upper
from skycore.stores import store_classes

_NUMBER = re.compile(r"(\d+(?:\.\d+)?|\.\d+)")
_SIZE = re.compile(r"(\d+(?:\.\d+)?|\.\d+)\s*([kmgtp])(i?b?)", re.IGNORECASE)
_GIB_PER_UNIT = {"k": Fraction(1, 1 << 20), "m": Fraction(1, 1 << 10), "g": Fraction(1)}
_GIB_PER_UNIT |= {"t": Fraction(1 << 10), "p": Fraction(1 << 20)}
_LOCAL = "skycore's local provider (Docker containers on this machine)"


def cloud_names() -> dict[str, str]:
    """Every name ``resources.cloud`` takes, and the cloud it means: ``docker``, the cloud of
    each registered store, and each store's own name (``s3`` -> ``aws``)."""
    stores = store_classes().values()
    names = {"docker": "docker"} | {cls.cloud: cls.cloud for cls in stores}
    return names | {cls.store_name: cls.cloud for cls in stores if cls.store_name not in names}


def _known_cloud(v: str | None) -> str | None:
    names = cloud_names()
    if v is None or v in names:
        return None if v is None else names[v]
    aliases = {c: [n for n, m in names.items() if m == c and n != c] for c in set(names.values())}
    shown = [f"'{c}'" + "".join(f" (or '{a}')" for a in aliases[c]) for c in sorted(aliases)]
    raise ValueError(f"'{v}' is not one of {', '.join(shown)}")


def _old_forms(data: Any) -> Any:
    """SkyPilot's other spellings read as skycore's: ``infra: <cloud>`` (no region or zone)
    as ``cloud``, ``ephemeral_storage`` as ``disk_size``."""
    if not isinstance(data, dict):
        return data
    data = dict(data)
    infra = data.get("infra")
    if isinstance(infra, str) and infra.lower() in cloud_names():
        if str(data.get("cloud") or infra).lower() != infra.lower():
            raise ValueError(f"infra: {infra} and cloud: {data['cloud']} disagree; keep one")
        data["cloud"] = data.pop("infra")
    if "ephemeral_storage" in data:
        old = data.pop("ephemeral_storage")
        if data.get("disk_size") is not None and old is not None:
            raise ValueError(
                "ephemeral_storage is SkyPilot's old name of disk_size and both are given; "
                "keep disk_size"
            )
        data["disk_size"] = data.get("disk_size", old) if old is None else old
    return data


def _recovery(v: Any) -> Any:
    return {"strategy": v} if isinstance(v, str) else v


def _amount(v: Any, sizes: bool, at_least: bool) -> Fraction | None:
    """The number in ``v`` (GiB for ``sizes``: a plain number is GiB, units are binary), or
    None if it is not one; a trailing ``+`` (at least) is dropped when ``at_least``."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int | float):
        return Fraction(v) if math.isfinite(v) else None
    if not isinstance(v, str):
        return None
    text = v.strip()
    if at_least and text.endswith("+"):
        text = text[:-1].rstrip()
    if _NUMBER.fullmatch(text):
        return Fraction(text)
    m = _SIZE.fullmatch(text) if sizes else None
    return Fraction(m.group(1)) * _GIB_PER_UNIT[m.group(2).lower()] if m else None


def _disk_size(v: Any) -> int | None:
    if v is None:
        return None
    gib = _amount(v, sizes=True, at_least=False)
    if gib is None:
        raise ValueError(
            f"{v!r} is not a disk size; write a whole number of GiB (256) or a number with a "
            'unit ("256GB", "256Gi", "1TB"; binary units)'
        )
    if gib <= 0 or gib.denominator != 1:
        shown = f"{float(gib):g} GiB, not a whole number of GiB" if gib > 0 else "not above 0"
        raise ValueError(f'{v!r} is {shown}; give whole GiB, e.g. 256 or "256GB"')
    return int(gib)


def _above_zero(v: Any, sizes: bool, not_one: str) -> float | None:
    """The amount in ``v`` (``"4+"``, at least, read as 4; GiB with units for ``sizes``), or
    ValueError ``{v!r} is not <not_one>`` unless it is a number above 0 (None stays None)."""
    if v is None:
        return None
    n = _amount(v, sizes=sizes, at_least=True)
    if n is None or n <= 0:
        raise ValueError(f"{v!r} is not {not_one}")
    return float(n)


def _cpus(v: Any) -> float | None:
    return _above_zero(
        v, False, 'a number of CPUs above 0; write a number (4, 0.5) or "4+" for at least 4'
    )


def _memory(v: Any) -> float | None:
    return _above_zero(
        v,
        True,
        'a memory size above 0; write GiB (16, "16+" for at least 16) or a number with a unit '
        '("16GB", "512MB"; binary units)',
    )


_CANNOT = {
    "accelerators": "has no accelerators; remove accelerators, or run this task with SkyPilot "
    "on a cloud that has them",
    "accelerator_args": "has no accelerators to pass arguments to; remove accelerator_args, "
    "or run this task with SkyPilot on a cloud that has accelerators",
    "instance_type": "has no instance types; remove instance_type and ask for what a node "
    "needs with cpus, memory and disk_size",
    "region": "runs every node on this machine, which is in no region; remove region",
    "zone": "runs every node on this machine, which is in no zone; remove zone",
    "infra": "has no regions or zones to choose from; write infra with a cloud alone (infra: "
    "docker picks the local provider) or remove infra",
    "ports": "runs every node on this machine's network, so a port a node listens on is "
    "reachable at the node's 127.x address without opening it; remove ports",
    "disk_tier": "gives each node a disk on this machine, which has one tier; remove "
    "disk_tier (disk_size sets the size)",
    "network_tier": "connects nodes through this machine's loopback network, which has one "
    "tier; remove network_tier",
    "local_disk": "gives each node one disk on this machine; remove local_disk (disk_size sets "
    "its size)",
    "volumes": "has no volumes (disks of their own); mount a bucket with a file_mounts storage "
    "entry or size each node's disk with disk_size, and remove volumes",
    "labels": "names each node's container itself (skycore status lists them) and puts no "
    "labels on it; remove labels",
    "autostop": "never stops a cluster by itself; remove autostop and run skycore stop (or "
    "launch with --down to tear the cluster down when the job ends)",
    "priority": "runs a cluster's jobs in the order they are submitted, with no priorities; "
    "remove priority",
    "priority_class": "runs containers, not Kubernetes pods, so there is no priority class; "
    "remove priority_class",
    "max_hourly_cost": "costs nothing per hour and has no price catalog to choose by; remove "
    "max_hourly_cost",
    "any_of": "has one set of resources to offer, so there are no candidates to choose from; "
    "write that set directly under resources and remove any_of",
    "ordered": "has one set of resources to offer, so there is no order of candidates to try; "
    "write that set directly under resources and remove ordered",
}
"""Fields SkyPilot has that the local provider cannot give, and why."""


def _cannot(name: str) -> AfterValidator:
    """Refuses ``resources.<name>`` when it is given a value, saying why."""

    def check(v: Any) -> Any:
        if v is not None:
            raise ValueError(f"{_LOCAL} {_CANNOT[name]}")
        return v

    return AfterValidator(check)


def _not_given() -> Any:
    return Field(default=None, exclude=True)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class JobRecovery(_Strict):
    """How a managed job recovers: the strategy and how often to restart on user errors."""

    strategy: Annotated[Literal["FAILOVER", "EAGER_NEXT_REGION"], BeforeValidator(upper)] = (
        "FAILOVER"
    )
    max_restarts_on_errors: Annotated[StrictInt, Field(ge=0)] = 0
    recover_on_exit_codes: Annotated[
        Any,
        refused(
            "skycore restarts a managed job whose run failed, whatever its exit code, while "
            "max_restarts_on_errors allows; remove recover_on_exit_codes"
        ),
    ] = _not_given()


class Resources(_Strict):
    """Where and on what the task runs. ``disk_size``: each node's disk in GiB; ``cpus`` and
    ``memory`` (GiB): what each node gets (``"4+"``: at least 4, read as 4)."""

    cloud: Annotated[str | None, BeforeValidator(lower), AfterValidator(_known_cloud)] = None
    use_spot: StrictBool = False
    image_id: str | None = None
    job_recovery: Annotated[JobRecovery | None, BeforeValidator(_recovery)] = None
    disk_size: Annotated[int | None, BeforeValidator(_disk_size)] = None
    cpus: Annotated[float | None, BeforeValidator(_cpus)] = None
    memory: Annotated[float | None, BeforeValidator(_memory)] = None

    accelerators: Annotated[Any, _cannot("accelerators")] = _not_given()
    accelerator_args: Annotated[Any, _cannot("accelerator_args")] = _not_given()
    instance_type: Annotated[Any, _cannot("instance_type")] = _not_given()
    region: Annotated[Any, _cannot("region")] = _not_given()
    zone: Annotated[Any, _cannot("zone")] = _not_given()
    infra: Annotated[Any, _cannot("infra")] = _not_given()
    ports: Annotated[Any, _cannot("ports")] = _not_given()
    disk_tier: Annotated[Any, _cannot("disk_tier")] = _not_given()
    network_tier: Annotated[Any, _cannot("network_tier")] = _not_given()
    local_disk: Annotated[Any, _cannot("local_disk")] = _not_given()
    volumes: Annotated[Any, _cannot("volumes")] = _not_given()
    labels: Annotated[Any, _cannot("labels")] = _not_given()
    autostop: Annotated[Any, _cannot("autostop")] = _not_given()
    priority: Annotated[Any, _cannot("priority")] = _not_given()
    priority_class: Annotated[Any, _cannot("priority_class")] = _not_given()
    max_hourly_cost: Annotated[Any, _cannot("max_hourly_cost")] = _not_given()
    any_of: Annotated[Any, _cannot("any_of")] = _not_given()
    ordered: Annotated[Any, _cannot("ordered")] = _not_given()

    @model_validator(mode="before")
    @classmethod
    def _other_spellings(cls, data: Any) -> Any:
        return _old_forms(data)
