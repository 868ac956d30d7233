"""Target files: where the conformance suite finds a store that is not the local cloud.

A target file names one store, the ``user`` account skycore runs as and, optionally, an
``other`` account and a public bucket ``user`` does not own. Each account is the store's own
skycore config section (the same fields as in ``~/.skycore/config.yaml``: keys, a token, an
account key), so a target is checked by the model skycore itself reads. Example (S3)::

    store: s3
    bucket_prefix: skyconf
    user:
      access_key_id: AKIA...
      secret_access_key: ...
      region: eu-west-1
    other:                      # optional: the public-not-by-user cases need it
      access_key_id: AKIA...
      secret_access_key: ...
    public_bucket: s3://a-public-bucket-you-do-not-own    # optional

``other`` inherits the fields it leaves out (an endpoint, a region, a project) from ``user``,
never a credential (a key, a token, an account name). A file readable by group or others is
refused, as ssh refuses a private key; so is an ``other`` with the user's own credentials.
"""

from __future__ import annotations

import re
import secrets
import stat
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from harness.errors import CloudError
from skycore.yaml_errors import yaml_problem

PREFIX_PATTERN = r"[a-z][a-z0-9]{1,11}"
RUN_ID_LENGTH = 8
SECRET_FIELD = re.compile(r"(secret|key|token|password|credential|sas)", re.IGNORECASE)
NOT_SECRET_FIELDS = frozenset({"access_key_id", "account_name"})
RUN_ID_PATTERN = re.compile(f"^[0-9a-f]{{{8}}}$")


def is_credential(field: str) -> bool:
    """True for a field that names or proves an account (never inherited by ``other``)."""
    return field in NOT_SECRET_FIELDS or bool(SECRET_FIELD.search(field))


class TargetError(CloudError):
    """A target file that cannot be used (the message names the field and the fix)."""


class Target(BaseModel):
    """A parsed target file (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    store: str
    bucket_prefix: str = Field(default="skyconf", pattern=f"^{PREFIX_PATTERN}$")
    user: dict[str, Any]
    other: dict[str, Any] | None = None
    public_bucket: str | None = None
    path: Path | None = Field(default=None, exclude=True)

    @field_validator("user", "other")
    @classmethod
    def _section_is_a_mapping(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, dict):
            raise ValueError("must be a mapping of the store's config fields")
        return value

    @property
    def has_other(self) -> bool:
        """True if the file names the other account."""
        return self.other is not None

    def section(self, owner: str) -> Any:
        """``owner``'s (user or other) config section as the store's own config model."""
        from skycore.stores import get_store_class

        if owner == "user":
            raw = self.user
        else:
            inherited = {k: v for k, v in self.user.items() if not is_credential(k)}
            raw = {**inherited, **(self.other or {})}
        model = get_store_class(self.store).config_model
        try:
            return model.model_validate(raw)
        except ValidationError as e:
            problems = "; ".join(
                f"{owner}.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
                for err in e.errors()
            )
            raise TargetError(
                f"Target file {self.path}: {problems}. The '{owner}' account takes the fields "
                f"of skycore's '{self.store}' config section ({model.__name__})."
            ) from None

    def secrets(self) -> list[str]:
        """Every credential value in the file (to keep out of output, logs and reports)."""
        found: list[str] = []
        for account in (self.user, self.other or {}):
            for name, value in account.items():
                if (
                    isinstance(value, str)
                    and len(value) >= 6
                    and SECRET_FIELD.search(name)
                    and name not in NOT_SECRET_FIELDS
                ):
                    found.append(value)
        return found


def check_permissions(path: Path) -> None:
    """Refuse a target file that group or others may read or write."""
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise TargetError(
            f"Target file {path} is accessible by group or others (mode {mode:04o}) and holds "
            f"credentials; the suite refuses it, as ssh refuses a private key. Run "
            f"'chmod 600 {path}' and try again."
        )


def load_target(path: Path | str) -> Target:
    """Read and check a target file (permissions, fields, a registered store)."""
    from skycore.stores import store_names

    path = Path(path).expanduser()
    if not path.is_file():
        raise TargetError(
            f"Target file {path} does not exist. Write one by hand (docs/conformance.md) or "
            "for the local cloud with 'harness target STORE > t.yaml'."
        )
    check_permissions(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:  # yaml_problem: never str(e), which quotes the line
        problem = yaml_problem(e, unnamed="a syntax error")
        raise TargetError(
            f"Target file {path} is not valid YAML{problem}. Fix that line."
        ) from None
    if not isinstance(raw, dict):
        raise TargetError(f"Target file {path} must be a mapping with 'store' and 'user'.")
    try:
        target = Target.model_validate(raw)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()
        )
        raise TargetError(
            f"Target file {path}: {problems}. Fields: store, user, optional other, "
            "public_bucket and bucket_prefix (2-12 lowercase letters and digits)."
        ) from None
    if target.store not in store_names():
        raise TargetError(
            f"Target file {path}: store '{target.store}' is not registered; registered: "
            f"{', '.join(store_names())}. Install the store's package or fix 'store'."
        )
    target.path = path
    target.section("user")
    if target.has_other:
        target.section("other")
        user_creds = {k: v for k, v in target.user.items() if is_credential(k)}
        other_creds = {k: v for k, v in (target.other or {}).items() if is_credential(k)}
        if not other_creds or other_creds.items() <= user_creds.items():
            raise TargetError(
                f"Target file {path}: 'other' has no credentials of its own (they are the "
                "user's or missing). Give 'other' the keys of a second account, or leave "
                "'other' out (the tests that need it are then skipped)."
            )
    return target


def check_run_id(run_id: str) -> str:
    """``run_id`` if it is one :func:`new_run_id` makes (8 hex digits), else TargetError."""
    if not RUN_ID_PATTERN.match(run_id):
        raise TargetError(
            f"Run id '{run_id}' is not 8 lowercase hex digits; clean-up finds a run's buckets "
            "by it. Leave --run-id out to get a new one."
        )
    return run_id


def new_run_id() -> str:
    """A run id: every bucket a run creates carries it after the prefix."""
    return secrets.token_hex(RUN_ID_LENGTH // 2)


def run_tag(prefix: str, run_id: str) -> str:
    """``PREFIX-RUNID``: the part every bucket name of one run contains."""
    return f"{prefix}-{run_id}"


def tag_pattern(prefix: str) -> re.Pattern[str]:
    """Bucket names of any run with ``prefix``: ``PREFIX-<run id>`` as a dash-separated
    part of the name; group 1 is the run id."""
    return re.compile(rf"(?:^|-){re.escape(prefix)}-([0-9a-f]{{{RUN_ID_LENGTH}}})(?:-|$)")


def dump_target(store: str, user: Any, other: Any, public_bucket: str | None) -> str:
    """A target file's text for ``store`` (sections as config models or dicts)."""

    def plain(section: Any) -> dict[str, Any]:
        data = section.model_dump() if isinstance(section, BaseModel) else dict(section)
        return {k: v for k, v in data.items() if v is not None}

    doc: dict[str, Any] = {"store": store, "bucket_prefix": "skyconf", "user": plain(user)}
    if other is not None:
        doc["other"] = plain(other)
    if public_bucket:
        doc["public_bucket"] = public_bucket
    return yaml.safe_dump(doc, sort_keys=False)
